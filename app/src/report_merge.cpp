// report merge (kvsight/app/report_merge.hpp): reads the preflight reports of a fleet,
// schema kvsight.preflight/1 (docs/preflight-report.md, the contract with preflight #10),
// and flags the nodes that stand out. Rules: docs/reference/fleet.md "report merge".
#include "kvsight/app/report_merge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace kvsight::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string merge_gib_text(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
  return buf;
}

std::string gbps_text(double bytes_per_s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_s / 1e9);
  return buf;
}

// Reading one report: every key the merge needs, with its type checked; a message
// names the file and the key (issue #12: exit 2 naming the file and key).
class Reader {
 public:
  Reader(const json& root, std::string file) : root_(root), file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(file_ + ": " + key, what);
  }

  const json& object_at(const json& parent, const std::string& key, const std::string& path) const {
    if (!parent.is_object() || !parent.contains(key))
      fail(path, "is missing; a kvsight.preflight/1 report has it");
    return parent.at(key);
  }

  std::string string_at(const json& parent, const std::string& key, const std::string& path) const {
    const json& v = object_at(parent, key, path);
    if (!v.is_string()) fail(path, "is " + std::string(v.type_name()) + "; a string is required");
    return v.get<std::string>();
  }

  // A number or null (a figure that could not be measured: docs/preflight-report.md).
  std::optional<double> number_or_null(const json& parent, const std::string& key,
                                       const std::string& path) const {
    if (!parent.is_object() || !parent.contains(key)) return std::nullopt;
    const json& v = parent.at(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number()) fail(path, "is " + std::string(v.type_name()) + "; a number or null is required");
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0)
      fail(path, "is " + v.dump() + "; a finite non-negative number is required");
    return d;
  }

  std::optional<std::uint64_t> bytes_or_null(const json& parent, const std::string& key,
                                             const std::string& path) const {
    if (!parent.is_object() || !parent.contains(key)) return std::nullopt;
    const json& v = parent.at(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
      fail(path, "is " + v.dump() + "; a non-negative integer number of bytes is required");
    return v.get<std::uint64_t>();
  }

  const json& root() const { return root_; }

 private:
  const json& root_;
  std::string file_;
};

// preflight's exit code for a verdict: PASS 0, FAIL 1, WARN 0 or 1 (--fail-on warn).
bool exit_code_agrees(const std::string& verdict, int code) {
  return verdict == "PASS" ? code == 0 : verdict == "FAIL" ? code == 1 : code == 0 || code == 1;
}

// A member as text for the setup comparison: strings as they are, numbers in decimal,
// absent or null as "-".
std::string member_text(const json& parent, const char* key) {
  if (!parent.is_object() || !parent.contains(key) || parent[key].is_null()) return "-";
  const json& v = parent[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// What the node was asked to check (docs/preflight-report.md: model, engine, requested,
// mode, kvsight_version), part by part, for the fleet's majority comparison.
std::vector<std::pair<std::string, std::string>> read_setup(const json& root) {
  const json none = json::object();
  const json& model = root.contains("model") ? root["model"] : none;
  const json& engine = root.contains("engine") ? root["engine"] : none;
  const json& requested = root.contains("requested") ? root["requested"] : none;
  return {{"model", member_text(model, "id")},
          {"engine", member_text(engine, "name") + " " + member_text(engine, "version")},
          {"flags", "TP " + member_text(engine, "tp") + ", PP " + member_text(engine, "pp") + ", block " +
                        member_text(engine, "block_size") + ", KV " + member_text(engine, "kv_cache_dtype") +
                        ", max_model_len " + member_text(engine, "max_model_len") + ", concurrency " +
                        member_text(requested, "concurrency") + ", context " + member_text(requested, "context") +
                        ", mode " + member_text(root, "mode")},
          {"kvsight version", member_text(root, "kvsight_version")}};
}

NodeRow read_report(const fs::path& path) {
  const std::string file = path.filename().string();
  const std::string content = read_input_file(path, file, kMaxPreflightReportBytes);
  const json root = parse_json_input(content, file);
  const Reader r(root, file);
  if (!root.is_object())
    r.fail("(document)", "is " + std::string(root.type_name()) + "; a JSON object is required");
  const std::string schema = r.string_at(root, "schema", "schema");
  if (schema != kPreflightSchema)
    r.fail("schema",
           "is '" + schema + "'; allowed: " + std::string(kPreflightSchema) + " (docs/preflight-report.md)");

  NodeRow row;
  row.file = file;
  row.host = r.string_at(root, "host", "host");
  if (row.host.empty()) r.fail("host", "is empty; the node's host name is required");
  row.verdict = r.string_at(root, "verdict", "verdict");
  if (row.verdict != "PASS" && row.verdict != "WARN" && row.verdict != "FAIL")
    r.fail("verdict", "is '" + row.verdict + "'; allowed: PASS, WARN, FAIL");
  if (root.contains("exit_code") && !root["exit_code"].is_null()) {
    if (!root["exit_code"].is_number_integer()) r.fail("exit_code", "is not an integer");
    const auto code = root["exit_code"].get<std::int64_t>();
    if (code < 0 || code > 255) r.fail("exit_code", "is " + std::to_string(code) + "; allowed: 0 to 255");
    row.exit_code = static_cast<int>(code);
  }
  // preflight exits 0 on PASS, 1 on FAIL, 0 or 1 on WARN (--fail-on warn); a report
  // that says otherwise was edited or written by something else (issue #25 class 5).
  if (row.exit_code) {
    const int code = *row.exit_code;
    if (!exit_code_agrees(row.verdict, code))
      r.fail("exit_code", "is " + std::to_string(code) + " but verdict is " + row.verdict +
                              "; preflight exits 0 on PASS, 1 on FAIL, 0 or 1 on WARN");
  }
  row.setup = read_setup(root);
  if (root.contains("backend") && root["backend"].is_string())
    row.backend = root["backend"].get<std::string>();
  if (root.contains("model") && root["model"].is_object() && root["model"].contains("id") &&
      root["model"]["id"].is_string())
    row.model = root["model"]["id"].get<std::string>();

  const json& devices = r.object_at(root, "devices", "devices");
  if (!devices.is_array())
    r.fail("devices", "is " + std::string(devices.type_name()) + "; an array is required");
  row.device_count = static_cast<std::uint32_t>(devices.size());
  bool all_same = true;
  std::uint64_t free_sum = 0;
  bool free_known = !devices.empty();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const json& d = devices[i];
    const std::string at = "devices[" + std::to_string(i) + "]";
    if (!d.is_object()) r.fail(at, "is not an object");
    const std::string name = r.string_at(d, "name", at + ".name");
    std::string driver;
    if (d.contains("driver_version") && !d["driver_version"].is_null())
      driver = r.string_at(d, "driver_version", at + ".driver_version");
    if (i == 0) {
      row.device = name;
      row.driver_version = driver;
    } else if (name != row.device || driver != row.driver_version) {
      all_same = false;
    }
    const auto free_bytes = r.bytes_or_null(d, "memory_free_bytes", at + ".memory_free_bytes");
    if (free_bytes)
      free_sum = checked_add(free_sum, *free_bytes, at + ".memory_free_bytes");
    else
      free_known = false;
    if (const auto others =
            r.bytes_or_null(d, "memory_used_by_others_bytes", at + ".memory_used_by_others_bytes"))
      row.memory_used_by_others_bytes =
          checked_add(row.memory_used_by_others_bytes, *others, at + ".memory_used_by_others_bytes");
    if (d.contains("processes") && d["processes"].is_array()) {
      for (const json& p : d["processes"]) {
        if (!p.is_object()) continue;
        std::string text = p.contains("name") && p["name"].is_string() ? p["name"].get<std::string>() : "?";
        if (p.contains("pid") && p["pid"].is_number_integer())
          text += " (pid " + std::to_string(p["pid"].get<std::int64_t>());
        else
          text += " (pid ?";
        if (p.contains("used_bytes") && p["used_bytes"].is_number())
          text += ", " + merge_gib_text(p["used_bytes"].get<double>());
        row.other_processes.push_back(text + ")");
      }
    }
  }
  if (!all_same)
    row.device += " (mixed devices)";
  else if (row.device_count > 1)
    row.device += " x " + std::to_string(row.device_count);
  if (free_known) row.memory_free_bytes = free_sum;

  if (root.contains("bandwidth") && root["bandwidth"].is_object())
    row.bandwidth_bytes_per_s =
        r.number_or_null(root["bandwidth"], "measured_bytes_per_s", "bandwidth.measured_bytes_per_s");
  else if (root.contains("bandwidth") && !root["bandwidth"].is_null())
    r.fail("bandwidth", "is not an object or null");

  if (root.contains("decode") && !root["decode"].is_null()) {
    const json& decode = root["decode"];
    if (!decode.is_array())
      r.fail("decode", "is " + std::string(decode.type_name()) + "; an array is required");
    for (std::size_t i = 0; i < decode.size(); ++i) {
      const std::string at = "decode[" + std::to_string(i) + "]";
      const auto context = r.bytes_or_null(decode[i], "context", at + ".context");
      if (!context || *context != kMergeDecodeContext) continue;
      row.decode_engine_path_us = r.number_or_null(decode[i], "engine_path_us", at + ".engine_path_us");
      row.decode_split_us = r.number_or_null(decode[i], "split_us", at + ".split_us");
    }
  }
  // The capacity the node's verdict judged (capacity.judged, added within kvsight.preflight/1):
  // the memory free now, or with no GPU the target GPU's catalog total; older reports have
  // only free_now judged.
  if (root.contains("capacity") && root["capacity"].is_object()) {
    const json& capacity = root["capacity"];
    std::string judged = "free_now";
    if (capacity.contains("judged") && !capacity["judged"].is_null()) {
      if (!capacity["judged"].is_string() ||
          (capacity["judged"] != "free_now" && capacity["judged"] != "catalog_total"))
        r.fail("capacity.judged", "is not \"free_now\" or \"catalog_total\"");
      judged = capacity["judged"].get<std::string>();
    }
    if (capacity.contains(judged) && capacity[judged].is_object())
      row.max_concurrency =
          r.number_or_null(capacity[judged], "max_concurrency", "capacity." + judged + ".max_concurrency");
  }

  if (root.contains("reasons") && root["reasons"].is_array()) {
    for (const json& reason : root["reasons"]) {
      if (!reason.is_object()) continue;
      std::string text = reason.contains("severity") && reason["severity"].is_string()
                             ? reason["severity"].get<std::string>() + ": "
                             : "";
      if (reason.contains("code") && reason["code"].is_string()) text += reason["code"].get<std::string>();
      if (reason.contains("message") && reason["message"].is_string())
        text += (text.empty() || text.back() == ' ' ? "" : " ") +
                ("(" + reason["message"].get<std::string>() + ")");
      row.node_reasons.push_back(text);
    }
  }
  return row;
}

// The exit code in a node's <stem>.exit file (written after every run), if it has one.
std::optional<int> exit_file_code(const fs::path& path, const std::string& file) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  const std::string text = read_input_file(path, file, 64);
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A report whose node's .exit file records another exit code is from an earlier run: the
// last run wrote no report (exit 2 or 3 write none). Such a node FAILs, whatever its old
// report says (issue #25 class 5: a stale PASS was merged as PASS).
void mark_if_stale(NodeRow& row, const fs::path& report) {
  fs::path exit_path = report;
  exit_path.replace_extension(".exit");
  const std::optional<int> last = exit_file_code(exit_path, exit_path.filename().string());
  if (!last || (row.exit_code ? *row.exit_code == *last : exit_code_agrees(row.verdict, *last))) return;
  row.node_reasons.insert(row.node_reasons.begin(),
                          "stale report: " + exit_path.filename().string() + " says the last run exited " +
                              std::to_string(*last) + ", the report (verdict " + row.verdict + ") is from an earlier run");
  row.verdict = "FAIL";
  row.exit_code = *last;
}

// The value more than half of the nodes hold, or "" (no majority).
std::string majority(const std::vector<std::string>& values) {
  std::map<std::string, std::size_t> counts;
  for (const std::string& v : values) ++counts[v];
  for (const auto& [value, count] : counts)
    if (2 * count > values.size()) return value;
  return "";
}

template <typename Get>
std::optional<double> median_of(const std::vector<NodeRow>& nodes, Get get) {
  std::vector<double> values;
  for (const NodeRow& n : nodes)
    if (const auto v = get(n)) values.push_back(static_cast<double>(*v));
  return median(std::move(values));
}

}  // namespace

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

MergeOutcome merge_reports(const std::string& directory) {
  std::error_code ec;
  if (directory.empty())
    throw InputError("DIR", "is empty; give the directory the nodes wrote their reports to");
  if (!fs::is_directory(directory, ec))
    throw InputError(
        "DIR", "'" + directory + "' is not a directory (the shared directory the preflight jobs wrote)");
  std::vector<fs::path> reports, exits;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, ec)) {
    const fs::path& p = entry.path();
    // Hidden files are no node's report: an editor's backup, a writer's temporary.
    if (p.filename().string().rfind('.', 0) == 0) continue;
    if (p.extension() == ".json") reports.push_back(p);
    if (p.extension() == ".exit") exits.push_back(p);
  }
  if (ec) throw InputError("DIR", "'" + directory + "' cannot be read: " + ec.message());
  std::sort(reports.begin(), reports.end());
  std::sort(exits.begin(), exits.end());

  MergeOutcome out;
  out.directory = directory;
  std::map<std::string, std::string> file_of_host;
  std::set<std::string> stems;
  for (const fs::path& p : reports) {
    NodeRow row = read_report(p);
    if (const auto seen = file_of_host.find(row.host); seen != file_of_host.end())
      throw InputError(row.file + ": host", "'" + row.host + "' is also the host of " + seen->second +
                                                "; one report per node is allowed");
    file_of_host[row.host] = row.file;
    stems.insert(p.stem().string());
    mark_if_stale(row, p);
    out.nodes.push_back(std::move(row));
  }
  // An exit-code file with no report beside it: the node's preflight wrote nothing
  // (crashed, timed out, or no kvsight there): a row, FAIL, not a silent gap.
  for (const fs::path& p : exits) {
    if (stems.count(p.stem().string())) continue;
    NodeRow row;
    row.file = p.filename().string();
    row.host = p.stem().string();
    row.verdict = "FAIL";
    row.report_missing = true;
    row.exit_code = exit_file_code(p, row.file);
    row.node_reasons.push_back(
        "no report: the node's preflight wrote no JSON" +
        (row.exit_code ? " (exit code " + std::to_string(*row.exit_code) + ")" : std::string()));
    out.nodes.push_back(std::move(row));
  }
  if (out.nodes.empty())
    throw InputError("DIR", "'" + directory + "' holds no *.json preflight reports (schema " +
                                std::string(kPreflightSchema) + ")");
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const NodeRow& a, const NodeRow& b) { return a.host < b.host; });

  std::vector<NodeRow> reported;
  std::vector<std::string> verdicts, devices, drivers;
  for (const NodeRow& n : out.nodes) {
    verdicts.push_back(n.verdict);
    if (n.report_missing) continue;
    reported.push_back(n);
    devices.push_back(n.device);
    drivers.push_back(n.driver_version);
  }
  out.medians.bandwidth_bytes_per_s =
      median_of(reported, [](const NodeRow& n) { return n.bandwidth_bytes_per_s; });
  out.medians.memory_free_bytes = median_of(reported, [](const NodeRow& n) {
    return n.memory_free_bytes ? std::optional<double>(static_cast<double>(*n.memory_free_bytes))
                               : std::nullopt;
  });
  out.medians.decode_engine_path_us =
      median_of(reported, [](const NodeRow& n) { return n.decode_engine_path_us; });
  out.medians.decode_split_us = median_of(reported, [](const NodeRow& n) { return n.decode_split_us; });
  out.medians.max_concurrency = median_of(reported, [](const NodeRow& n) { return n.max_concurrency; });
  out.majority_verdict = majority(verdicts);
  out.majority_device = majority(devices);
  out.majority_driver = majority(drivers);
  if (out.majority_device.empty() && reported.size() > 1)
    out.notes.push_back("no device is held by more than half the nodes: device outliers not judged");
  if (out.majority_driver.empty() && reported.size() > 1)
    out.notes.push_back("no driver version is held by more than half the nodes: driver outliers not judged");
  if (out.majority_verdict.empty() && out.nodes.size() > 1)
    out.notes.push_back("no verdict is held by more than half the nodes: verdict outliers not judged");

  // The fleet's setup, part by part: the value more than half the reports hold.
  // Every report's setup has read_setup's parts, in its order.
  // A part no majority holds but the nodes disagree on (two nodes, two models): every node is
  // flagged with the values the fleet holds, since no figure is comparable to another's.
  std::map<std::string, std::string> setup_majority;
  std::map<std::string, std::vector<std::string>> setup_mixed;  // part -> its distinct values
  for (std::size_t i = 0; !reported.empty() && i < reported.front().setup.size(); ++i) {
    const std::string& part = reported.front().setup[i].first;
    std::vector<std::string> values;
    for (const NodeRow& m : reported) values.push_back(m.setup[i].second);
    setup_majority[part] = majority(values);
    std::vector<std::string> distinct = values;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (setup_majority[part].empty() && distinct.size() > 1) {
      setup_mixed[part] = distinct;
      out.notes.push_back("no " + part + " is held by more than half the nodes: every node is flagged");
    }
  }
  for (NodeRow& n : out.nodes) {
    if (n.verdict == "PASS")
      ++out.pass;
    else if (n.verdict == "WARN")
      ++out.warn;
    else
      ++out.fail;
    if (n.report_missing) {
      n.outlier_reasons.push_back(n.node_reasons.front());
      continue;
    }
    const auto& bw = out.medians.bandwidth_bytes_per_s;
    if (n.bandwidth_bytes_per_s && bw && *bw > 0 && *n.bandwidth_bytes_per_s < kBandwidthOutlierRatio * *bw) {
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * *n.bandwidth_bytes_per_s / *bw);
      n.outlier_reasons.push_back("slow: bandwidth " + gbps_text(*n.bandwidth_bytes_per_s) + " is " + pct +
                                  " of the fleet median " + gbps_text(*bw) + " (below 90%)");
    }
    if (n.memory_used_by_others_bytes > 0) {
      std::string who;
      for (const std::string& p : n.other_processes) who += (who.empty() ? "" : ", ") + p;
      n.outlier_reasons.push_back("memory held by other processes: " +
                                  merge_gib_text(static_cast<double>(n.memory_used_by_others_bytes)) +
                                  (who.empty() ? "" : " (" + who + ")"));
    }
    if (!out.majority_verdict.empty() && n.verdict != out.majority_verdict) {
      std::string why = n.node_reasons.empty() ? "" : ": " + n.node_reasons.front();
      n.outlier_reasons.push_back("verdict " + n.verdict + " differs from the fleet's " +
                                  out.majority_verdict + why);
    }
    if (!out.majority_device.empty() && n.device != out.majority_device)
      n.outlier_reasons.push_back("device '" + n.device + "' differs from the fleet's '" +
                                  out.majority_device + "'");
    for (const auto& [part, value] : n.setup) {
      const std::string& fleet = setup_majority[part];
      if (!fleet.empty() && value != fleet)
        n.outlier_reasons.push_back("checked another setup: " + part + " '" + value + "' differs from the fleet's '" +
                                    fleet + "'; its figures are not comparable");
      if (const auto mixed = setup_mixed.find(part); mixed != setup_mixed.end()) {
        std::string all;
        for (const std::string& v : mixed->second) all += (all.empty() ? "'" : ", '") + v + "'";
        n.outlier_reasons.push_back("mixed setups: " + part + " '" + value + "' (" + n.file + "); the fleet holds " +
                                    std::to_string(mixed->second.size()) + " with no majority (" + all +
                                    "): figures are not comparable");
      }
    }
    if (!out.majority_driver.empty() && n.driver_version != out.majority_driver)
      n.outlier_reasons.push_back("driver version '" + n.driver_version + "' differs from the fleet's '" +
                                  out.majority_driver + "'");
  }
  // Issue #12: 0 when every node passes, 1 when any warns or fails (or wrote nothing).
  out.exit_code = (out.warn + out.fail) > 0 ? 1 : 0;
  return out;
}

}  // namespace kvsight::app
