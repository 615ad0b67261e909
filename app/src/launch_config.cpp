// vLLM's --config YAML as flags (kvsight/app/launch_line.hpp, issue #22).
//
// vllm/utils/argparse_utils.py (0.33.0) load_config_file: yaml.safe_load, then per key:
// a bool true -> "--key", false -> "--no-key" (when the parser has it), a list -> "--key" and
// str(item) per item (an empty list adds nothing), a dict -> "--key" json.dumps(value), else
// "--key" str(value). Keys are flag names without the dashes ("tensor-parallel-size" or
// "tensor_parallel_size": parse_args turns "_" into "-").
//
// kvsight reads the subset of YAML such files use: a block mapping of `key: value` lines,
// comments, plain / single / double quoted scalars, flow lists `[a, b]`, block lists
// (`- item`) and one level of nested mapping (for JSON options). A scalar whose YAML 1.1
// meaning is not its text (octal 010, hex 0x10, 1_000, sexagesimal 1:30, ~ and null) is
// refused naming the line, rather than read differently from PyYAML.
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "kvsight/app/launch_line.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace kvsight::app {

namespace {

constexpr std::uint64_t kMaxConfigBytes = 1u << 20;

struct Scalar {
  std::string text;
  bool quoted = false;
};

std::string trim(const std::string& s) {
  const std::size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const std::size_t end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// Drops a comment: " #" outside quotes.
std::string without_comment(const std::string& line) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

Scalar scalar(const std::string& raw, const std::string& where) {
  const std::string text = trim(raw);
  if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') && text.back() == text.front())
    return {text.substr(1, text.size() - 2), true};
  static const std::regex yaml11_surprise(
      R"(^[-+]?0[0-7]+$|^[-+]?0x[0-9a-fA-F_]+$|^[-+]?0o[0-7_]+$|^[-+]?0b[01_]+$|^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$|^[-+]?[0-9][0-9_]*_[0-9_]*(\.[0-9_]*)?$|^(~|null|Null|NULL)$)");
  if (text.empty() || std::regex_match(text, yaml11_surprise))
    throw InputError(where, "is '" + text +
                                "', which YAML reads as something else than its text (an octal, hex or "
                                "sexagesimal number, null); write the value plainly or quote it");
  return {text, false};
}

bool yaml_true(const Scalar& s) {
  if (s.quoted) return false;
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})
    if (s.text == t) return true;
  return false;
}
bool yaml_false(const Scalar& s) {
  if (s.quoted) return false;
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})
    if (s.text == f) return true;
  return false;
}

// str(value) in Python of a YAML scalar: floats print their shortest repr ("0.90" -> "0.9"),
// ints their decimal digits; strings as they are.
std::string python_str(const Scalar& s) {
  if (s.quoted) return s.text;
  static const std::regex integer(R"(^[-+]?[0-9]+$)");
  static const std::regex real(R"(^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+][0-9]+)?$)");
  if (std::regex_match(s.text, integer)) {
    std::string digits = s.text[0] == '+' ? s.text.substr(1) : s.text;
    const bool negative = !digits.empty() && digits[0] == '-';
    if (negative) digits = digits.substr(1);
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
    return (negative ? "-" : "") + digits;
  }
  if (std::regex_match(s.text, real)) return nlohmann::json(std::stod(s.text)).dump();
  return s.text;
}

nlohmann::ordered_json json_value(const Scalar& s) {
  if (yaml_true(s)) return true;
  if (yaml_false(s)) return false;
  if (s.quoted) return s.text;
  static const std::regex integer(R"(^[-+]?[0-9]+$)");
  static const std::regex real(R"(^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+][0-9]+)?$)");
  if (std::regex_match(s.text, integer)) return std::stoll(s.text);
  if (std::regex_match(s.text, real)) return std::stod(s.text);
  return s.text;
}

std::vector<Scalar> flow_list(const std::string& text, const std::string& where) {
  std::vector<Scalar> items;
  const std::string inside = trim(text.substr(1, text.size() - 2));
  if (inside.empty()) return items;
  std::stringstream stream(inside);
  std::string item;
  while (std::getline(stream, item, ',')) items.push_back(scalar(item, where));
  return items;
}

}  // namespace

std::vector<std::string> vllm_config_flags(const std::string& text, const std::string& name) {
  struct Line {
    std::size_t number;
    std::size_t indent;
    std::string content;
  };
  std::vector<Line> lines;
  std::stringstream stream(text);
  std::string raw;
  for (std::size_t number = 1; std::getline(stream, raw); ++number) {
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    if (raw.find('\t') != std::string::npos)
      throw InputError("--config " + name + " line " + std::to_string(number), "has a tab; YAML indents with spaces");
    const std::string content = trim(without_comment(raw));
    if (content.empty() || content == "---") continue;
    lines.push_back({number, raw.find_first_not_of(' '), content});
  }
  std::vector<std::string> flags;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& line = lines[i];
    const std::string where = "--config " + name + " line " + std::to_string(line.number);
    if (line.indent != 0)
      throw InputError(where, "is indented where a top-level key was expected");
    const std::size_t colon = line.content.find(':');
    if (colon == std::string::npos || colon == 0)
      throw InputError(where, "is not a 'key: value' line; vLLM's config is a mapping of flag names");
    const std::string key = trim(line.content.substr(0, colon));
    const std::string value = trim(line.content.substr(colon + 1));
    // The lines indented under this key: a block list or a nested mapping.
    std::vector<Line> children;
    while (i + 1 < lines.size() && lines[i + 1].indent > 0) children.push_back(lines[++i]);
    if (!value.empty() && !children.empty())
      throw InputError(where, "has a value and indented lines under it");
    if (!value.empty()) {
      if (value.front() == '[' && value.back() == ']') {
        const std::vector<Scalar> items = flow_list(value, where);
        if (items.empty()) continue;
        flags.push_back("--" + key);
        for (const Scalar& item : items) flags.push_back(python_str(item));
        continue;
      }
      if (value.front() == '{' || value.front() == '[' || value.front() == '|' || value.front() == '>' ||
          value.front() == '&' || value.front() == '*' || value.front() == '!')
        throw InputError(where, "uses a YAML form kvsight does not read (flow mapping, block scalar, anchor or "
                                "tag); write nested options as indented 'key: value' lines");
      const Scalar s = scalar(value, where);
      if (yaml_true(s)) {
        flags.push_back("--" + key);
      } else if (yaml_false(s)) {
        flags.push_back("--no-" + key);
      } else {
        flags.push_back("--" + key);
        flags.push_back(python_str(s));
      }
      continue;
    }
    if (children.empty()) throw InputError(where, "has no value (YAML null); give the key a value");
    if (children.front().content.rfind("- ", 0) == 0 || children.front().content == "-") {
      flags.push_back("--" + key);
      for (const Line& child : children) {
        const std::string child_where = "--config " + name + " line " + std::to_string(child.number);
        if (child.content.rfind("- ", 0) != 0)
          throw InputError(child_where, "mixes list items and other lines under '" + key + "'");
        flags.push_back(python_str(scalar(child.content.substr(2), child_where)));
      }
      continue;
    }
    nlohmann::ordered_json object = nlohmann::ordered_json::object();  // json.dumps keeps the file's order
    for (const Line& child : children) {
      const std::string child_where = "--config " + name + " line " + std::to_string(child.number);
      if (child.indent != children.front().indent)
        throw InputError(child_where, "nests deeper than one level under '" + key + "', which kvsight does not read");
      const std::size_t child_colon = child.content.find(':');
      if (child_colon == std::string::npos || child_colon == 0)
        throw InputError(child_where, "is not a 'key: value' line under '" + key + "'");
      const std::string child_value = trim(child.content.substr(child_colon + 1));
      if (child_value.empty())
        throw InputError(child_where, "nests deeper than one level under '" + key + "', which kvsight does not read");
      object[trim(child.content.substr(0, child_colon))] = json_value(scalar(child_value, child_where));
    }
    flags.push_back("--" + key);
    // json.dumps: ", " and ": " separators.
    std::string dumped;
    bool first = true;
    for (auto it = object.begin(); it != object.end(); ++it) {
      dumped += (first ? "{" : ", ") + nlohmann::ordered_json(it.key()).dump() + ": " + it.value().dump();
      first = false;
    }
    flags.push_back(dumped + "}");
  }
  return flags;
}

std::vector<std::string> read_vllm_config_flags(const std::string& path) {
  // argparse_utils.py load_config_file: the extension must be yaml or yml.
  const std::size_t dot = path.find_last_of('.');
  const std::string extension = dot == std::string::npos ? "" : path.substr(dot + 1);
  if (extension != "yaml" && extension != "yml")
    throw InputError("--config " + path, "must be a .yaml or .yml file (vLLM refuses '" + extension + "')");
  return vllm_config_flags(read_input_file(path, "--config " + path, kMaxConfigBytes), path);
}

}  // namespace kvsight::app
