// Fuzzes `kvsight report merge DIR` (kvsight::app::merge_reports, then merge_figures), which
// reads whatever a fleet's nodes wrote to a shared directory: preflight JSON reports, their
// .exit files, strays (issue #25 class 5: stale reports, verdicts that disagree with exit
// codes, dot-files, other setups). The input is a directory: files separated by a line
// "--8<--", each file's first line its name (characters outside [A-Za-z0-9._-] dropped; an
// empty name becomes node-N.json). The merge either refuses (InputError) or returns rows that
// hold: nodes sorted by host, each counted in at most one verdict, exit code 0 or 1, every
// median finite and non-negative; and its figures render as JSON.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "kvsight/app/report_merge.hpp"
#include "kvsight/error.hpp"

using namespace kvsight;
using kvsight::fuzz::require;
namespace fs = std::filesystem;

namespace {

// One directory for the whole run, emptied before each input.
const fs::path& work_dir() {
  static const fs::path dir = [] {
    std::string pattern = (fs::temp_directory_path() / "kvsight-fuzz-merge-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    return fs::path(pattern);
  }();
  return dir;
}

std::string file_name(std::string_view line, std::size_t index) {
  std::string name;
  for (const char c : line.substr(0, 48))
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') name += c;
  if (name.empty() || name == "." || name == "..") name = "node-" + std::to_string(index) + ".json";
  return name;
}

void require_median(const std::optional<double>& value, const char* name) {
  if (!value) return;
  require(std::isfinite(*value) && *value >= 0,
          std::string("median ") + name + " not a finite non-negative number");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path& dir = work_dir();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) fs::remove_all(entry.path(), ec);
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSeparator = "\n--8<--\n";
  std::size_t start = 0;
  for (std::size_t index = 0; start <= input.size() && index < 16; ++index) {
    std::size_t end = input.find(kSeparator, start);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view chunk = input.substr(start, end - start);
    start = end + kSeparator.size();
    const std::size_t newline = chunk.find('\n');
    const std::string name = file_name(chunk.substr(0, newline), index);
    std::ofstream(dir / name, std::ios::binary)
        << (newline == std::string_view::npos ? std::string_view() : chunk.substr(newline + 1));
  }
  try {
    const app::MergeOutcome out = app::merge_reports(dir.string());
    require(std::is_sorted(out.nodes.begin(), out.nodes.end(),
                           [](const app::NodeRow& a, const app::NodeRow& b) { return a.host < b.host; }),
            "nodes not sorted by host");
    require(out.pass + out.warn + out.fail <= out.nodes.size(), "more verdicts than nodes");
    require(out.exit_code == 0 || out.exit_code == 1, "exit code other than 0 or 1");
    require(out.exit_code == 1 || out.pass == out.nodes.size(), "exit 0 with a node that did not pass");
    require_median(out.medians.bandwidth_bytes_per_s, "bandwidth");
    require_median(out.medians.memory_free_bytes, "memory_free");
    require_median(out.medians.decode_engine_path_us, "decode_engine_path");
    require_median(out.medians.decode_split_us, "decode_split");
    require_median(out.medians.max_concurrency, "max_concurrency");
    (void)app::merge_figures(out);
  } catch (const InputError&) {
  }
  return 0;
}
