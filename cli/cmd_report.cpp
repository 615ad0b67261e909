// kvsight report merge DIR: the preflight reports of a fleet (one kvsight.preflight/1
// JSON per node) as one row per node, fleet medians, and the outliers with their reason.
#include <memory>

#include "commands.hpp"
#include "kvsight/app/report_merge.hpp"
#include "kvsight/checked.hpp"

namespace kvsight::cli {

namespace {

nlohmann::json json_or_null(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json json_or_null(const std::optional<std::uint64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string merge_number(const std::optional<double>& v, double scale, int digits) {
  return v ? fixed_text(*v / scale, digits) : "-";
}

void run_merge(const std::string& directory, CliState& state) {
  const app::MergeOutcome out = app::merge_reports(directory);
  state.exit_code = out.exit_code;
  const Format format = state.format();

  if (format == Format::json) {
    nlohmann::json nodes = nlohmann::json::array();
    nlohmann::json outliers = nlohmann::json::array();
    for (const app::NodeRow& n : out.nodes) {
      nodes.push_back({{"host", n.host},
                       {"file", n.file},
                       {"verdict", n.verdict},
                       {"exit_code", n.exit_code ? nlohmann::json(*n.exit_code) : nlohmann::json(nullptr)},
                       {"report_missing", n.report_missing},
                       {"backend", n.backend},
                       {"model", n.model},
                       {"device", n.device},
                       {"device_count", n.device_count},
                       {"driver_version", n.driver_version},
                       {"memory_free_bytes", json_or_null(n.memory_free_bytes)},
                       {"memory_used_by_others_bytes", n.memory_used_by_others_bytes},
                       {"other_processes", n.other_processes},
                       {"bandwidth_bytes_per_s", json_or_null(n.bandwidth_bytes_per_s)},
                       {"decode_32k_engine_path_us", json_or_null(n.decode_engine_path_us)},
                       {"decode_32k_split_us", json_or_null(n.decode_split_us)},
                       {"max_concurrency", json_or_null(n.max_concurrency)},
                       {"node_reasons", n.node_reasons},
                       {"outlier_reasons", n.outlier_reasons}});
      if (!n.outlier_reasons.empty()) outliers.push_back({{"host", n.host}, {"reasons", n.outlier_reasons}});
    }
    const nlohmann::json j = {
        {"directory", out.directory},
        {"schema_read", app::kPreflightSchema},
        {"nodes", nodes},
        {"medians",
         {{"bandwidth_bytes_per_s", json_or_null(out.medians.bandwidth_bytes_per_s)},
          {"memory_free_bytes", json_or_null(out.medians.memory_free_bytes)},
          {"decode_32k_engine_path_us", json_or_null(out.medians.decode_engine_path_us)},
          {"decode_32k_split_us", json_or_null(out.medians.decode_split_us)},
          {"max_concurrency", json_or_null(out.medians.max_concurrency)}}},
        {"majority",
         {{"verdict", out.majority_verdict},
          {"device", out.majority_device},
          {"driver_version", out.majority_driver}}},
        {"counts", {{"nodes", out.nodes.size()}, {"pass", out.pass}, {"warn", out.warn}, {"fail", out.fail}}},
        {"outliers", outliers},
        {"notes", out.notes},
        {"exit_code", out.exit_code}};
    emit(state, render_json(j));
    return;
  }

  Table table;
  table.title = "Fleet: " + std::to_string(out.nodes.size()) + " node(s) from " + out.directory + "  (" +
                std::to_string(out.pass) + " PASS, " + std::to_string(out.warn) + " WARN, " +
                std::to_string(out.fail) + " FAIL)";
  const bool csv = format == Format::csv;
  if (csv) {
    table.columns = {"host",
                     "device",
                     "driver_version",
                     "memory_free_bytes",
                     "memory_used_by_others_bytes",
                     "bandwidth_bytes_per_s",
                     "decode_32k_engine_path_us",
                     "decode_32k_split_us",
                     "max_concurrency",
                     "verdict",
                     "exit_code",
                     "outlier_reasons"};
  } else {
    table.columns = {"host",          "device",       "driver",   "free GiB", "others GiB", "GB/s",
                     "decode 32K us", "split 32K us", "max conc", "verdict",  "outlier"};
    table.right_align = {false, false, false, true, true, true, true, true, true, false, false};
  }
  for (const app::NodeRow& n : out.nodes) {
    std::string reasons;
    for (const std::string& r : n.outlier_reasons) reasons += (reasons.empty() ? "" : "; ") + r;
    if (csv) {
      table.rows.push_back({n.host, n.device, n.driver_version,
                            n.memory_free_bytes ? std::to_string(*n.memory_free_bytes) : "",
                            std::to_string(n.memory_used_by_others_bytes),
                            n.bandwidth_bytes_per_s ? fixed_text(*n.bandwidth_bytes_per_s, 0) : "",
                            n.decode_engine_path_us ? fixed_text(*n.decode_engine_path_us, 3) : "",
                            n.decode_split_us ? fixed_text(*n.decode_split_us, 3) : "",
                            n.max_concurrency ? fixed_text(*n.max_concurrency, 4) : "", n.verdict,
                            n.exit_code ? std::to_string(*n.exit_code) : "", reasons});
    } else {
      const std::optional<double> free =
          n.memory_free_bytes ? std::optional<double>(static_cast<double>(*n.memory_free_bytes))
                              : std::nullopt;
      table.rows.push_back({n.host, n.device, n.driver_version, merge_number(free, kGiB, 2),
                            fixed_text(static_cast<double>(n.memory_used_by_others_bytes) / kGiB, 2),
                            merge_number(n.bandwidth_bytes_per_s, 1e9, 1),
                            merge_number(n.decode_engine_path_us, 1, 1),
                            merge_number(n.decode_split_us, 1, 1), merge_number(n.max_concurrency, 1, 2),
                            n.verdict, n.outlier_reasons.empty() ? "" : "yes"});
    }
  }
  if (csv) {
    emit(state, render_table(table, format));
    return;
  }
  const std::optional<double> mfree = out.medians.memory_free_bytes;
  table.rows.push_back(
      {"(median)", out.majority_device.empty() ? "(no majority)" : out.majority_device, out.majority_driver,
       merge_number(mfree, kGiB, 2), "", merge_number(out.medians.bandwidth_bytes_per_s, 1e9, 1),
       merge_number(out.medians.decode_engine_path_us, 1, 1), merge_number(out.medians.decode_split_us, 1, 1),
       merge_number(out.medians.max_concurrency, 1, 2), out.majority_verdict, ""});
  std::string text = render_table(table, format);
  text += "\nOutliers\n";
  bool any = false;
  for (const app::NodeRow& n : out.nodes)
    for (const std::string& r : n.outlier_reasons) {
      text += (format == Format::markdown ? "- " : "  ") + n.host + ": " + r + "\n";
      any = true;
    }
  if (!any) text += "  none\n";
  for (const std::string& note : out.notes) text += "note: " + note + "\n";
  text +=
      "decode: predicted per-token decode time at 32,768 tokens (engine's path / split-KV); GiB = 2^30 "
      "bytes; "
      "GB/s = 10^9 bytes/s. Exit code " +
      std::to_string(out.exit_code) + " (0 every node PASS, 1 any WARN/FAIL).\n";
  emit(state, text);
}

}  // namespace

void add_report_command(CLI::App& app, CliState& state) {
  auto* report = app.add_subcommand("report", "Fleet reports: merge the preflight reports of many nodes");
  report->require_subcommand(1);
  auto directory = std::make_shared<std::string>();
  auto* merge = report->add_subcommand(
      "merge",
      "One row per node from a directory of preflight JSON reports, fleet medians, outliers with reasons");
  merge->description(
      "Reads every *.json (schema kvsight.preflight/1, docs/preflight-report.md) in DIR, as written by\n"
      "scripts/cluster/preflight.sbatch or preflight-job.yaml, one per node. Outliers: bandwidth below 90% "
      "of the\n"
      "fleet median, memory held by other processes, a verdict, device or driver version that differs from "
      "the\n"
      "majority, a node that wrote an exit code but no report.\n"
      "Example:\n"
      "  kvsight report merge /shared/preflight/run-42 --format markdown");
  merge->add_option("DIR", *directory, "Directory holding one <node>.json preflight report per node")
      ->required();
  add_output_options(*merge, state);
  merge->footer(
      "Exit codes: 0 every node PASS; 1 any WARN or FAIL; 2 bad input (a file that is not a\n"
      "kvsight.preflight/1 report: the message names the file and key).");
  merge->callback([directory, &state] { run_merge(*directory, state); });
}

}  // namespace kvsight::cli
