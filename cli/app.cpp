// The top-level CLI: subcommands, global options, and the one place exceptions
// become exit codes (README.md "JSON contract": 0 ok, 1 check failed, 2 bad input, 3 device).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <unistd.h>

#include "commands.hpp"
#include "flag_groups.hpp"
#include "kvsight/error.hpp"

namespace kvsight::cli {

void emit(const CliState& state, const std::string& text) {
  if (state.output_path.empty()) {
    std::cout << text;
    if (!text.empty() && text.back() != '\n') std::cout << '\n';
    std::cout.flush();
    return;
  }
  // Write to a temporary name beside the target, then rename: a reader never sees
  // a half-written file, and a failed run leaves the old file alone.
  namespace fs = std::filesystem;
  const fs::path target(state.output_path);
  const fs::path temp = target.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError("--output", "cannot write '" + temp.string() + "' (does the directory exist?)");
    out << text;
    if (!text.empty() && text.back() != '\n') out << '\n';
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(temp, ignored);
      throw InputError("--output", "write to '" + temp.string() + "' failed");
    }
  }
  std::error_code error;
  fs::rename(temp, target, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw InputError("--output", "cannot rename to '" + target.string() + "': " + error.message());
  }
}

void add_output_options(CLI::App& command, CliState& state) {
  command.add_option("--format", state.format_text, "Output format: table, json, csv or markdown")
      ->default_str("table");
  command.add_option("--output,-o", state.output_path,
                     "Write the output to this file (written to a temporary name, then renamed)");
}

int run_cli(int argc, const char* const* argv) {
  CliState state;
  CLI::App app{
      "kvsight: GPU KV-cache memory planner and paged-attention probes.\n"
      "How much KV cache a model needs, how many sequences fit on a GPU under a real\n"
      "engine's budget rules, and which attention kernel decode will run on this device.\n"
      "Byte figures print in GiB (2^30 bytes) unless stated.",
      "kvsight"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvsight 0.1.0");
  app.footer(
      "Exit codes: 0 success, 1 a check failed, 2 bad input, 3 device or runtime error.\n"
      "Run 'kvsight COMMAND --help' for a command's options.");

  add_plan_command(app, state);
  add_inspect_command(app, state);
  add_models_command(app, state);
  add_gpus_command(app, state);
  add_probe_command(app, state);
  add_gates_command(app, state);
  add_cliff_command(app, state);

  try {
    // Engines' single-dash words ("-tp", "-ctk") become their long names; what was
    // typed is kept for the messages that name a flag.
    const std::vector<std::string> arguments = normalize_arguments(argc, argv, state);
    std::vector<const char*> pointers;
    for (const std::string& argument : arguments) pointers.push_back(argument.c_str());
    app.parse(static_cast<int>(pointers.size()), pointers.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Unknown flags, missing values, values that do not convert: bad input.
    std::cerr << "kvsight: " << e.what() << "\n";
    if (e.get_exit_code() == 0) return 0;
    std::cerr << "Run with --help for the allowed options.\n";
    return 2;
  } catch (const OverflowError& e) {
    std::cerr << "kvsight: error: " << e.what() << "\n";
    return 2;
  } catch (const InputError& e) {
    // A planner error names an option field ("block_size"); say it with the flag the
    // user typed, and the engine's own spelling beside it.
    const std::string flag = flag_for_error(state, e.field());
    const std::string what = e.what();
    const std::string prefix = e.field() + ": ";
    if (!flag.empty() && flag != e.field() && what.rfind(prefix, 0) == 0)
      std::cerr << "kvsight: error: " << flag << ": " << what.substr(prefix.size()) << "\n";
    else
      std::cerr << "kvsight: error: " << what << "\n";
    return 2;
  } catch (const DeviceError& e) {
    std::cerr << "kvsight: device error: " << e.what() << "\n";
    return 3;
  } catch (const std::bad_alloc&) {
    std::cerr << "kvsight: runtime error: out of host memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "kvsight: internal error: " << e.what() << "\n";
    return 3;
  }
  return state.exit_code;
}

}  // namespace kvsight::cli
