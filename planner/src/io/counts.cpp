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
