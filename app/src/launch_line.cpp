// Reading a pasted launch line (kvsight/app/launch_line.hpp, issue #22).
#include "kvsight/app/launch_line.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"
#include "kvsight/launcher.hpp"
#include "kvsight/suggest.hpp"

namespace kvsight::app {

namespace {

std::string basename_of(const std::string& word) {
  const std::size_t slash = word.find_last_of('/');
  return slash == std::string::npos ? word : word.substr(slash + 1);
}

// "python", "python3", "python3.12", "/usr/bin/python3" all start a Python module.
bool command_word_matches(const std::string& expected, const std::string& typed) {
  const std::string base = basename_of(typed);
  if (expected == "python" || expected == "python3")
    return base.rfind("python", 0) == 0 &&
           base.find_first_not_of("0123456789.", 6) == std::string::npos;
  return base == expected;
}

// NAME=VALUE before the command: an environment assignment.
bool is_environment(const std::string& word) {
  const std::size_t equals = word.find('=');
  if (equals == std::string::npos || equals == 0) return false;
  return std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(equals), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool is_negative_number(const std::string& word) {
  if (word.size() < 2 || word[0] != '-') return false;
  bool digit = false;
  for (std::size_t i = 1; i < word.size(); ++i) {
    if (word[i] >= '0' && word[i] <= '9')
      digit = true;
    else if (word[i] != '.')
      return false;
  }
  return digit;
}

bool flag_like(const std::string& word) { return word.size() > 1 && word[0] == '-' && !is_negative_number(word); }

std::string launchers_allowed() {
  std::string text;
  for (const Launcher* launcher : all_launchers())
    for (const auto& command : launcher->commands) {
      std::string words;
      for (const std::string& w : command) words += (words.empty() ? "" : " ") + w;
      text += (text.empty() ? "" : ", ") + words;
    }
  return text;
}

std::string engine_display(const std::string& engine) { return make_engine(engine)->display_name(); }

// One flag occurrence, before its rule is applied.
struct Occurrence {
  const ParserFlag* flag = nullptr;
  std::string typed;  // the name as typed
  std::string value;
  bool has_value = false;
  std::string from;   // "" or the config file
};

// The error for a name that is not a flag of this launcher.
[[noreturn]] void unknown_flag(const std::string& typed, const std::string& name, const Launcher& launcher,
                               const std::string& command) {
  for (const Launcher* other : all_launchers()) {
    if (other == &launcher || find_parser_flag(*other, name) == nullptr) continue;
    std::string other_command;
    for (const std::string& w : other->commands.front()) other_command += (other_command.empty() ? "" : " ") + w;
    throw InputError(typed + " (" + command + ")",
                     "is a " + engine_display(other->engine) + " flag (" + other_command + "), not one of " +
                         command + "'s; " + command + " is " + engine_display(launcher.engine) +
                         " (flags read from " + launcher.source + ")");
  }
  std::vector<std::string> names;
  for (const ParserFlag& flag : *launcher.flags) names.insert(names.end(), flag.names.begin(), flag.names.end());
  throw InputError(typed + " (" + command + ")", "is not a flag of " + command + " (read from " + launcher.source +
                                                     ")" + did_you_mean(name, names));
}

// The flags of `words` (from `start`), with their values, as the launcher's parser groups them;
// positional words go to `positionals`.
std::vector<Occurrence> split_flags(const std::vector<std::string>& words, std::size_t start,
                                    const Launcher& launcher, const std::string& command, const std::string& from,
                                    std::vector<std::string>& positionals) {
  std::vector<Occurrence> out;
  for (std::size_t i = start; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (!flag_like(word)) {
      positionals.push_back(word);
      continue;
    }
    Occurrence o;
    o.from = from;
    std::string name = word;
    const std::size_t equals = word.find('=');
    if (launcher.equals_values && equals != std::string::npos) {
      name = word.substr(0, equals);
      o.value = word.substr(equals + 1);
      o.has_value = true;
    }
    o.typed = name;
    if (launcher.underscores_are_dashes && name.rfind("--", 0) == 0) std::replace(name.begin(), name.end(), '_', '-');
    if (launcher.underscores_are_dashes && launcher.positional_model && name.find('.') != std::string::npos)
      throw InputError(o.typed + " (" + command + ")",
                       "is a dotted key of a JSON option, which kvsight does not read; give the whole option "
                       "as JSON (--" + name.substr(2, name.find('.') - 2) + " '{...}')");
    o.flag = find_parser_flag(launcher, name);
    if (o.flag == nullptr && launcher.abbreviations && name.rfind("--", 0) == 0 && name.size() > 2) {
      // argparse _parse_optional: a unique prefix of a long option is that option.
      std::vector<const ParserFlag*> matches;
      std::string listed;
      for (const ParserFlag& flag : *launcher.flags)
        for (const std::string& long_name : flag.names)
          if (long_name.rfind(name, 0) == 0 && long_name.rfind("--", 0) == 0) {
            if (std::find(matches.begin(), matches.end(), &flag) == matches.end()) matches.push_back(&flag);
            listed += (listed.empty() ? "" : ", ") + long_name;
          }
      if (matches.size() > 1)
        throw InputError(o.typed + " (" + command + ")", "is ambiguous: it could be " + listed);
      if (matches.size() == 1) o.flag = matches.front();
    }
    if (o.flag == nullptr) unknown_flag(o.typed, name, launcher, command);
    const auto takes_next = [&](std::size_t j) {
      return j < words.size() && (launcher.value_is_next_word || !flag_like(words[j]));
    };
    switch (o.flag->values) {
      case FlagValues::none:
        if (o.has_value)
          throw InputError(o.typed + " (" + command + ")",
                           "is a switch and takes no value (given '" + o.value + "')");
        break;
      case FlagValues::one:
        if (!o.has_value) {
          if (!takes_next(i + 1))
            throw InputError(o.typed + " (" + command + ")", "needs a value and none follows it");
          o.value = words[++i];
          o.has_value = true;
        }
        break;
      case FlagValues::optional:
        if (!o.has_value && takes_next(i + 1)) {
          o.value = words[++i];
          o.has_value = true;
        }
        break;
      case FlagValues::many:
        if (!o.has_value) {
          if (!takes_next(i + 1))
            throw InputError(o.typed + " (" + command + ")", "needs one or more values and none follows it");
          while (takes_next(i + 1)) o.value += (o.value.empty() ? "" : " ") + words[++i];
          o.has_value = true;
        }
        break;
      case FlagValues::two:
        if (!takes_next(i + 1) || !takes_next(i + 2))
          throw InputError(o.typed + " (" + command + ")", "needs two values");
        o.value = words[i + 1] + " " + words[i + 2];
        o.has_value = true;
        i += 2;
        break;
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::string real_text(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
  return std::string(buffer, result.ptr);
}

// Applies one occurrence; returns what kvsight made of it (nullopt: ignored).
void apply_occurrence(const Occurrence& o, const Launcher& launcher, const std::string& command,
                      EngineOptions& options, LaunchLine& line) {
  const std::string where = o.typed + " (" + command + ")";
  const LaunchRule* rule = find_launch_rule(launcher, *o.flag);
  LaunchFlagUse use{o.typed, o.value, "", "", o.from};
  if (rule == nullptr || rule->use == FlagUse::ignore) {
    line.ignored.push_back(use);
    return;
  }
  switch (rule->use) {
    case FlagUse::ignore:
    case FlagUse::config:
      return;
    case FlagUse::model:
      if (!line.model.empty() && line.model != o.value)
        throw InputError(where, "names the model '" + o.value + "', and the line already names '" + line.model +
                                    "'; give the model once");
      line.model = o.value;
      return;
    case FlagUse::refuse:
      throw InputError(where, rule->why + "; kvsight refuses it rather than plan as if it were absent");
    case FlagUse::apply:
      break;
  }
  if (!rule->field) {
    if (!rule->accepted.empty() &&
        std::find(rule->accepted.begin(), rule->accepted.end(), o.value) == rule->accepted.end()) {
      std::string allowed;
      for (const std::string& a : rule->accepted) allowed += (allowed.empty() ? "" : ", ") + a;
      throw InputError(where, "is '" + o.value + "', which kvsight does not plan; allowed: " + allowed);
    }
    use.effect = rule->why;
    line.applied.push_back(use);
    return;
  }
  const OptionField field = *rule->field;
  const OptionFieldInfo& info = option_field(field);
  std::string text;
  if (info.kind == OptionKind::flag) {
    text = "";
  } else {
    const LaunchValue value = parse_launch_value(rule->grammar, o.value, where);
    switch (rule->grammar) {
      case ValueGrammar::text:
        text = o.value;
        break;
      case ValueGrammar::llamacpp_gpu_layers:
      case ValueGrammar::llamacpp_on_off_auto:
        text = value.text;
        break;
      case ValueGrammar::python_float:
        text = real_text(value.real);
        break;
      case ValueGrammar::llamacpp_int_or_auto:
        if (value.automatic) {
          use.effect = "auto (" + launcher.engine + "'s default)";
          line.applied.push_back(use);
          return;
        }
        text = std::to_string(value.number);
        break;
      default:
        text = std::to_string(value.number);
        break;
    }
  }
  try {
    set_option(options, field, text);
  } catch (const InputError& e) {
    // The planner names the field; say it with the flag as typed.
    const std::string what = e.what();
    const std::string prefix = e.field() + ": ";
    throw InputError(where, what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
  }
  use.field = info.name;
  use.effect = info.kind == OptionKind::flag ? "on" : text;
  line.applied.push_back(use);
  if (std::find(line.fields.begin(), line.fields.end(), field) == line.fields.end()) line.fields.push_back(field);
}

}  // namespace

LaunchLine read_launch_line(const std::vector<std::string>& words, EngineOptions& options) {
  LaunchLine line;
  std::size_t start = 0;
  std::vector<LaunchFlagUse> environment;
  while (start < words.size() && is_environment(words[start])) {
    const std::string& word = words[start++];
    const std::string name = word.substr(0, word.find('='));
    // common/arg.cpp reads LLAMA_ARG_<FLAG> as the flag itself.
    if (name.rfind("LLAMA_ARG_", 0) == 0)
      throw InputError(name, "sets a llama.cpp flag through the environment; give it as a flag of the line");
    environment.push_back({name, word.substr(word.find('=') + 1), "", "environment", ""});
  }
  if (start >= words.size())
    throw InputError("launch line", "is empty; after -- give the engine's command, one of: " + launchers_allowed());
  // The launcher: the longest command whose words start the line.
  const Launcher* launcher = nullptr;
  std::size_t command_words = 0;
  for (const Launcher* candidate : all_launchers())
    for (const auto& command : candidate->commands) {
      if (command.size() <= command_words || start + command.size() > words.size()) continue;
      bool match = true;
      for (std::size_t i = 0; i < command.size() && match; ++i)
        match = i == 0 ? command_word_matches(command[i], words[start + i]) : command[i] == words[start + i];
      if (match) {
        launcher = candidate;
        command_words = command.size();
      }
    }
  if (launcher == nullptr) {
    std::string typed = words[start];
    if (start + 1 < words.size()) typed += " " + words[start + 1];
    throw InputError("launch line", "'" + typed + "' is not a launcher kvsight reads; allowed: " +
                                        launchers_allowed() + " (each followed by its own flags)");
  }
  for (std::size_t i = 0; i < command_words; ++i)
    line.command += (i ? " " : "") + (i == 0 ? basename_of(words[start]) : words[start + i]);
  line.engine = launcher->engine;
  line.source = launcher->source;
  line.ignored = environment;
  options.engine = launcher->engine;

  std::vector<std::string> positionals;
  std::vector<Occurrence> cli =
      split_flags(words, start + command_words, *launcher, line.command, "", positionals);
  // vLLM --config FILE: its flags come first, so the command line's win (argparse_utils.py
  // _pull_args_from_config: "cli > config > defaults").
  std::vector<Occurrence> all;
  for (const Occurrence& o : cli) {
    const LaunchRule* rule = find_launch_rule(*launcher, *o.flag);
    if (rule == nullptr || rule->use != FlagUse::config) continue;
    if (!line.config_file.empty())
      throw InputError(o.typed + " (" + line.command + ")", "is given twice; vLLM reads one config file");
    line.config_file = o.value;
    std::vector<std::string> config_positionals;
    const std::vector<std::string> config_words = read_vllm_config_flags(o.value);
    all = split_flags(config_words, 0, *launcher, line.command, o.value, config_positionals);
    if (!config_positionals.empty())
      throw InputError("--config " + o.value, "gives '" + config_positionals.front() + "' without a flag");
  }
  // A flag given on the command line replaces the config file's; a flag given twice on the
  // command line with different values is refused (the engine would silently take the last).
  std::map<const ParserFlag*, const Occurrence*> seen;
  for (const Occurrence& o : cli) {
    const auto it = seen.find(o.flag);
    if (it != seen.end() && it->second->value != o.value)
      throw InputError(o.typed + " (" + line.command + ")",
                       "is given twice with different values ('" + it->second->value + "' as " +
                           it->second->typed + ", then '" + o.value + "'); " + line.command +
                           " would take the last silently; give it once");
    seen[o.flag] = &o;
  }
  all.erase(std::remove_if(all.begin(), all.end(), [&](const Occurrence& o) { return seen.count(o.flag) > 0; }),
            all.end());
  std::vector<const Occurrence*> unique_cli;
  for (const Occurrence& o : cli)
    if (seen[o.flag] == &o) unique_cli.push_back(&o);
  for (const Occurrence& o : all) apply_occurrence(o, *launcher, line.command, options, line);
  for (const Occurrence* o : unique_cli) {
    const LaunchRule* rule = find_launch_rule(*launcher, *o->flag);
    if (rule != nullptr && rule->use == FlagUse::config) continue;
    apply_occurrence(*o, *launcher, line.command, options, line);
  }
  // The positional model (vllm serve MODEL, trtllm-serve MODEL); vLLM moves --model there.
  if (!positionals.empty()) {
    if (!launcher->positional_model)
      throw InputError("launch line", "'" + positionals.front() + "' follows " + line.command +
                                          " without a flag; " + line.command + " takes no positional argument");
    if (positionals.size() > 1)
      throw InputError("launch line", "'" + positionals[1] + "' follows " + line.command + " " + positionals[0] +
                                          " without a flag; " + line.command + " takes one model");
    if (!line.model.empty() && line.model != positionals.front())
      throw InputError("launch line", "names two models, '" + positionals.front() + "' and '" + line.model +
                                          "'; give the model once");
    line.model = positionals.front();
  }
  return line;
}

FigureSection launch_figures(const LaunchLine& line) {
  FigureSection s{"Launch line", {}};
  const auto flag_text = [](const LaunchFlagUse& u) {
    std::string text = u.flag + (u.value.empty() ? "" : " " + u.value);
    if (!u.field.empty() && u.effect != u.value && !u.value.empty()) text += " (= " + u.effect + ")";
    return text;
  };
  nlohmann::json applied = nlohmann::json::array(), ignored = nlohmann::json::array();
  std::string applied_text, ignored_text;
  for (const LaunchFlagUse& u : line.applied) {
    applied.push_back({{"flag", u.flag}, {"value", u.value}, {"field", u.field.empty() ? nlohmann::json(nullptr) : nlohmann::json(u.field)},
                       {"effect", u.effect}, {"from", u.from.empty() ? nlohmann::json(nullptr) : nlohmann::json(u.from)}});
    applied_text += (applied_text.empty() ? "" : ", ") + flag_text(u);
  }
  for (const LaunchFlagUse& u : line.ignored) {
    ignored.push_back({{"flag", u.flag}, {"value", u.value}, {"from", u.from.empty() ? nlohmann::json(nullptr) : nlohmann::json(u.from)}});
    ignored_text += (ignored_text.empty() ? "" : ", ") + (u.effect == "environment" ? u.flag + "=" + u.value : flag_text(u));
  }
  s.figures.push_back({"launch.command", line.command, "", "launch line", line.command + " (" + line.engine + ")",
                       "flags read from " + line.source});
  s.figures.push_back({"launch.engine", line.engine, ""});
  s.figures.push_back({"launch.source", line.source, ""});
  s.figures.push_back({"launch.model", line.model.empty() ? nlohmann::json(nullptr) : nlohmann::json(line.model), ""});
  s.figures.push_back({"launch.config", line.config_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(line.config_file), ""});
  Figure applied_figure{"launch.applied", applied, "", "applied", applied_text.empty() ? "none" : applied_text, ""};
  applied_figure.in_csv = false;
  Figure ignored_figure{"launch.ignored", ignored, "", "ignored (no effect on memory)",
                        ignored_text.empty() ? "none" : ignored_text, ""};
  ignored_figure.in_csv = false;
  s.figures.push_back(applied_figure);
  s.figures.push_back(ignored_figure);
  // CSV: one row per flag, applied or ignored.
  for (const LaunchFlagUse& u : line.applied)
    s.figures.push_back(csv_figure("launch.applied", flag_text(u), u.field.empty() ? u.effect : u.field));
  for (const LaunchFlagUse& u : line.ignored) s.figures.push_back(csv_figure("launch.ignored", flag_text(u), u.from));
  return s;
}

}  // namespace kvsight::app
