// Launchers and the engines' value grammars (kvsight/launcher.hpp, issue #22).
#include "kvsight/launcher.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "kvsight/error.hpp"

namespace kvsight {

namespace {

std::string strip_python(std::string_view text) {
  // str.strip() and int()/float() drop surrounding whitespace.
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python int(text) in base 10: optional sign, digits, single underscores between digits.
std::optional<std::int64_t> python_int(std::string_view raw) {
  const std::string text = strip_python(raw);
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  if (i >= text.size() || !is_digit(text[i])) return std::nullopt;
  std::uint64_t value = 0;
  for (; i < text.size(); ++i) {
    if (text[i] == '_') {
      if (i + 1 >= text.size() || !is_digit(text[i + 1]) || !is_digit(text[i - 1])) return std::nullopt;
      continue;
    }
    if (!is_digit(text[i])) return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) / 10)
      return std::nullopt;  // beyond any count an engine takes
    value = value * 10 + digit;
  }
  return negative ? -static_cast<std::int64_t>(value) : static_cast<std::int64_t>(value);
}

// Python float(text) for decimal forms (digits, one point, an exponent; inf and nan spelled
// out); underscores between digits. Hex floats are not Python floats.
std::optional<double> python_float(std::string_view raw) {
  std::string text = strip_python(raw);
  std::string plain;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_') {
      if (i == 0 || i + 1 >= text.size() || !is_digit(text[i - 1]) || !is_digit(text[i + 1])) return std::nullopt;
      continue;
    }
    if (text[i] == 'x' || text[i] == 'X') return std::nullopt;
    plain += text[i];
  }
  if (plain.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(plain.c_str(), &end);
  if (end != plain.c_str() + plain.size()) return std::nullopt;
  return value;
}

// std::stoi(text) (base 10): leading whitespace, an optional sign, digits; what follows the
// digits is dropped; no digit is std::invalid_argument, beyond int std::out_of_range.
std::optional<std::int64_t> cpp_stoi(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  if (i >= text.size() || !is_digit(text[i])) return std::nullopt;
  std::int64_t value = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    value = value * 10 + (text[i] - '0');
    if (value > static_cast<std::int64_t>(std::numeric_limits<int>::max()) + 1) return std::nullopt;
  }
  value = negative ? -value : value;
  if (value > std::numeric_limits<int>::max() || value < std::numeric_limits<int>::min()) return std::nullopt;
  return value;
}

[[noreturn]] void bad_value(const std::string& flag, std::string_view text, const std::string& grammar) {
  throw InputError(flag, "is '" + std::string(text) + "'; the engine reads it as " + grammar);
}

constexpr const char* kVllmIntGrammar =
    "vLLM's human_readable_int (vllm/utils/argparse_utils.py, 0.33.0): an integer, or a number with "
    "k/m/g/t (x 1000^n, decimals allowed: 25.6k = 25,600) or K/M/G/T (x 1024^n, whole numbers only)";

// vllm/utils/argparse_utils.py human_readable_int (0.33.0): value.strip(); a full match of
// (\d+(?:\.\d+)?)([kKmMgGtT]) is int(float(number) * 10^3n) for k/m/g/t and int(number) *
// 2^10n for K/M/G/T (a decimal with a binary suffix is an error); anything else is int(value).
std::int64_t vllm_int(std::string_view raw, const std::string& flag) {
  const std::string text = strip_python(raw);
  if (text.size() >= 2) {
    const char suffix = text.back();
    const std::string number = text.substr(0, text.size() - 1);
    const std::string decimal = "kmgt", binary = "KMGT";
    const bool digits_point_digits = [&] {
      const std::size_t point = number.find('.');
      const auto all_digits = [](std::string_view s) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_digit(c); });
      };
      if (point == std::string::npos) return all_digits(number);
      return all_digits(std::string_view(number).substr(0, point)) &&
             all_digits(std::string_view(number).substr(point + 1));
    }();
    if (digits_point_digits && decimal.find(suffix) != std::string::npos) {
      const double multiplier = std::pow(1000.0, static_cast<double>(decimal.find(suffix) + 1));
      // int(float(number) * mult): the double product, truncated toward zero.
      const double product = std::strtod(number.c_str(), nullptr) * multiplier;
      if (!(product < 9.2e18)) bad_value(flag, raw, kVllmIntGrammar);
      return static_cast<std::int64_t>(product);
    }
    if (digits_point_digits && binary.find(suffix) != std::string::npos) {
      if (number.find('.') != std::string::npos)
        throw InputError(flag, "is '" + std::string(raw) +
                                   "': vLLM refuses decimals with binary suffixes like " + suffix +
                                   " (did you mean " + number + static_cast<char>(std::tolower(suffix)) + "?)");
      const int shift = 10 * static_cast<int>(binary.find(suffix) + 1);
      const auto base = python_int(number);
      if (!base || *base >= (std::int64_t{1} << (62 - shift))) bad_value(flag, raw, kVllmIntGrammar);
      return *base << shift;
    }
  }
  const auto plain = python_int(text);
  if (!plain) bad_value(flag, raw, kVllmIntGrammar);
  return *plain;
}

constexpr const char* kSglangIntGrammar =
    "SGLang's human_readable_int (sglang/srt/utils/common.py, 0.5.23): an integer, or a number with "
    "k/M/G/T (x 1000^n, decimals allowed: 25.6k = 25,600) or Ki/Mi/Gi/Ti (x 1024^n, whole numbers "
    "only); case-sensitive";

// sglang/srt/utils/common.py human_readable_int (0.5.23): value.strip(); a full match of
// (\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T) is int(Decimal(number) * 1000^n) for k/M/G/T (exact
// decimal arithmetic, truncated) and int(number) * 1024^n for Ki/Mi/Gi/Ti (no decimals);
// anything else is int(value).
std::int64_t sglang_int(std::string_view raw, const std::string& flag) {
  const std::string text = strip_python(raw);
  static const std::vector<std::pair<std::string, int>> suffixes = {
      {"Ki", -1}, {"Mi", -2}, {"Gi", -3}, {"Ti", -4}, {"k", 1}, {"M", 2}, {"G", 3}, {"T", 4}};
  for (const auto& [suffix, power] : suffixes) {
    if (text.size() <= suffix.size() || text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string number = text.substr(0, text.size() - suffix.size());
    const std::size_t point = number.find('.');
    const std::string whole = number.substr(0, point);
    const std::string fraction = point == std::string::npos ? "" : number.substr(point + 1);
    const auto digits = [](const std::string& s) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_digit(c); });
    };
    if (!digits(whole) || (point != std::string::npos && !digits(fraction))) break;
    if (power < 0) {
      if (point != std::string::npos)
        throw InputError(flag, "is '" + std::string(raw) + "': SGLang refuses decimals with IEC suffixes like " +
                                   suffix + " (use " + whole + suffix + " or " + number + suffix.substr(0, 1) + ")");
      const auto base = python_int(whole);
      const int shift = 10 * -power;
      if (!base || *base >= (std::int64_t{1} << (62 - shift))) bad_value(flag, raw, kSglangIntGrammar);
      return *base << shift;
    }
    // Exact decimal: whole x 1000^n + the fraction's first 3n digits (the rest truncated).
    std::string scaled = whole + fraction.substr(0, std::min<std::size_t>(fraction.size(), 3 * power));
    scaled.append(3 * static_cast<std::size_t>(power) - std::min<std::size_t>(fraction.size(), 3 * power), '0');
    const auto value = python_int(scaled);
    if (!value) bad_value(flag, raw, kSglangIntGrammar);
    return *value;
  }
  const auto plain = python_int(text);
  if (!plain) bad_value(flag, raw, kSglangIntGrammar);
  return *plain;
}

}  // namespace

LaunchValue parse_launch_value(ValueGrammar grammar, std::string_view text, const std::string& flag) {
  LaunchValue out;
  switch (grammar) {
    case ValueGrammar::text:
      return out;
    case ValueGrammar::python_int: {
      const auto value = python_int(text);
      if (!value) bad_value(flag, text, "Python's int(): an optional sign and decimal digits");
      out.number = *value;
      return out;
    }
    case ValueGrammar::vllm_int:
      out.number = vllm_int(text, flag);
      return out;
    case ValueGrammar::sglang_int:
      out.number = sglang_int(text, flag);
      return out;
    case ValueGrammar::vllm_int_or_auto: {
      // human_readable_int_or_auto: "-1" or "auto" (any case) is -1, the largest that fits.
      std::string lowered = strip_python(text);
      std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lowered == "-1" || lowered == "auto") {
        out.number = -1;
        out.automatic = true;
        return out;
      }
      out.number = vllm_int(text, flag);
      return out;
    }
    case ValueGrammar::python_float: {
      const auto value = python_float(text);
      if (!value) bad_value(flag, text, "Python's float(): a decimal number");
      out.real = *value;
      return out;
    }
    case ValueGrammar::llamacpp_gpu_layers:
      // common/arg.cpp -ngl (b11312): "auto" (-1), "all" (-2), else std::stoi.
      if (text == "auto" || text == "all") {
        out.text = std::string(text);
        return out;
      }
      out.number = parse_launch_value(ValueGrammar::cpp_stoi, text, flag).number;
      out.text = out.number == -1 ? "auto" : out.number == -2 ? "all" : std::to_string(out.number);
      if (out.number < -2) bad_value(flag, text, "auto, all, or a number of layers (common/arg.cpp)");
      return out;
    case ValueGrammar::llamacpp_on_off_auto:
      // common/arg.cpp is_truthy / is_falsey / is_autoy (b11312).
      for (const char* on : {"on", "enabled", "true", "1"})
        if (text == on) out.text = "on";
      for (const char* off : {"off", "disabled", "false", "0"})
        if (text == off) out.text = "off";
      if (text == "auto" || text == "-1") out.text = "auto";
      if (out.text.empty())
        bad_value(flag, text, "on, enabled, true, 1, off, disabled, false, 0, auto or -1 (common/arg.cpp)");
      return out;
    case ValueGrammar::cpp_stoi:
    case ValueGrammar::llamacpp_int_or_auto: {
      const auto value = cpp_stoi(text);
      if (!value)
        bad_value(flag, text,
                  "std::stoi (common/arg.cpp): leading decimal digits with an optional sign, within int");
      out.number = *value;
      out.automatic = grammar == ValueGrammar::llamacpp_int_or_auto && *value == -1;
      return out;
    }
  }
  return out;
}

const ParserFlag* find_parser_flag(const Launcher& launcher, std::string_view name) {
  if (launcher.flags == nullptr) return nullptr;
  for (const ParserFlag& flag : *launcher.flags)
    if (std::find(flag.names.begin(), flag.names.end(), name) != flag.names.end()) return &flag;
  return nullptr;
}

const LaunchRule* find_launch_rule(const Launcher& launcher, const ParserFlag& flag) {
  for (const LaunchRule& rule : launcher.rules)
    if (std::find(flag.names.begin(), flag.names.end(), rule.name) != flag.names.end()) return &rule;
  return nullptr;
}

std::vector<const Launcher*> all_launchers() {
  std::vector<const Launcher*> out;
  for (const auto& engine : all_engines())
    if (const Launcher* launcher = engine->launcher()) out.push_back(launcher);
  return out;
}

}  // namespace kvsight
