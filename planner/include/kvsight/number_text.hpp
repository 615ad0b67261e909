#pragma once
// Numbers as the messages and reports print them, one definition for the use cases and
// the planner (app/, planner/src/decode/): fixed digits, and bytes as GiB (2^30 B, the
// unit every kvsight figure uses unless it says otherwise). cli/output.hpp renders with
// the same rules for the terminal.
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

}  // namespace kvsight
