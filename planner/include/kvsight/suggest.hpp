#pragma once
// "Did you mean" for names users type (issue #22 item 6): subcommands, flags, model and GPU
// ids. One definition of the distance and of when a name is close enough to offer.
#include <string>
#include <string_view>
#include <vector>

namespace kvsight {

// Levenshtein distance (insertions, deletions, substitutions), ASCII case-insensitive.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The name in `names` closest to `typed`, if it is close: at most 1 edit for names of up to 4
// characters, 2 up to 8, else a quarter of the length (rounded up); ties go to the first.
// "" when none is close, and for names under 3 characters (every short flag is one edit from
// every other).
std::string closest_name(std::string_view typed, const std::vector<std::string>& names);

// " (did you mean X?)" for closest_name, or "".
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& names);

}  // namespace kvsight
