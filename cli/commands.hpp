#pragma once
// Subcommand registration. Each cli/cmd_<name>.cpp defines one add_<name>_command.
// A command's callback renders its result as text and hands it to emit(); the
// exit code goes to state.exit_code (0 ok, 1 check failed, 2 bad input, 3 device).
#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "output.hpp"
#include "output_file.hpp"

namespace kvsight::cli {

struct CliState {
  std::string format_text = "table";  // --format
  std::string output_path;            // --output: write here (atomically) instead of stdout
  int exit_code = 0;
  std::vector<std::string> typed_flags;  // every flag token as typed (normalize_arguments)
  std::string engine;                    // the selected engine, once known (error messages)
  bool options_ended = false;            // "--" was typed: what follows is a launch line
  std::vector<std::string> stray_words;  // words CLI11 took as a launch line without "--"
  // Option field name -> the launch line's flag that set it ("-ngl (llama-server)"), for errors.
  std::vector<std::pair<std::string, std::string>> launch_flags;
  std::vector<Artefact> artefacts;       // queued by emit/add_artefact, written by run_cli after the run
  Format format() const { return parse_format(format_text); }
};

// Queues text for --output or stdout; run_cli writes it (cli/output_file.hpp:
// random temporary, then rename; never a half-written file) once the command
// returned without an error.
void emit(CliState& state, const std::string& text);

// Queues another artefact of the run (--plot SVG, sweep --json-output) the same way.
// Its flag should carry ->check(output_target(flag)), so a bad path is refused
// before the run.
void add_artefact(CliState& state, const std::string& path, const std::string& flag, std::string text);

// Adds --format/--output to a subcommand.
void add_output_options(CLI::App& command, CliState& state);

void add_plan_command(CLI::App& app, CliState& state);
void add_inspect_command(CLI::App& app, CliState& state);
void add_models_command(CLI::App& app, CliState& state);
void add_gpus_command(CLI::App& app, CliState& state);
void add_probe_command(CLI::App& app, CliState& state);      // cli/cmd_probe.cpp (probes issue)
void add_gates_command(CLI::App& app, CliState& state);      // cli/cmd_gates.cpp (gates issue)
void add_cliff_command(CLI::App& app, CliState& state);      // cli/cmd_cliff.cpp (gates issue)
void add_preflight_command(CLI::App& app, CliState& state);  // cli/cmd_preflight.cpp (issue #10)
void add_fit_command(CLI::App& app, CliState& state);        // cli/cmd_fit.cpp (fleet issue #12)
void add_report_command(CLI::App& app, CliState& state);     // cli/cmd_report.cpp (fleet issue #12)

// Runs the CLI on argv; returns the process exit code. Used by main() and tests.
int run_cli(int argc, const char* const* argv);

}  // namespace kvsight::cli
