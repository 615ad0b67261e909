#pragma once
// Numbers as the messages and reports print them, one definition for the use cases and
// the planner (app/, planner/src/decode/): fixed digits, and bytes as GiB (2^30 B, the
// unit every kvsight figure uses unless it says otherwise). cli/output.hpp renders with
// the same rules for the terminal.
#include <cstdint>
#include <cstdio>
#include <string>

namespace kvsight {

// "%.*f": 3.14159, 2 -> "3.14"; C formatting, so no locale's decimal comma.
inline std::string fixed_text(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// 4831838208 -> "4.50 GiB".
inline std::string gib_text(std::uint64_t bytes, int digits = 2) {
  return fixed_text(static_cast<double>(bytes) / 1073741824.0, digits) + " GiB";
}

}  // namespace kvsight
