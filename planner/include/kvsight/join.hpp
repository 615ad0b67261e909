#pragma once
// A list as messages and derivations print it: "a, b, c".
#include <string>
#include <string_view>
#include <vector>

namespace kvsight {

inline std::string join_strings(const std::vector<std::string>& values, std::string_view separator = ", ") {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += separator;
    out += values[i];
  }
  return out;
}

}  // namespace kvsight
