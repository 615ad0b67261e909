// Did-you-mean suggestions (kvsight/suggest.hpp, issue #22 item 6).
#include "kvsight/suggest.hpp"

#include <algorithm>

#include "kvsight/ascii.hpp"

namespace kvsight {

std::size_t edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = ascii_lower(a_in), b = ascii_lower(b_in);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_name(std::string_view typed, const std::vector<std::string>& names) {
  const std::size_t length = typed.size();
  if (length < 3) return "";  // "-b": every other short flag is one edit away
  const std::size_t allowed = length <= 4 ? 1 : length <= 8 ? 2 : (length + 3) / 4;
  std::string best;
  std::size_t best_distance = allowed + 1;
  for (const std::string& name : names) {
    const std::size_t distance = edit_distance(typed, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& names) {
  const std::string best = closest_name(typed, names);
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

}  // namespace kvsight
