#pragma once
// ASCII case folding for names users type (engine, dtype, GPU and quantization names):
// one definition instead of a lambda per file. ASCII only on purpose: every name it is
// used on is ASCII, and std::tolower on a signed char is undefined for non-ASCII bytes.
#include <string>
#include <string_view>

namespace kvsight {

inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace kvsight
