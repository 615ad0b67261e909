// The count grammar (kvsight/counts.hpp).
#include "kvsight/counts.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kvsight/error.hpp"

namespace kvsight {

namespace {

constexpr const char* kGrammar = "allowed: a non-negative integer, optionally with K or M (x1024)";
constexpr const char* kByteGrammar =
    "allowed: decimal digits with an optional fraction and unit B, KiB, MiB, GiB, TiB (x1024) or KB, MB, "
    "GB, TB (x1000), e.g. 512MiB, 1.5GiB, 4096";

// GCC and Clang's 128-bit integer (__extension__: no -Wpedantic warning), for one exact
// product below.
__extension__ typedef unsigned __int128 Wide;

// Scale of a byte-size unit; 0 for an unknown one.
std::uint64_t byte_unit_scale(std::string_view unit) {
  struct Unit {
    std::string_view name;
    std::uint64_t scale;
  };
  static constexpr Unit kUnits[] = {{"", 1},
                                    {"B", 1},
                                    {"KiB", 1ull << 10},
                                    {"MiB", 1ull << 20},
                                    {"GiB", 1ull << 30},
                                    {"TiB", 1ull << 40},
                                    {"KB", 1000ull},
                                    {"MB", 1000ull * 1000},
                                    {"GB", 1000ull * 1000 * 1000},
                                    {"TB", 1000ull * 1000 * 1000 * 1000}};
  for (const Unit& u : kUnits)
    if (u.name == unit) return u.scale;
  return 0;
}

}  // namespace

std::uint64_t parse_count(std::string_view text, std::string_view field) {
  const std::string shown(text);
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) throw InputError(std::string(field), "'" + shown + "' is not a count; " + kGrammar);
  const std::string_view suffix = text.substr(digits);
  std::uint64_t scale = 1;
  if (suffix == "K" || suffix == "k") {
    scale = 1024;
  } else if (suffix == "M" || suffix == "m") {
    scale = 1024ull * 1024ull;
  } else if (!suffix.empty()) {
    throw InputError(std::string(field), "'" + shown + "' is not a count (unknown suffix '" +
                                             std::string(suffix) + "'); " + kGrammar);
  }
  std::uint64_t value = 0;
  // from_chars in base 10 reads leading zeros as decimal digits.
  const auto [end, error] = std::from_chars(text.data(), text.data() + digits, value, 10);
  const bool too_big =
      error == std::errc::result_out_of_range || value > std::numeric_limits<std::uint64_t>::max() / scale;
  if (too_big)
    throw OverflowError(std::string(field),
                        "'" + shown + "' exceeds 2^64 - 1 (overflows 64 bits); " + kGrammar);
  (void)end;
  return value * scale;
}

std::uint64_t parse_count_in(std::string_view text, std::string_view field, std::uint64_t min,
                             std::uint64_t max) {
  const std::uint64_t value = parse_count(text, field);
  if (value < min || value > max) {
    const std::string upper = max == UINT64_MAX ? "" : " up to " + std::to_string(max);
    const std::string allowed = min == 1   ? "a positive integer" + upper
                                : min == 0 ? "a non-negative integer" + upper
                                           : std::to_string(min) + ".." + std::to_string(max);
    throw InputError(std::string(field), "is " + std::to_string(value) + "; allowed: " + allowed);
  }
  return value;
}

std::vector<std::uint64_t> parse_count_list(std::string_view text, std::string_view field, std::uint64_t min,
                                            std::uint64_t max) {
  std::vector<std::uint64_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    if (item.empty())
      throw InputError(std::string(field), "'" + std::string(text) +
                                               "' has an empty item; allowed: comma-separated counts such as "
                                               "1024,8K,32K");
    out.push_back(parse_count_in(item, field, min, max));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

// The byte-size grammar (kvsight/counts.hpp), in bytes. units: a unit may follow the
// digits (parse_byte_size); else the digits count `fixed_scale` bytes each (parse_gib).
std::uint64_t parse_scaled_bytes(std::string_view text, std::string_view field, bool units,
                                 std::uint64_t fixed_scale, const char* grammar) {
  const std::string shown(text);
  const auto refuse = [&](const std::string& why) -> std::uint64_t {
    throw InputError(std::string(field), "'" + shown + "' is not a " +
                                             (units ? "byte size" : "number of GiB") + why + "; " + grammar);
  };
  const auto digits_from = [&text](std::size_t start) {
    std::size_t end = start;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    return end;
  };
  const std::size_t whole_end = digits_from(0);
  if (whole_end == 0) return refuse("");
  std::size_t fraction_begin = whole_end, fraction_end = whole_end;
  if (whole_end < text.size() && text[whole_end] == '.') {
    fraction_begin = whole_end + 1;
    fraction_end = digits_from(fraction_begin);
    if (fraction_end == fraction_begin) return refuse(" (a '.' needs digits after it)");
  }
  const std::string_view unit = text.substr(fraction_end);
  const std::uint64_t scale = units ? byte_unit_scale(unit) : (unit.empty() ? fixed_scale : 0);
  if (scale == 0) return refuse(" (unknown unit '" + std::string(unit) + "')");
  const std::size_t fraction_digits = fraction_end - fraction_begin;
  // 10^18 < 2^64: the fraction's digits are one exact integer.
  if (fraction_digits > 18) return refuse(" (more than 18 fraction digits)");

  const auto too_big = [&]() -> std::uint64_t {
    throw OverflowError(std::string(field),
                        "'" + shown + "' exceeds 2^64 - 1 bytes (overflows 64 bits); " + grammar);
  };
  std::uint64_t whole = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + whole_end, whole, 10);
  if (parsed.ec == std::errc::result_out_of_range ||
      whole > std::numeric_limits<std::uint64_t>::max() / scale)
    return too_big();
  std::uint64_t bytes = whole * scale;
  if (fraction_digits > 0) {
    std::uint64_t numerator = 0, denominator = 1;
    std::from_chars(text.data() + fraction_begin, text.data() + fraction_end, numerator, 10);
    for (std::size_t i = 0; i < fraction_digits; ++i) denominator *= 10;
    // floor(numerator x scale / denominator): numerator < denominator <= 10^18 and scale
    // <= 10^12, so the product needs more than 64 bits but fewer than 128.
    const Wide product = static_cast<Wide>(numerator) * scale;
    const auto part = static_cast<std::uint64_t>(product / denominator);  // < scale
    if (part > std::numeric_limits<std::uint64_t>::max() - bytes) return too_big();
    bytes += part;
  }
  return bytes;
}

}  // namespace

std::uint64_t parse_byte_size(std::string_view text, std::string_view field) {
  return parse_scaled_bytes(text, field, true, 1, kByteGrammar);
}

std::uint64_t parse_gib(std::string_view text, std::string_view field) {
  return parse_scaled_bytes(
      text, field, false, 1ull << 30,
      "allowed: decimal digits with an optional fraction, in GiB (2^30 bytes), e.g. 80 or "
      "23.5");
}

double parse_number_in(std::string_view text, std::string_view field, double min, double max,
                       std::string_view allowed) {
  const std::string shown(text);
  double value = 0;
  const bool plain = !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string_view::npos;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!plain || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    throw InputError(std::string(field), "'" + shown + "' is not a number; allowed: " + std::string(allowed));
  if (value < min || value > max)
    throw InputError(std::string(field), "is " + shown + "; allowed: " + std::string(allowed));
  return value;
}

}  // namespace kvsight
