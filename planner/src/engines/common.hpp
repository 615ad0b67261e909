#pragma once
// Helpers shared by the engine budgets (planner/src/engines/<name>.cpp), defined in
// registry.cpp: option checks, memory and weights, start-up checks. Numbers are printed
// with kvsight/number_text.hpp; versions read with kvsight/engine_version.hpp.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/engine_version.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::engine_detail {

constexpr std::uint64_t kGiBBytes = 1024ull * 1024ull * 1024ull;

// An engine's version (Engine::version, the one grammar of kvsight/engine_version.hpp).
using Version = EngineVersion;

// Fractions must lie in (0, 1]; throws InputError naming `flag`.
double check_fraction(double value, std::string_view flag);
// Non-negative GiB override to bytes; throws InputError naming `flag`.
std::uint64_t gib_to_bytes(double gib, std::string_view flag);

// Basic checks every engine shares: tp, pp, batch >= 1.
void check_common_options(const EngineOptions& options);

// The overhead overrides of plan (OverheadOverrides); --weights-gib every engine reads.
enum class OverheadFlag { activation, non_torch, cuda_graph, kv_transfer };
// Refuses (InputError, exit 2) an overhead flag the engine's budget has no term for:
// it would change nothing and the plan would read as if it had (issue #14 "no silent
// number from a flag"). `used`: the flags this engine's plan reads.
void refuse_unused_overheads(const EngineOptions& options, const std::string& engine,
                             std::initializer_list<OverheadFlag> used);

// Total device memory: --gpu-mem-gib, else the catalog figure; nullopt without either.
std::optional<std::uint64_t> total_memory(const GpuSpec* gpu, const EngineOptions& options);
// A warning when `version` is newer than the newest of engine.known_versions(): the version
// compares as at least every rule's start, so the rules planned are the newest known
// release's (issue #28: vLLM 0.34.0 was planned with 0.33 rules and no word). Empty otherwise.
std::optional<std::string> newer_than_known_warning(const Engine& engine, const EngineVersion& version);

// Weights per rank: --weights-gib override or estimate_weights(), and the assumption that
// says which (decide() is the one caller).
WeightsEstimate weights_for(const ModelSpec& model, const EngineOptions& options, Assumption& assumption);

// Start-up checks shared by the engines that shard attention by tensor parallelism.
// vllm/config/model.py ModelConfig.verify_with_parallel_config ("Total number of
// attention heads (H) must be divisible by tensor parallel size (T)"); SGLang's
// model_config.py and TensorRT-LLM's mapping apply the same check (gates.md "Engine
// constraints independent of kernels").
StartupCheck tp_divides_heads_check(const ModelSpec& model, const EngineOptions& options,
                                    const std::string& display);
// vllm/model_executor/layers/linear.py QKVParallelLinear: KV heads are split (kv % tp
// == 0) or replicated (tp % kv == 0); anything else fails divide(). Absent for MLA.
std::optional<StartupCheck> kv_heads_split_check(const ModelSpec& model, const EngineOptions& options);

// --block-size for an engine with a default and a rule on what it accepts: the given
// value when `allowed` accepts it (else InputError("block_size", "...; allowed: " +
// allowed_text)), otherwise the default with its source.
BlockSizeChoice given_or_default_block(const EngineOptions& options, std::uint32_t default_tokens,
                                       const std::string& default_source, bool (*allowed)(std::uint32_t),
                                       const std::string& allowed_text);

// The pipeline stage whose layers hold the most KV per token (ties: the first).
std::uint32_t heaviest_stage(const ModelSpec& model, const KvTypes& types, const EngineOptions& options);

}  // namespace kvsight::engine_detail
