// Shared flag groups (flag_groups.hpp).
#include "flag_groups.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "kvsight/counts.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"

namespace kvsight::cli {

namespace {

bool is_long(const std::string& spelling) { return spelling.rfind("--", 0) == 0; }
bool is_short(const std::string& spelling) { return spelling.size() == 2 && spelling[0] == '-'; }
// "-tp", "-ctk": single dash, several letters; CLI11 reads "-tp" as "-t p".
bool is_single_dash_word(const std::string& spelling) {
  return spelling.size() > 2 && spelling[0] == '-' && spelling[1] != '-';
}

// Every spelling of a field: neutral first, then each engine's, without repeats.
std::vector<std::string> all_spellings(const OptionFieldInfo& info) {
  std::vector<std::string> out = info.neutral;
  for (const auto& engine : all_engines())
    for (const EngineFlag& flag : engine->flags())
      if (flag.field == info.field)
        for (const std::string& s : flag.spellings)
          if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

// The long name CLI11 registers first for a field (what a single-dash word becomes).
std::string primary_long(const OptionFieldInfo& info) {
  for (const std::string& s : all_spellings(info))
    if (is_long(s)) return s;
  return "--" + info.name;
}

// "[vLLM --tensor-parallel-size, -tp; SGLang --tp-size, ...]"
std::string spellings_help(const OptionFieldInfo& info) {
  std::string text;
  for (const auto& engine : all_engines())
    for (const EngineFlag& flag : engine->flags())
      if (flag.field == info.field) {
        text += (text.empty() ? "" : "; ") + ("[" + engine->display_name() + "]");
        for (std::size_t i = 0; i < flag.spellings.size(); ++i) text += (i ? ", " : " ") + flag.spellings[i];
      }
  return text.empty() ? "" : ". " + text;
}

bool reads(const Engine& engine, OptionField field) { return engine.reads(field); }

}  // namespace

CLI::Option* add_model_flag(CLI::App& command, std::string& model, bool required, const std::string& help) {
  auto* option = command.add_option("--model,-m", model, help);
  if (required) option->required();
  return option;
}

void add_model_gpu_flags(CLI::App& command, std::string& model, std::string& gpu, bool model_required,
                         const std::string& model_help, const std::string& gpu_help) {
  add_model_flag(command, model, model_required, model_help);
  command.add_option("--gpu,-g", gpu, gpu_help);
}

void add_engine_flags(CLI::App& command, EngineOptions& options) {
  std::string engines;
  for (const auto& engine : all_engines()) {
    engines += (engines.empty() ? "" : ", ") + engine->name();
    for (const std::string& alias : engine->aliases()) engines += " / " + alias;
  }
  // No short form: llama.cpp's -e is --escape (issue #22 item 3: kvsight's short options never
  // shadow an engine's).
  command.add_option("--engine", options.engine, "Engine whose rules apply: " + engines)
      ->default_str("vllm");
  command.add_option("--engine-version", options.engine_version,
                     "Engine version whose defaults, rules and log lines to use (default: the newest known; vLLM 0.33.0): "
                     "MAJOR.MINOR[.PATCH] with an optional tag (0.27.1.dev5, 1.1.0rc2), llama.cpp bNNNN");
  for (const OptionFieldInfo& info : option_fields()) {
    std::string names;
    for (const std::string& s : all_spellings(info)) {
      if (is_single_dash_word(s)) continue;  // rewritten by normalize_arguments
      if (!is_long(s) && !is_short(s)) continue;
      names += (names.empty() ? "" : ",") + s;
    }
    const std::string help = info.help + spellings_help(info);
    const OptionField field = info.field;
    if (info.kind == OptionKind::flag) {
      command.add_flag_callback(
          names, [&options, field] { set_option(options, field, ""); }, help);
    } else {
      command.add_option_function<std::string>(
          names, [&options, field](const std::string& text) { set_option(options, field, text); }, help);
    }
  }
}

void check_engine_spellings(CliState& state, const std::string& engine_name) {
  const std::unique_ptr<Engine> engine = make_engine(engine_name);
  state.engine = engine->name();
  for (const std::string& typed : state.typed_flags) {
    const OptionFieldInfo* info = option_field_named(typed);
    if (info == nullptr) continue;  // not an engine option (--model, --format, ...)
    const bool neutral = std::find(info->neutral.begin(), info->neutral.end(), typed) != info->neutral.end();
    const std::string own = engine_spelling(*engine, info->field);
    if (neutral) {
      if (own.empty()) {
        std::string hint;
        if (info->field == OptionField::max_model_len && reads(*engine, OptionField::ctx_size))
          hint = "; its length is " + engine_spelling(*engine, OptionField::ctx_size);
        throw InputError(typed, engine->display_name() + " has no " + info->name + " option (--engine " +
                                    engine->name() + ")" + hint + "; see --help for each flag's engines");
      }
      continue;
    }
    bool engines_own = false;
    std::string owners;
    for (const SpellingOwner& owner : spelling_owners(typed)) {
      if (owner.engine == engine->name()) engines_own = true;
      if (owners.find(owner.display) == std::string::npos)
        owners += (owners.empty() ? "" : ", ") + owner.display;
    }
    if (engines_own) continue;
    throw InputError(typed, "is a " + owners + " flag, not one of " + engine->display_name() +
                                "'s (--engine " + engine->name() + ")" +
                                (own.empty() ? "; " + engine->display_name() + " has no such option"
                                             : "; " + engine->display_name() + " spells it " + own));
  }
}

CLI::Option* add_count_flag(CLI::App& command, const std::string& names, std::uint64_t& target,
                            const std::string& help, std::uint64_t min, std::uint64_t max) {
  const std::string flag = names.substr(0, names.find(','));
  return command.add_option_function<std::string>(
      names,
      [&target, flag, min, max](const std::string& text) { target = parse_count_in(text, flag, min, max); },
      help);
}

CLI::Option* add_batch_flag(CLI::App& command, std::uint64_t& batch, const std::string& help, std::uint64_t max,
                            const std::string& names) {
  return add_count_flag(command, names, batch, help, 1, max);
}

CLI::Validator decimal_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
          return "'" + text + "' is not a decimal integer; allowed: digits only (no sign, 0x, suffix)";
        text.erase(0, std::min(text.find_first_not_of('0'), text.size() - 1));
        return "";
      },
      "");
}

void add_launch_line(CLI::App& command, std::vector<std::string>& words) {
  command.add_option("launch", words,
                     "Your own launch line, after --: vllm serve MODEL ..., python -m sglang.launch_server "
                     "--model-path M ..., llama-server -m F ..., trtllm-serve MODEL ... Its flags keep the "
                     "engine's names and value grammar (vLLM 32k = 32,000); kvsight's own flags (before --) "
                     "keep kvsight's (32K = 32,768). See docs/launch-lines.md");
}

std::optional<app::LaunchLine> apply_launch_line(CliState& state, const std::vector<std::string>& words,
                                                 std::string& model, EngineOptions& options) {
  if (words.empty()) return std::nullopt;
  if (!state.options_ended) {
    // Refused by run_cli once CLI11 has reported any flag it did not know (the value of an
    // unknown flag lands here too).
    state.stray_words = words;
    return std::nullopt;
  }
  const bool engine_typed = std::find(state.typed_flags.begin(), state.typed_flags.end(), "--engine") !=
                            state.typed_flags.end();
  const std::string typed_engine = options.engine;
  app::LaunchLine line = app::read_launch_line(words, options);
  if (engine_typed && make_engine(typed_engine)->name() != line.engine)
    throw InputError("--engine", "is " + typed_engine + ", and the launch line is " + line.command + " (" +
                                     line.engine + "); drop --engine, the launcher names the engine");
  for (const std::string& typed : state.typed_flags) {
    const OptionFieldInfo* info = option_field_named(typed);
    if (info == nullptr ||
        std::find(line.fields.begin(), line.fields.end(), info->field) == line.fields.end())
      continue;
    std::string by;
    for (const app::LaunchFlagUse& use : line.applied)
      if (use.field == info->name) by = use.flag;
    throw InputError(typed, "sets " + info->name + ", which the launch line sets too (" + by +
                                "); give it once, in the launch line");
  }
  if (model.empty()) model = line.model;
  if (model.empty())
    throw InputError("--model", "is required: the launch line (" + line.command +
                                    ") names no model; add the engine's model argument or --model");
  state.engine = line.engine;
  for (const app::LaunchFlagUse& use : line.applied)
    if (!use.field.empty()) state.launch_flags.emplace_back(use.field, use.flag + " (" + line.command + ")");
  return line;
}

CLI::Option* add_backend_flag(CLI::App& command, std::string& backend, const std::string& help) {
  return command.add_option("--backend", backend, help);
}

std::vector<std::string> normalize_arguments(int argc, const char* const* argv, CliState& state) {
  std::map<std::string, std::string> rewrite;
  for (const OptionFieldInfo& info : option_fields())
    for (const std::string& s : all_spellings(info))
      if (is_single_dash_word(s)) rewrite[s] = primary_long(info);
  std::vector<std::string> out;
  bool options_end = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    // The engine, for messages about flags given before the command's callback runs.
    if (arg == "--engine" && i + 1 < argc && !options_end) state.engine = argv[i + 1];
    if (arg.rfind("--engine=", 0) == 0) state.engine = arg.substr(9);
    if (i > 0 && !options_end && arg == "--") options_end = state.options_ended = true;
    const bool flag_like =
        i > 0 && !options_end && arg.size() > 1 && arg[0] == '-' && !(arg[1] >= '0' && arg[1] <= '9');
    if (flag_like) {
      const std::size_t equals = arg.find('=');
      const std::string name = arg.substr(0, equals);
      state.typed_flags.push_back(name);
      if (auto found = rewrite.find(name); found != rewrite.end())
        arg = found->second + (equals == std::string::npos ? "" : arg.substr(equals));
    }
    out.push_back(std::move(arg));
  }
  return out;
}

std::string flag_for_error(const CliState& state, const std::string& field) {
  const OptionFieldInfo* info = option_field_named(field);
  if (info == nullptr) return "";
  for (const auto& [name, flag] : state.launch_flags)
    if (name == info->name) return flag;
  std::string own;
  try {
    own = engine_spelling(*make_engine(state.engine.empty() ? "vllm" : state.engine), info->field);
  } catch (const InputError&) {
    // an unknown --engine is reported on its own
  }
  for (const std::string& typed : state.typed_flags) {
    const OptionFieldInfo* typed_info = option_field_named(typed);
    if (typed_info && typed_info->field == info->field)
      return typed + (own.empty() || own == typed ? "" : " (" + own + ")");
  }
  if (!own.empty()) return own;
  return info->neutral.empty() ? info->name : info->neutral.front();
}

}  // namespace kvsight::cli
