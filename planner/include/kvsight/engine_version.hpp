#pragma once
// The one grammar of --engine-version (issue #9: one version parser for the engines and
// the gates). Two forms, told apart by their text:
//   dotted  [v]MAJOR.MINOR[.PATCH][suffix]   vLLM, SGLang, TensorRT-LLM, ExLlama
//           suffix: a PEP 440 pre/dev/post or local tag after the numbers (".dev5",
//           "rc1", "a2", "b1", ".post1", "+rocm", "-cu128"): the numeric part is the version
//   build   [b]NNNN                          llama.cpp release tags (b6000, 1 to 7 digits)
// Each engine says which form it takes and passes its known versions for the message
// (docs/reference/engine-version.md).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvsight {

enum class VersionForm {
  dotted,  // MAJOR.MINOR[.PATCH]
  build,   // llama.cpp bNNNN
};

struct EngineVersion {
  VersionForm form = VersionForm::dotted;
  int major = 0, minor = 0, patch = 0;  // dotted
  int build = 0;                        // build
  std::string text;                     // as given
  // Dotted form: at least MAJOR.MINOR.PATCH.
  bool at_least(int ma, int mi, int pa = 0) const {
    if (major != ma) return major > ma;
    if (minor != mi) return minor > mi;
    return patch >= pa;
  }
  // One number that orders versions of one form: major x 10^6 + minor x 10^3 + patch
  // (0.23.1 -> 23001), or the build number (b6000 -> 6000).
  std::uint64_t ordinal() const;
};

// Reads `text` in `form`. Throws InputError("--engine-version", ...) naming the engine
// (`display`, "vLLM"), the allowed form and `known`. `text` must not be empty (the
// caller substitutes the engine's default version).
EngineVersion parse_engine_version(std::string_view text, VersionForm form, const std::string& display,
                                   const std::vector<std::string>& known);

// Reads `text` in whichever form it has (a leading b/B and digits only: build; else
// dotted), for callers that do not know the engine. Throws InputError naming both forms.
EngineVersion read_engine_version(std::string_view text);

// "MAJOR.MINOR[.PATCH] (e.g. 0.23.1, 0.27.1.dev5, v0.9)" / "bNNNN (a build number, e.g. b6000)".
std::string version_form_text(VersionForm form);

}  // namespace kvsight
