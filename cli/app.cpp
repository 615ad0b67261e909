// The top-level CLI: subcommands, global options, and the one place exceptions
// become exit codes (README.md "JSON contract": 0 ok, 1 check failed, 2 bad input, 3 device).
#include <algorithm>
#include <iostream>
#include <string>
#include <utility>

#include "commands.hpp"
#include "flag_groups.hpp"
#include "kvsight/error.hpp"
#include "kvsight/launcher.hpp"
#include "kvsight/suggest.hpp"
#include "output_file.hpp"

namespace kvsight::cli {

void emit(CliState& state, const std::string& text) {
  // Queued, not written: run_cli writes every artefact of the run once the command
  // has returned (cli/output_file.hpp), so a failing run leaves no file behind.
  std::string line = text;
  if (!line.empty() && line.back() != '\n') line += '\n';
  state.artefacts.push_back(Artefact{state.output_path, "--output", std::move(line)});
}

void add_artefact(CliState& state, const std::string& path, const std::string& flag, std::string text) {
  state.artefacts.push_back(Artefact{path, flag, std::move(text)});
}

void add_output_options(CLI::App& command, CliState& state) {
  // Checked at parse time like every output flag: a long sweep must not run only to
  // be refused for its --format afterwards.
  command.add_option("--format", state.format_text, "Output format: table, json, csv or markdown")
      ->default_str("table")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              (void)parse_format(text);
            } catch (const InputError& e) {
              const std::string message = e.what();
              return message.rfind("--format: ", 0) == 0 ? message.substr(10) : message;
            }
            return "";
          },
          "FORMAT"));
  command
      .add_option("--output,-o", state.output_path,
                  "Write the output to this file (a new name or a regular file; written to a random "
                  "temporary beside it, then renamed, only if the run succeeds)")
      ->check(output_target("--output"));
}

namespace {

// The values of the flags that name input files, on the subcommands that ran (a
// --model comma list names several).
std::vector<InputPath> input_paths(const CLI::App& command) {
  std::vector<InputPath> out;
  for (const CLI::App* sub : command.get_subcommands()) {
    for (const char* flag : {"--log", "--model", "--calibration"}) {
      const CLI::Option* option = sub->get_option_no_throw(flag);
      if (option == nullptr || option->count() == 0) continue;
      for (const std::string& value : option->results()) {
        std::size_t start = 0;
        for (std::size_t comma; (comma = value.find(',', start)) != std::string::npos; start = comma + 1)
          out.push_back({value.substr(start, comma - start), flag});
        out.push_back({value.substr(start), flag});
      }
    }
    const std::vector<InputPath> nested = input_paths(*sub);
    out.insert(out.end(), nested.begin(), nested.end());
  }
  return out;
}

// Issue #22 item 6: a word that is not a kvsight command is refused with the closest one,
// before CLI11 reads it as a stray argument ("A subcommand is required").
void check_command_word(const CLI::App& app, const std::vector<std::string>& arguments) {
  if (arguments.size() < 2 || arguments[1].empty() || arguments[1][0] == '-') return;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), arguments[1]) != names.end()) return;
  std::string listed;
  for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n;
  throw InputError("command", "'" + arguments[1] + "' is not a kvsight command" + did_you_mean(arguments[1], names) +
                                  "; commands: " + listed);
}

// A launch line typed without `--` ("kvsight plan vllm serve M ..."): its flags would be read as
// kvsight's. Refused before parsing, naming the form that works.
void check_launch_without_separator(const std::vector<std::string>& arguments) {
  for (std::size_t i = 2; i < arguments.size(); ++i) {
    if (arguments[i] == "--") return;
    const std::string& previous = arguments[i - 1];
    if (i > 2 && !previous.empty() && previous[0] == '-') continue;  // a flag's value
    const std::string base = arguments[i].substr(arguments[i].find_last_of('/') + 1);
    for (const Launcher* launcher : all_launchers()) {
      const std::string& first = launcher->commands.front().front();
      const bool python = first.rfind("python", 0) == 0 && base.rfind("python", 0) == 0;
      if (base == first || python)
        throw InputError("launch line", "'" + arguments[i] + "' starts a launch line; it goes after --, e.g. kvsight " +
                                            arguments[1] + " --gpu h100 -- " + arguments[i] + " ...");
    }
  }
}

std::string stray_text(const std::vector<std::string>& words) {
  std::string text;
  for (std::size_t i = 0; i < words.size() && i < 3; ++i) text += (i ? " " : "") + words[i];
  return text + (words.size() > 3 ? " ..." : "");
}

// Hints for flags CLI11 did not take: the closest flag of the command, and the engine whose
// launcher has it (a launch line goes after --).
void explain_unexpected(const CLI::App& app) {
  const auto parsed = app.get_subcommands();
  if (parsed.empty()) return;
  const CLI::App& sub = *parsed.front();
  std::vector<std::string> names;
  for (const CLI::Option* option : sub.get_options()) {
    for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : option->get_snames()) names.push_back("-" + s);
  }
  std::vector<std::string> words = app.remaining();
  for (const std::string& w : sub.remaining()) words.push_back(w);
  for (const std::string& word : words) {
    if (word.size() < 2 || word[0] != '-') continue;
    const std::string name = word.substr(0, word.find('='));
    std::string owners;
    for (const Launcher* launcher : all_launchers())
      if (find_parser_flag(*launcher, name) != nullptr) {
        std::string command;
        for (const std::string& w : launcher->commands.front()) command += (command.empty() ? "" : " ") + w;
        owners += (owners.empty() ? "" : ", ") + command;
      }
    const std::string closest = closest_name(name, names);
    if (!closest.empty()) std::cerr << "kvsight: " << name << ": did you mean " << closest << "?\n";
    if (!owners.empty())
      std::cerr << "kvsight: " << name << " is a flag of " << owners
                << "; paste the engine's launch line after --, e.g. kvsight " << sub.get_name() << " -- "
                << owners.substr(0, owners.find(',')) << " ... " << name << "\n";
  }
}

}  // namespace

// cli/cmd_explain.cpp (issue #13); declared here rather than in commands.hpp, which the
// other commands' files all include.
void add_explain_command(CLI::App& app, CliState& state);

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
  add_explain_command(app, state);
  add_fit_command(app, state);
  add_report_command(app, state);
  add_preflight_command(app, state);

  // Help and version text go to stdout as well: checked like any output.
  const auto finish_help = [](int code) {
    try {
      flush_stdout();
    } catch (const OutputError& e) {
      std::cerr << "kvsight: error: " << e.what() << "\n";
      return 3;
    }
    return code;
  };
  try {
    // Engines' single-dash words ("-tp", "-ctk") become their long names; what was
    // typed is kept for the messages that name a flag.
    const std::vector<std::string> arguments = normalize_arguments(argc, argv, state);
    check_command_word(app, arguments);
    check_launch_without_separator(arguments);
    std::vector<const char*> pointers;
    for (const std::string& argument : arguments) pointers.push_back(argument.c_str());
    app.parse(static_cast<int>(pointers.size()), pointers.data());
    if (!state.stray_words.empty())
      throw InputError("launch line", "'" + stray_text(state.stray_words) +
                                          "' is not a kvsight flag or value; a launch line goes after --, e.g. "
                                          "kvsight plan --gpu h100 -- vllm serve MODEL --max-model-len 32k");
    // The command returned: its flags were all valid and it succeeded (exit 0) or
    // its check failed (exit 1, still a result). Only now is anything written, and
    // only if no output is another output or an input.
    check_distinct_files(state.artefacts, input_paths(app));
    write_artefacts(state.artefacts);
  } catch (const CLI::CallForHelp& e) {
    return finish_help(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return finish_help(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return finish_help(app.exit(e));
  } catch (const CLI::ParseError& e) {
    // Unknown flags, missing values, values that do not convert: bad input.
    std::cerr << "kvsight: " << e.what() << "\n";
    if (e.get_exit_code() == 0) return 0;
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) explain_unexpected(app);
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
  } catch (const OutputError& e) {
    // The run succeeded but its result could not be written (disk full, I/O error).
    std::cerr << "kvsight: error: " << e.what() << "\n";
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
