#pragma once
// An engine's launcher (issue #22): the command a user pastes (`vllm serve MODEL ...`,
// `python -m sglang.launch_server ...`, `llama-server ...`, `trtllm-serve MODEL ...`),
// every flag of its argument parser with how many values it takes, and what kvsight does
// with each: applies it to an option field (the same field kvsight's own flags set), refuses
// it naming why, or ignores it (no effect on the memory kvsight plans). Each engine owns its
// launcher (planner/src/engines/<engine>_launch.cpp); app/src/launch_line.cpp reads a line.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvsight/budget.hpp"

namespace kvsight {

// How many values a flag takes, as the engine's parser reads it.
enum class FlagValues {
  none,      // a switch
  one,       // one value ("--port 8000" or "--port=8000")
  optional,  // a value if the next word is not a flag (argparse nargs="?")
  many,      // one or more values, up to the next flag (argparse nargs="+")
  two,       // two values (llama.cpp --lora-scaled FNAME SCALE)
};

// One flag of a launcher's parser: its names (long first where it has one).
struct ParserFlag {
  FlagValues values;
  std::vector<std::string> names;
};

// How the engine itself reads a value (so a pasted value is the engine's number).
enum class ValueGrammar {
  text,                 // kept as typed (a type name, on/off/auto)
  python_int,           // Python int(): optional sign, digits, "_" between digits, spaces around
  vllm_int,             // vLLM human_readable_int (vllm/utils/argparse_utils.py): k=1e3, K=2^10 ...
  vllm_int_or_auto,     // human_readable_int_or_auto: also -1 and "auto" (-1)
  sglang_int,           // SGLang human_readable_int (sglang/srt/utils/common.py): k/M/G/T = 1000^n
                        // (decimals allowed), Ki/Mi/Gi/Ti = 1024^n; case-sensitive
  python_float,         // Python float()
  cpp_stoi,             // std::stoi (llama.cpp common/arg.cpp): leading digits, the rest dropped
  llamacpp_int_or_auto, // llama.cpp's integer or -1 = auto (-np)
  llamacpp_gpu_layers,  // -ngl: auto, all, or std::stoi
  llamacpp_on_off_auto, // -fa: on/enabled/true/1, off/disabled/false/0, auto/-1
};

// What kvsight does with a flag.
enum class FlagUse {
  ignore,  // no effect on the memory kvsight plans: accepted, listed as ignored
  apply,   // sets `field` (or, with no field, is accepted with its effect stated in `why`)
  refuse,  // memory-relevant and not modelled: exit 2 naming the flag and `why`
  model,   // names the model (--model, -m, --model-path)
  config,  // a YAML file of more flags (vLLM --config)
};

// The rule for one flag (looked up by any of its names). Flags of the parser with no rule
// are ignored.
struct LaunchRule {
  std::string name;
  FlagUse use = FlagUse::ignore;
  std::optional<OptionField> field;
  ValueGrammar grammar = ValueGrammar::text;
  std::string why;  // refuse: the reason; apply/ignore: a note for the output ("" none)
  // apply with no field: the values accepted (empty: any); any other value is refused,
  // naming these.
  std::vector<std::string> accepted{};
};

struct Launcher {
  std::string engine;                           // Engine::name()
  std::vector<std::vector<std::string>> commands;  // the words that start it ({"vllm", "serve"})
  std::string source;                           // the parser's file(s) and the version read
  bool positional_model = false;                // `vllm serve MODEL`, `trtllm-serve MODEL`
  // "--flag=value" is one flag and its value (argparse, click); llama.cpp takes the next word.
  bool equals_values = true;
  // "_" in a "--" flag's name is read as "-" (vLLM FlexibleArgumentParser, llama.cpp arg.cpp).
  bool underscores_are_dashes = false;
  // A value is the next word even when it starts with "-" (llama.cpp); argparse takes a
  // word that looks like a flag as the next flag unless it is a negative number.
  bool value_is_next_word = false;
  // A unique prefix of a "--" flag is that flag (argparse allow_abbrev, its default: SGLang's
  // documented "--tp 2" is --tp-size 2); click and llama.cpp match whole names only.
  bool abbreviations = false;
  // Single-dash words are one flag each (-tp, -ngl: argparse and llama.cpp match whole
  // words); no bundling of short switches.
  const std::vector<ParserFlag>* flags = nullptr;
  std::vector<LaunchRule> rules;
};

// A value as the engine reads it. Integers: `number`; -1 from an "...or_auto" grammar is
// `automatic`. Throws InputError(flag, ...) naming the value and the engine's grammar.
struct LaunchValue {
  std::int64_t number = 0;
  double real = 0.0;
  bool automatic = false;
  std::string text{};  // the value in kvsight's words, for the text grammars that map words
};
LaunchValue parse_launch_value(ValueGrammar grammar, std::string_view text, const std::string& flag);

// Every engine's launcher (registry order), for matching a line and naming the engine a flag
// belongs to.
std::vector<const Launcher*> all_launchers();

// The parser flag named `name` (any of its names) in `launcher`, or nullptr.
const ParserFlag* find_parser_flag(const Launcher& launcher, std::string_view name);
// The rule for `flag` (by any of its names), or nullptr (= ignore).
const LaunchRule* find_launch_rule(const Launcher& launcher, const ParserFlag& flag);

}  // namespace kvsight
