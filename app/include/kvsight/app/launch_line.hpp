#pragma once
// The user's own launch line as input (issue #22): `vllm serve MODEL ...`,
// `python -m sglang.launch_server --model-path M ...`, `llama-server -m F ...`,
// `trtllm-serve MODEL ...`, pasted after `--`. The launcher names the engine; each flag is
// read with the engine's own grammar and classified by the engine's launcher
// (kvsight/launcher.hpp): applied to the same option fields kvsight's flags set, refused by
// name with the reason, or ignored (listed in the output).
#include <string>
#include <vector>

#include "kvsight/app/figures.hpp"
#include "kvsight/budget.hpp"

namespace kvsight::app {

// One flag of the line and what kvsight made of it.
struct LaunchFlagUse {
  std::string flag;    // as typed, without its value ("--max-model-len", "-tp")
  std::string value;   // as typed ("32k"; "" for a switch; values of a list joined by spaces)
  std::string field;   // applied: the option field it set ("max_model_len"); "" otherwise
  std::string effect;  // applied: the value kvsight took ("32000"), or a note
  std::string from;    // "" (the command line) or the config file it came from
};

struct LaunchLine {
  std::string command;  // the launcher as typed ("vllm serve", "python3 -m sglang.launch_server")
  std::string engine;   // Engine::name()
  std::string source;   // the engine source the flags were read from
  std::string model;    // the model the line names ("" none)
  std::string config_file;  // vLLM --config
  std::vector<LaunchFlagUse> applied;
  std::vector<LaunchFlagUse> ignored;
  std::vector<OptionField> fields;  // the option fields it set (for conflicts with kvsight's flags)
};

// Reads `words` (what followed `--`) and applies the memory flags to `options`
// (options.engine becomes the launcher's engine). Throws InputError naming the flag and the
// launcher for an unknown launcher, an unknown flag (with the engine that owns it, or the
// closest name), a missing value, a value the engine's grammar refuses, a flag given twice
// with different values, and a refused flag with its reason.
LaunchLine read_launch_line(const std::vector<std::string>& words, EngineOptions& options);

// The launch section of a command's output: JSON `launch.{command, engine, source, model,
// config, applied[], ignored[]}`, readable lines "launch line", "applied", "ignored".
FigureSection launch_figures(const LaunchLine& line);

// vLLM --config (vllm/utils/argparse_utils.py load_config_file, 0.33.0): a YAML mapping
// whose keys are flag names without dashes, turned into flags: true -> --key; false ->
// --no-key; a list -> --key v1 v2 ...; a mapping -> --key JSON; else --key str(value).
// kvsight reads the YAML subset such files use (block mappings, scalars, lists, one level of
// nested mapping) and refuses the rest naming the line. Throws InputError("--config", ...).
std::vector<std::string> read_vllm_config_flags(const std::string& path);
// The same from the file's text (for tests); `name` is the file name for messages.
std::vector<std::string> vllm_config_flags(const std::string& text, const std::string& name);

}  // namespace kvsight::app
