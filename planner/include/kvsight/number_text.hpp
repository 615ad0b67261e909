#pragma once
// Numbers as the messages and reports print them, one definition for the CLI, the use
// cases and the planner (cli/, app/, planner/src/decode/): fixed digits, thousands
// separators, and bytes as GiB (2^30 B, the unit every kvsight figure uses unless it
// says otherwise).
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kvsight {

// "%.*f": 3.14159, 2 -> "3.14"; C formatting, so no locale's decimal comma. Sized by a
// first snprintf, so a huge value from a hostile calibration file (1e300 is 301 digits)
// prints whole instead of being cut at a fixed buffer.
inline std::string fixed_text(double value, int digits) {
  const int length = std::snprintf(nullptr, 0, "%.*f", digits, value);
  if (length <= 0) return "?";
  std::string out(static_cast<std::size_t>(length) + 1, '\0');
  std::snprintf(out.data(), out.size(), "%.*f", digits, value);
  out.resize(static_cast<std::size_t>(length));
  return out;
}

// 4831838208 -> "4.50 GiB".
inline std::string gib_text(std::uint64_t bytes, int digits = 2) {
  return fixed_text(static_cast<double>(bytes) / 1073741824.0, digits) + " GiB";
}

// A raw number for CSV and other machine-read text: the shortest decimal that reads back
// as the same double (std::to_chars), never a locale's comma: 356.664 -> "356.664",
// 1e-7 -> "1e-07".
inline std::string round_trip_text(double value) {
  char buffer[32];  // the longest shortest form of a double is 24 characters
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc() ? std::string(buffer, end) : "?";
}

// 4831838208 -> "4,831,838,208": Python's f"{n:,}", as the engines' logs print counts
// (vLLM "GPU KV cache size: 1,234 tokens").
inline std::string commas_text(std::uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    out += digits[i];
    const std::size_t left = digits.size() - 1 - i;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  return out;
}

// 10095.188, 3 -> "10,095.188": fixed digits with thousands separators in the whole part,
// as docs/reference/cliff.md prints the published per-call times.
inline std::string commas_fixed_text(double value, int digits) {
  const std::string text = fixed_text(value, digits);
  const std::size_t sign = text.front() == '-' ? 1 : 0;
  const std::size_t whole_end = std::min(text.find('.'), text.size());
  std::string out = text.substr(0, sign);
  for (std::size_t i = sign; i < whole_end; ++i) {
    out += text[i];
    const std::size_t left = whole_end - 1 - i;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  return out + text.substr(whole_end);
}

}  // namespace kvsight
