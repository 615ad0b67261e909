#pragma once
// The flag groups every command shares, defined once (issue #9: one flag grammar):
// model and GPU, engine and parallelism with each engine's own spellings, counts. The
// grammar of counts is the planner's (kvsight/counts.hpp); the table of option fields
// and their neutral spellings is the planner's (kvsight/engine_options.hpp); each
// engine's own spellings come from the engine (Engine::flags).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "commands.hpp"
#include "kvsight/app/launch_line.hpp"
#include "kvsight/budget.hpp"

namespace kvsight::cli {

// --model/-m alone (inspect: a model and no device).
CLI::Option* add_model_flag(CLI::App& command, std::string& model, bool required, const std::string& help);

// --model/-m (required unless `required` is false) and --gpu/-g.
void add_model_gpu_flags(CLI::App& command, std::string& model, std::string& gpu, bool model_required,
                         const std::string& model_help, const std::string& gpu_help);

// --engine, --engine-version, and every engine option field under kvsight's neutral
// spellings and every engine's own (help names the engine each spelling comes from).
void add_engine_flags(CLI::App& command, EngineOptions& options);

// Refuses (InputError, exit 2) a typed spelling that belongs to another engine than the
// selected one, or a neutral spelling of a field the engine does not read, naming the
// engine(s) it belongs to and the selected engine's own spelling. Records the engine in
// state for error messages. Call first in every callback that has engine flags.
void check_engine_spellings(CliState& state, const std::string& engine);

// A count flag in the one grammar: decimal, K/M suffixes, [min, max].
CLI::Option* add_count_flag(CLI::App& command, const std::string& names, std::uint64_t& target,
                            const std::string& help, std::uint64_t min, std::uint64_t max);

// --batch: sequences decoded together, a count from 1 to `max` (the commands that run or
// model a decode step cap it at 2^24; plan's figures only multiply it, overflow-checked).
// `names` adds a command's other spellings ("--batch,-b").
inline constexpr std::uint64_t kMaxDecodeBatch = 1ull << 24;
CLI::Option* add_batch_flag(CLI::App& command, std::uint64_t& batch, const std::string& help,
                            std::uint64_t max = kMaxDecodeBatch, const std::string& names = "--batch");

// A validator for an integer option that CLI11 converts itself: decimal digits only (no
// sign, 0x, suffix), leading zeros stripped first, since CLI11 reads "0200" as octal 128
// (issue #25 class 8: probe --head-dim 0200 ran at head_dim 128).
CLI::Validator decimal_integer();

// The user's own launch line after `--` (issue #22): `kvsight plan --gpu h100 -- vllm serve
// MODEL ...`. Words CLI11 did not take as kvsight's flags land here.
void add_launch_line(CLI::App& command, std::vector<std::string>& words);

// Reads the launch line (app/launch_line.hpp) into `options` (its engine and memory flags) and
// `model` (the line's model, unless --model names the one kvsight should read); nullopt when
// there is none (words given without `--` are kept in state.stray_words for run_cli to refuse).
// Refuses (InputError, exit 2) an --engine other than
// the launcher's, and a kvsight flag that sets an option the line sets too. Call first in the
// callback, before check_engine_spellings.
std::optional<app::LaunchLine> apply_launch_line(CliState& state, const std::vector<std::string>& words,
                                                 std::string& model, EngineOptions& options);

// --backend: where the probe kernels run (auto, cpu, cuda, hip; probes/ checks the name).
CLI::Option* add_backend_flag(CLI::App& command, std::string& backend, const std::string& help);

// Rewrites the engines' single-dash multi-letter spellings ("-tp", "-ctk") that CLI11
// cannot register into their long form, and records every flag token typed (before the
// rewrite) in state.typed_flags. Returns the new argument list (argv[0] first).
std::vector<std::string> normalize_arguments(int argc, const char* const* argv, CliState& state);

// "--tp (vLLM --tensor-parallel-size)" for an error naming an option field or one of
// its spellings, from what the user typed; "" when `field` names no option field.
std::string flag_for_error(const CliState& state, const std::string& field);

}  // namespace kvsight::cli
