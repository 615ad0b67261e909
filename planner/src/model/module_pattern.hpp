#pragma once
// A compressed-tensors target or ignore entry (quantization_config.ignore / config_groups.targets):
// a module name, or "re:" and a Python regular expression that re.match applies to the module's
// name (anchored at the start, not at the end unless the pattern says `$`; compressed-tensors
// utils/match.py is_match). The regex runs as a Thompson NFA over the set of live states, never
// by backtracking, so a hostile pattern costs time linear in the name (issue #25's lesson from
// std::regex). The subset read: literals and escapes (\. \d \w \s \D \W \S), `.`, classes
// ([a-z_], [^...]), groups ((...), (?:...)), `|`, `*` `+` `?`, `^` at the start and `$` at the end;
// anything else (counted repeats, lookarounds, backreferences) makes parse() return nullopt, and
// the caller says the entry was not applied.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvsight::hf_config {

class ModulePattern {
 public:
  // nullopt: a regex outside the subset, or longer than kMaxPatternChars.
  static std::optional<ModulePattern> parse(std::string_view entry);
  bool matches(std::string_view module_name) const;
  static constexpr std::size_t kMaxPatternChars = 256;

 private:
  struct State {
    enum class Kind : unsigned char { character, any, klass, split, jump, match, end_anchor };
    Kind kind = Kind::match;
    char c = 0;
    std::vector<std::pair<char, char>> ranges;  // klass
    bool negated = false;                       // klass
    int out = -1, out2 = -1;                    // successors (split: both)
  };
  std::string literal_;  // a plain name: exact equality
  bool regex_ = false;
  std::vector<State> states_;
  int start_ = -1;
  friend class PatternCompiler;
};

}  // namespace kvsight::hf_config
