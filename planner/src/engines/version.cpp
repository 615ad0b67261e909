// The --engine-version grammar (kvsight/engine_version.hpp).
#include <cctype>
#include <optional>

#include "kvsight/engine_version.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

namespace {

bool version_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// At most 6 digits a dotted part (999999), 7 a build: far above any release, and the
// ordinal (major x 10^6 + ...) stays far from overflow.
constexpr std::size_t kMaxPartDigits = 6;
constexpr std::size_t kMaxBuildDigits = 7;

// Reads digits at `pos` (1 to max_digits of them); nullopt when there are none or more.
std::optional<int> read_number(std::string_view s, std::size_t& pos, std::size_t max_digits) {
  const std::size_t start = pos;
  int value = 0;
  while (pos < s.size() && version_digit(s[pos])) {
    if (pos - start == max_digits) return std::nullopt;
    value = value * 10 + (s[pos] - '0');
    ++pos;
  }
  if (pos == start) return std::nullopt;
  return value;
}

// What may follow the numbers of a dotted version: nothing, a separator that starts a
// dev/post/local part (".dev5", "+rocm", "-cu128"), or a PEP 440 pre-release, dev or post
// tag directly ("rc1", "a2", "b1", "dev3", "post1") followed by a digit, a separator or
// the end. "0.9x" and "0.9banana" are not versions.
bool suffix_allowed(std::string_view rest) {
  if (rest.empty()) return true;
  if (rest[0] == '.' || rest[0] == '+' || rest[0] == '-') return true;
  for (const std::string_view tag : {"rc", "dev", "post", "a", "b", "c"}) {
    if (rest.substr(0, tag.size()) != tag) continue;
    const std::string_view after = rest.substr(tag.size());
    if (after.empty() || version_digit(after[0]) || after[0] == '.' || after[0] == '+' || after[0] == '-')
      return true;
  }
  return false;
}

std::optional<EngineVersion> try_dotted(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) s.remove_prefix(1);
  EngineVersion v;
  v.form = VersionForm::dotted;
  v.text = std::string(text);
  std::size_t pos = 0;
  const auto major = read_number(s, pos, kMaxPartDigits);
  if (!major || pos >= s.size() || s[pos] != '.') return std::nullopt;
  ++pos;
  const auto minor = read_number(s, pos, kMaxPartDigits);
  if (!minor) return std::nullopt;
  v.major = *major;
  v.minor = *minor;
  if (pos + 1 < s.size() && s[pos] == '.' && version_digit(s[pos + 1])) {
    ++pos;
    const auto patch = read_number(s, pos, kMaxPartDigits);
    if (!patch) return std::nullopt;
    v.patch = *patch;
  }
  if (!suffix_allowed(s.substr(pos))) return std::nullopt;
  return v;
}

std::optional<EngineVersion> try_build(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && (s[0] == 'b' || s[0] == 'B')) s.remove_prefix(1);
  std::size_t pos = 0;
  const auto build = read_number(s, pos, kMaxBuildDigits);
  if (!build || pos != s.size()) return std::nullopt;
  EngineVersion v;
  v.form = VersionForm::build;
  v.build = *build;
  v.text = std::string(text);
  return v;
}

std::string version_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

std::uint64_t EngineVersion::ordinal() const {
  if (form == VersionForm::build) return static_cast<std::uint64_t>(build);
  return static_cast<std::uint64_t>(major) * 1000000u + static_cast<std::uint64_t>(minor) * 1000u +
         static_cast<std::uint64_t>(patch);
}

std::string version_form_text(VersionForm form) {
  return form == VersionForm::build ? "bNNNN (a llama.cpp build number, e.g. b6000)"
                                    : "MAJOR.MINOR[.PATCH] with an optional tag (e.g. 0.23.1, v0.9, "
                                      "0.27.1.dev5, 1.1.0rc2)";
}

EngineVersion parse_engine_version(std::string_view text, VersionForm form, const std::string& display,
                                   const std::vector<std::string>& known) {
  const std::optional<EngineVersion> v = form == VersionForm::build ? try_build(text) : try_dotted(text);
  if (v) return *v;
  throw InputError("--engine-version", "'" + std::string(text) + "' is not a " + display +
                                           " version; allowed: " + version_form_text(form) +
                                           (known.empty() ? "" : "; known: " + version_list(known)));
}

EngineVersion read_engine_version(std::string_view text) {
  if (auto build = try_build(text)) return *build;
  if (auto dotted = try_dotted(text)) return *dotted;
  throw InputError("--engine-version", "'" + std::string(text) + "' is not a version; allowed: " +
                                           version_form_text(VersionForm::dotted) + ", or " +
                                           version_form_text(VersionForm::build));
}

}  // namespace kvsight
