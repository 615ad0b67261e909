// The figures of `kvsight report merge` (issue #26): one row per node (raw numbers in CSV,
// readable units in the table, with the fleet's medians under the nodes), the outliers with
// their reasons, and the whole merge in JSON. Decode per token reads in ms in the table, as
// a serving engineer quotes it (issue #23 item 6); CSV and JSON keep the report's us.
#include "kvsight/app/report_merge.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {


std::string merge_number(const std::optional<double>& v, double scale, int digits) {
  return v ? fixed_text(*v / scale, digits) : "-";
}
std::string raw_number(const std::optional<double>& v, int digits) { return v ? fixed_text(*v, digits) : ""; }

std::optional<double> as_double(const std::optional<std::uint64_t>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

nlohmann::json node_json(const NodeRow& n) {
  return {{"host", n.host},
          {"file", n.file},
          {"verdict", n.verdict},
          {"exit_code", value_or_null(n.exit_code)},
          {"report_missing", n.report_missing},
          {"backend", n.backend},
          {"model", n.model},
          {"device", n.device},
          {"device_count", n.device_count},
          {"driver_version", n.driver_version},
          {"memory_free_bytes", value_or_null(n.memory_free_bytes)},
          {"memory_used_by_others_bytes", n.memory_used_by_others_bytes},
          {"other_processes", n.other_processes},
          {"bandwidth_bytes_per_s", value_or_null(n.bandwidth_bytes_per_s)},
          {"decode_32k_engine_path_us", value_or_null(n.decode_engine_path_us)},
          {"decode_32k_split_us", value_or_null(n.decode_split_us)},
          {"max_concurrency", value_or_null(n.max_concurrency)},
          {"node_reasons", n.node_reasons},
          {"outlier_reasons", n.outlier_reasons}};
}

FigureSection json_figures(const MergeOutcome& out) {
  nlohmann::json nodes = nlohmann::json::array(), outliers = nlohmann::json::array();
  for (const NodeRow& n : out.nodes) {
    nodes.push_back(node_json(n));
    if (!n.outlier_reasons.empty()) outliers.push_back({{"host", n.host}, {"reasons", n.outlier_reasons}});
  }
  return json_section({
           {"schema", kMergeSchema},
           {"directory", out.directory},
           {"schema_read", kPreflightSchema},
           {"nodes", nodes},
           {"medians",
            {{"bandwidth_bytes_per_s", value_or_null(out.medians.bandwidth_bytes_per_s)},
             {"memory_free_bytes", value_or_null(out.medians.memory_free_bytes)},
             {"decode_32k_engine_path_us", value_or_null(out.medians.decode_engine_path_us)},
             {"decode_32k_split_us", value_or_null(out.medians.decode_split_us)},
             {"max_concurrency", value_or_null(out.medians.max_concurrency)}}},
           {"majority",
            {{"verdict", out.majority_verdict}, {"device", out.majority_device}, {"driver_version", out.majority_driver}}},
           {"counts", {{"nodes", out.nodes.size()}, {"pass", out.pass}, {"warn", out.warn}, {"fail", out.fail}}},
           {"outliers", outliers},
           {"notes", out.notes},
           {"exit_code", out.exit_code}});
}

FigureTable node_table(const MergeOutcome& out) {
  FigureTable t;
  t.title = "Fleet: " + std::to_string(out.nodes.size()) + " node(s) from " + out.directory + "  (" +
            std::to_string(out.pass) + " PASS, " + std::to_string(out.warn) + " WARN, " + std::to_string(out.fail) +
            " FAIL)";
  t.columns = {{"host", "host"},
               {"device", "device"},
               {"driver", "driver_version"},
               {"free GiB", "memory_free_bytes", true},
               {"others GiB", "memory_used_by_others_bytes", true},
               {"GB/s", "bandwidth_bytes_per_s", true},
               {"decode 32K ms", "decode_32k_engine_path_us", true},
               {"split 32K ms", "decode_32k_split_us", true},
               {"max conc", "max_concurrency", true},
               {"verdict", "verdict"},
               {"", "exit_code"},
               {"outlier", ""},
               {"", "outlier_reasons"}};
  for (const NodeRow& n : out.nodes) {
    std::string reasons;
    for (const std::string& r : n.outlier_reasons) reasons += (reasons.empty() ? "" : "; ") + r;
    t.rows.push_back(
        {{n.host, n.host},
         {n.device, n.device},
         {n.driver_version, n.driver_version},
         {merge_number(as_double(n.memory_free_bytes), kGiB, 2),
          n.memory_free_bytes ? std::to_string(*n.memory_free_bytes) : ""},
         {fixed_text(static_cast<double>(n.memory_used_by_others_bytes) / kGiB, 2), n.memory_used_by_others_bytes},
         {merge_number(n.bandwidth_bytes_per_s, 1e9, 1), raw_number(n.bandwidth_bytes_per_s, 0)},
         {merge_number(n.decode_engine_path_us, 1e3, 3), raw_number(n.decode_engine_path_us, 3)},
         {merge_number(n.decode_split_us, 1e3, 3), raw_number(n.decode_split_us, 3)},
         {merge_number(n.max_concurrency, 1, 2), raw_number(n.max_concurrency, 4)},
         {n.verdict, n.verdict},
         {"", n.exit_code ? std::to_string(*n.exit_code) : ""},
         {n.outlier_reasons.empty() ? "" : "yes", nullptr},
         {"", reasons}});
  }
  const auto& m = out.medians;
  std::vector<std::string> medians{"(median)",
                                   out.majority_device.empty() ? "(no majority)" : out.majority_device,
                                   out.majority_driver,
                                   merge_number(as_double(m.memory_free_bytes), kGiB, 2),
                                   "",
                                   merge_number(m.bandwidth_bytes_per_s, 1e9, 1),
                                   merge_number(m.decode_engine_path_us, 1e3, 3),
                                   merge_number(m.decode_split_us, 1e3, 3),
                                   merge_number(m.max_concurrency, 1, 2),
                                   out.majority_verdict,
                                   "",
                                   "",
                                   ""};
  t.summary_row.emplace();
  for (const std::string& cell : medians) t.summary_row->push_back({cell, nullptr});
  return t;
}

}  // namespace

FigureDoc merge_figures(const MergeOutcome& out) {
  FigureDoc doc;
  doc.sections.push_back(json_figures(out));
  doc.tables.push_back(node_table(out));
  FigureList outliers{"Outliers", {}, "none"};
  for (const NodeRow& n : out.nodes)
    for (const std::string& r : n.outlier_reasons) outliers.items.push_back(n.host + ": " + r);
  doc.list = std::move(outliers);
  for (const std::string& note : out.notes) doc.footer.push_back("note: " + note);
  doc.footer.push_back(
      "decode: predicted per-token decode time at 32,768 tokens in ms (engine's path / split-KV); GiB = 2^30 bytes; "
      "GB/s = 10^9 bytes/s. Exit code " +
      std::to_string(out.exit_code) + " (0 every node PASS, 1 any WARN/FAIL).");
  return doc;
}

}  // namespace kvsight::app
