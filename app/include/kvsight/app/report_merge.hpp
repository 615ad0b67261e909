#pragma once
// `kvsight report merge DIR`: the preflight reports of a fleet (one kvsight.preflight/1
// JSON per node, docs/preflight-report.md) as one table: a row per node, fleet medians,
// and the outliers with their reason. Rules and thresholds: docs/reference/fleet.md.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvsight/app/figures.hpp"

namespace kvsight::app {

// The schema report merge reads; any other is refused (docs/preflight-report.md).
inline constexpr const char* kPreflightSchema = "kvsight.preflight/1";
// What report merge writes (docs/schemas/kvsight.merge-1.schema.json).
inline constexpr const char* kMergeSchema = "kvsight.merge/1";
// Context of the decode figures in each row (docs/preflight-report.md: decode[] at 32768).
inline constexpr std::uint64_t kMergeDecodeContext = 32768;
// A node whose measured bandwidth is below this share of the fleet median is an outlier
// (issue #12; docs/reference/fleet.md).
inline constexpr double kBandwidthOutlierRatio = 0.90;
// Largest preflight report read (a real one is a few KiB).
inline constexpr std::uint64_t kMaxPreflightReportBytes = 4u << 20;

struct NodeRow {
  std::string file;  // the report's file name in DIR
  std::string host;
  std::string verdict;           // PASS | WARN | FAIL
  std::optional<int> exit_code;  // the node's preflight exit code (report, or the .exit file)
  bool report_missing = false;   // a <host>.exit file without its JSON: the node wrote nothing
  std::string backend;
  std::string model;
  std::string device;          // devices[0].name ("" when none), " x N" when N identical devices
  std::string driver_version;  // devices[0].driver_version
  std::uint32_t device_count = 0;
  std::optional<std::uint64_t> memory_free_bytes;  // summed over devices
  std::uint64_t memory_used_by_others_bytes = 0;   // summed over devices
  std::vector<std::string> other_processes;        // "python (pid 1234, 2.00 GiB)"
  std::optional<double> bandwidth_bytes_per_s;
  std::optional<double> decode_engine_path_us;  // decode[] at kMergeDecodeContext
  std::optional<double> decode_split_us;
  std::optional<double> max_concurrency;     // the judged capacity's (capacity.judged; free_now before it)
  // What the node was asked to check, part by part ({"model", "llama-3.1-8b"}, {"engine",
  // "vllm 0.33.0"}, {"flags", "TP 1, PP 1, ..."}, {"kvsight", "0.1.0"}): a node that ran
  // another setup than the fleet's is an outlier, its figures are not comparable.
  std::vector<std::pair<std::string, std::string>> setup;
  std::vector<std::string> node_reasons;     // the node's own reasons[].message, worst first
  std::vector<std::string> outlier_reasons;  // why the fleet view flags it
};

struct FleetMedians {
  std::optional<double> bandwidth_bytes_per_s;
  std::optional<double> memory_free_bytes;
  std::optional<double> decode_engine_path_us;
  std::optional<double> decode_split_us;
  std::optional<double> max_concurrency;
};

struct MergeOutcome {
  std::string directory;
  std::vector<NodeRow> nodes;  // sorted by host
  FleetMedians medians;
  std::string majority_verdict;  // "" when no value is held by more than half the nodes
  std::string majority_device;
  std::string majority_driver;
  std::uint32_t pass = 0, warn = 0, fail = 0;
  std::vector<std::string> notes;
  int exit_code = 0;  // 0 every node PASS, 1 any WARN or FAIL (or a node without a report)
};

// Reads every *.json in `directory` (and *.exit files that have no JSON beside them).
// Throws InputError naming the file and key for a file that is not a
// kvsight.preflight/1 report, or naming DIR when it holds none.
MergeOutcome merge_reports(const std::string& directory);

// The merge as figures (app/src/report_merge_figures.cpp): one row per node, the medians,
// the outliers with their reasons.
FigureDoc merge_figures(const MergeOutcome& outcome);

// Median of the values (the mean of the middle two for an even count); nullopt when empty.
std::optional<double> median(std::vector<double> values);

}  // namespace kvsight::app
