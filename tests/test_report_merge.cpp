// kvsight report merge (issue #12): the fleet fixtures with planted outliers
// (tests/fixtures/reports/README.md), each named with its reason; medians derived by
// hand; bad reports refused naming the file and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvsight/app/report_merge.hpp"
#include "kvsight/error.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

const std::string kFleet = std::string(KVSIGHT_SOURCE_DIR) + "/tests/fixtures/reports/fleet";

const app::NodeRow& node(const app::MergeOutcome& out, const std::string& host) {
  for (const app::NodeRow& n : out.nodes)
    if (n.host == host) return n;
  throw std::runtime_error("no node " + host);
}

bool has_reason(const app::NodeRow& n, const std::string& text) {
  for (const std::string& r : n.outlier_reasons)
    if (r.find(text) != std::string::npos) return true;
  return false;
}

TEST(ReportMerge, PlantedOutliersAreNamedWithTheirReason) {
  const app::MergeOutcome out = app::merge_reports(kFleet);
  ASSERT_EQ(out.nodes.size(), 6u);
  // Bandwidths 4.10, 4.12, 4.08, 3.20, 4.05, 4.11 (x 1e12 B/s); sorted, the middle two are
  // 4.08 and 4.10: median 4.09e12. 90% of it = 3.681e12: only gpu-node-04 (3.20e12) is below.
  ASSERT_TRUE(out.medians.bandwidth_bytes_per_s.has_value());
  EXPECT_DOUBLE_EQ(*out.medians.bandwidth_bytes_per_s, (4.08e12 + 4.10e12) / 2);
  const app::NodeRow& slow = node(out, "gpu-node-04");
  // 3.20 / 4.09 = 78.2% -> "78%".
  EXPECT_TRUE(has_reason(slow, "slow: bandwidth 3200.0 GB/s is 78% of the fleet median 4090.0 GB/s"))
      << slow.outlier_reasons.size();
  EXPECT_EQ(slow.outlier_reasons.size(), 1u);
  EXPECT_FALSE(has_reason(node(out, "gpu-node-05"), "slow"));  // 4.05 / 4.09 = 99%

  // 21,474,836,480 B = 20 x 2^30 = 20.00 GiB held by python pid 4242.
  const app::NodeRow& held = node(out, "gpu-node-05");
  EXPECT_EQ(held.memory_used_by_others_bytes, 20ull << 30);
  EXPECT_TRUE(has_reason(held, "memory held by other processes: 20.00 GiB (python (pid 4242, 20.00 GiB))"));
  // Verdicts PASS x 4, WARN, FAIL: PASS is the majority (4 of 6 > half).
  EXPECT_EQ(out.majority_verdict, "PASS");
  EXPECT_TRUE(has_reason(held, "verdict WARN differs from the fleet's PASS"));
  const app::NodeRow& failed = node(out, "gpu-node-06");
  EXPECT_TRUE(has_reason(failed, "verdict FAIL differs from the fleet's PASS: FAIL: reference_mismatch"));
  EXPECT_EQ(failed.outlier_reasons.size(), 1u);
  // Driver 570.86.15 on one node, 580.65.06 on five.
  EXPECT_EQ(out.majority_driver, "580.65.06");
  EXPECT_TRUE(has_reason(node(out, "gpu-node-02"),
                         "driver version '570.86.15' differs from the fleet's '580.65.06'"));
  EXPECT_EQ(node(out, "gpu-node-02").outlier_reasons.size(), 1u);
  // The clean nodes.
  EXPECT_TRUE(node(out, "gpu-node-01").outlier_reasons.empty());
  EXPECT_TRUE(node(out, "gpu-node-03").outlier_reasons.empty());
  // 4 PASS, 1 WARN, 1 FAIL: exit 1.
  EXPECT_EQ(out.pass, 4u);
  EXPECT_EQ(out.warn, 1u);
  EXPECT_EQ(out.fail, 1u);
  EXPECT_EQ(out.exit_code, 1);
}

TEST(ReportMerge, MediansAndRowFigures) {
  const app::MergeOutcome out = app::merge_reports(kFleet);
  // Decode at 32K (engine path): 61.2 x 5 and 79.0 -> sorted middle two 61.2, 61.2.
  EXPECT_DOUBLE_EQ(*out.medians.decode_engine_path_us, 61.2);
  // Split: 40.3 x 5 and 52.0 -> 40.3.
  EXPECT_DOUBLE_EQ(*out.medians.decode_split_us, 40.3);
  // Free memory: 149e9 x 5 and 127,525,983,616 (20 GiB less) -> 149e9.
  EXPECT_DOUBLE_EQ(*out.medians.memory_free_bytes, 149e9);
  // Capacity: 27.5 x 4, 23.1, 0.0 -> sorted 0, 23.1, 27.5, 27.5, 27.5, 27.5 -> 27.5.
  EXPECT_DOUBLE_EQ(*out.medians.max_concurrency, 27.5);
  const app::NodeRow& n = node(out, "gpu-node-04");
  EXPECT_EQ(n.device, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(*n.decode_engine_path_us, 79.0);  // decode[] entry at 32768, not the 1024 one
  EXPECT_DOUBLE_EQ(*n.decode_split_us, 52.0);
  EXPECT_EQ(*n.memory_free_bytes, 149000000000u);
}

TEST(ReportMerge, MedianOfEvenAndOddCounts) {
  EXPECT_FALSE(app::median({}).has_value());
  EXPECT_DOUBLE_EQ(*app::median({3.0}), 3.0);
  EXPECT_DOUBLE_EQ(*app::median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_DOUBLE_EQ(*app::median({4.0, 1.0, 3.0, 2.0}), 2.5);  // (2 + 3) / 2
}

std::string fixture(const std::string& host) {
  std::ifstream in(kFleet + "/" + host + ".json");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ReportMerge, AllPassIsExitZeroAndDeviceMismatchIsNamed) {
  const std::string dir = test::temp_dir("merge-all-pass");
  test::write_file(dir + "/a.json", fixture("gpu-node-01"));
  test::write_file(dir + "/b.json", fixture("gpu-node-03"));
  nlohmann::json other = nlohmann::json::parse(fixture("gpu-node-01"));
  other["host"] = "gpu-node-09";
  other["devices"][0]["name"] = "NVIDIA H100 80GB HBM3";
  test::write_file(dir + "/c.json", other.dump());
  const app::MergeOutcome out = app::merge_reports(dir);
  EXPECT_EQ(out.exit_code, 0);  // every node PASS
  EXPECT_TRUE(has_reason(node(out, "gpu-node-09"),
                         "device 'NVIDIA H100 80GB HBM3' differs from the fleet's 'NVIDIA H200'"));
}

TEST(ReportMerge, ANodeThatWroteOnlyItsExitCodeIsAFailRow) {
  const std::string dir = test::temp_dir("merge-missing");
  test::write_file(dir + "/gpu-node-01.json", fixture("gpu-node-01"));
  test::write_file(dir + "/gpu-node-07.exit", "137\n");
  const app::MergeOutcome out = app::merge_reports(dir);
  ASSERT_EQ(out.nodes.size(), 2u);
  const app::NodeRow& missing = node(out, "gpu-node-07");
  EXPECT_TRUE(missing.report_missing);
  EXPECT_EQ(missing.verdict, "FAIL");
  EXPECT_EQ(missing.exit_code.value_or(-1), 137);
  EXPECT_TRUE(has_reason(missing, "no report: the node's preflight wrote no JSON (exit code 137)"));
  EXPECT_EQ(out.exit_code, 1);
}

// Issue #25 class 5: what a merge took on trust. A report older than its node's .exit
// file, a node that checked another model, engine or flags, a hidden file.
TEST(ReportMerge, StaleReportsOtherSetupsAndHiddenFilesAreNotTakenOnTrust) {
  const std::string dir = test::temp_dir("merge-trust");
  test::write_file(dir + "/gpu-node-01.json", fixture("gpu-node-01"));
  test::write_file(dir + "/gpu-node-01.exit", "0\n");  // agrees with the report: not stale
  // gpu-node-02's last run exited 3 (a device error writes no report): its PASS is stale.
  nlohmann::json stale = nlohmann::json::parse(fixture("gpu-node-01"));
  stale["host"] = "gpu-node-02";
  test::write_file(dir + "/gpu-node-02.json", stale.dump());
  test::write_file(dir + "/gpu-node-02.exit", "3\n");
  // gpu-node-03 and -04 checked the fleet's setup; -05 another model, -06 another engine
  // version and TP.
  for (const char* host : {"gpu-node-03", "gpu-node-04"}) {
    nlohmann::json j = nlohmann::json::parse(fixture("gpu-node-01"));
    j["host"] = host;
    test::write_file(dir + "/" + host + ".json", j.dump());
  }
  nlohmann::json other_model = nlohmann::json::parse(fixture("gpu-node-01"));
  other_model["host"] = "gpu-node-05";
  other_model["model"]["id"] = "qwen3-8b";
  test::write_file(dir + "/gpu-node-05.json", other_model.dump());
  nlohmann::json other_engine = nlohmann::json::parse(fixture("gpu-node-01"));
  other_engine["host"] = "gpu-node-06";
  other_engine["engine"]["version"] = "0.31.0";
  other_engine["engine"]["tp"] = 2;
  test::write_file(dir + "/gpu-node-06.json", other_engine.dump());
  // A hidden copy (an editor's backup) is no node: with it, gpu-node-01 would be two files.
  test::write_file(dir + "/.gpu-node-01.json", fixture("gpu-node-01"));

  const app::MergeOutcome out = app::merge_reports(dir);
  ASSERT_EQ(out.nodes.size(), 6u);  // 01..06, no row for the hidden file
  const app::NodeRow& n2 = node(out, "gpu-node-02");
  EXPECT_EQ(n2.verdict, "FAIL");
  EXPECT_EQ(n2.exit_code.value_or(-1), 3);
  ASSERT_FALSE(n2.node_reasons.empty());
  EXPECT_EQ(n2.node_reasons.front(),
            "stale report: gpu-node-02.exit says the last run exited 3, the report (verdict PASS) is from an earlier run");
  EXPECT_EQ(node(out, "gpu-node-01").verdict, "PASS");
  EXPECT_TRUE(node(out, "gpu-node-01").outlier_reasons.empty());
  EXPECT_TRUE(has_reason(node(out, "gpu-node-05"),
                         "checked another setup: model 'qwen3-8b' differs from the fleet's 'llama-3.1-8b'"));
  EXPECT_TRUE(has_reason(node(out, "gpu-node-06"),
                         "checked another setup: engine 'vllm 0.31.0' differs from the fleet's 'vllm 0.33.0'"));
  EXPECT_TRUE(has_reason(node(out, "gpu-node-06"), "checked another setup: flags 'TP 2, PP 1,"));
  EXPECT_FALSE(has_reason(node(out, "gpu-node-06"), "model '"));
  // 5 of 6 PASS (01, 03..06: 05 and 06 pass their own checks, flagged as outliers), 1 stale FAIL: exit 1.
  EXPECT_EQ(out.pass, 5u);
  EXPECT_EQ(out.fail, 1u);
  EXPECT_EQ(out.exit_code, 1);
}

// Issue #23's acceptance: a merge of reports of different models flags them naming the file,
// with or without a majority; one of another schema is refused naming the file.
TEST(ReportMerge, MixedModelsWithoutAMajorityFlagEveryNodeNamingItsFile) {
  const std::string dir = test::temp_dir("merge-mixed");
  nlohmann::json a = nlohmann::json::parse(fixture("gpu-node-01"));
  nlohmann::json b = a;
  b["host"] = "gpu-node-02";
  b["model"]["id"] = "qwen3-8b";
  test::write_file(dir + "/gpu-node-01.json", a.dump());
  test::write_file(dir + "/gpu-node-02.json", b.dump());
  const app::MergeOutcome out = app::merge_reports(dir);
  EXPECT_TRUE(has_reason(node(out, "gpu-node-01"), "mixed setups: model 'llama-3.1-8b' (gpu-node-01.json)"));
  EXPECT_TRUE(has_reason(node(out, "gpu-node-02"), "mixed setups: model 'qwen3-8b' (gpu-node-02.json)"));
  EXPECT_TRUE(has_reason(node(out, "gpu-node-02"), "the fleet holds 2 with no majority ('llama-3.1-8b', 'qwen3-8b')"));
  b["schema"] = "kvsight.preflight/2";
  test::write_file(dir + "/gpu-node-02.json", b.dump());
  try {
    (void)app::merge_reports(dir);
    ADD_FAILURE() << "a kvsight.preflight/2 report was merged";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu-node-02.json: schema"), std::string::npos) << e.what();
  }
}

// A report that judged the target's catalog total (no GPU) gives that max concurrency.
TEST(ReportMerge, MaxConcurrencyIsTheJudgedCapacitys) {
  const std::string dir = test::temp_dir("merge-judged");
  nlohmann::json a = nlohmann::json::parse(fixture("gpu-node-01"));
  a["capacity"]["catalog_total"]["max_concurrency"] = 7.03;
  a["capacity"]["free_now"]["max_concurrency"] = 0.3;
  a["capacity"]["judged"] = "catalog_total";
  test::write_file(dir + "/gpu-node-01.json", a.dump());
  EXPECT_DOUBLE_EQ(node(app::merge_reports(dir), "gpu-node-01").max_concurrency.value_or(-1), 7.03);
  a["capacity"]["judged"] = "elsewhere";
  test::write_file(dir + "/gpu-node-01.json", a.dump());
  try {
    (void)app::merge_reports(dir);
    ADD_FAILURE() << "capacity.judged 'elsewhere' accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("capacity.judged"), std::string::npos) << e.what();
  }
}

std::string error_of(const std::string& dir) {
  try {
    (void)app::merge_reports(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReportMerge, BadReportsAreRefusedNamingFileAndKey) {
  std::string dir = test::temp_dir("merge-schema");
  nlohmann::json j = nlohmann::json::parse(fixture("gpu-node-01"));
  j["schema"] = "kvsight.preflight/2";
  test::write_file(dir + "/n1.json", j.dump());
  EXPECT_NE(error_of(dir).find("n1.json: schema: is 'kvsight.preflight/2'; allowed: kvsight.preflight/1"),
            std::string::npos)
      << error_of(dir);

  dir = test::temp_dir("merge-verdict");
  j = nlohmann::json::parse(fixture("gpu-node-01"));
  j["verdict"] = "OK";
  test::write_file(dir + "/n1.json", j.dump());
  EXPECT_NE(error_of(dir).find("n1.json: verdict: is 'OK'; allowed: PASS, WARN, FAIL"), std::string::npos);

  dir = test::temp_dir("merge-type");
  j = nlohmann::json::parse(fixture("gpu-node-01"));
  j["bandwidth"]["measured_bytes_per_s"] = "fast";
  test::write_file(dir + "/n1.json", j.dump());
  EXPECT_NE(error_of(dir).find("n1.json: bandwidth.measured_bytes_per_s: is string"), std::string::npos)
      << error_of(dir);

  dir = test::temp_dir("merge-nohost");
  j = nlohmann::json::parse(fixture("gpu-node-01"));
  j.erase("host");
  test::write_file(dir + "/n1.json", j.dump());
  EXPECT_NE(error_of(dir).find("n1.json: host: is missing"), std::string::npos);

  dir = test::temp_dir("merge-dup");
  test::write_file(dir + "/a.json", fixture("gpu-node-01"));
  test::write_file(dir + "/b.json", fixture("gpu-node-01"));
  EXPECT_NE(error_of(dir).find("b.json: host: 'gpu-node-01' is also the host of a.json"), std::string::npos);

  // A verdict and an exit code that preflight never writes together (issue #25 class 5).
  dir = test::temp_dir("merge-exit-disagrees");
  j = nlohmann::json::parse(fixture("gpu-node-01"));
  j["exit_code"] = 1;  // verdict PASS
  test::write_file(dir + "/n1.json", j.dump());
  EXPECT_NE(error_of(dir).find("n1.json: exit_code: is 1 but verdict is PASS"), std::string::npos) << error_of(dir);

  dir = test::temp_dir("merge-garbage");
  test::write_file(dir + "/n1.json", "{\"schema\": ");
  EXPECT_NE(error_of(dir).find("n1.json"), std::string::npos);

  dir = test::temp_dir("merge-empty");
  EXPECT_NE(error_of(dir).find("holds no *.json preflight reports"), std::string::npos);
  EXPECT_NE(error_of(dir + "/nope").find("is not a directory"), std::string::npos);
}

TEST(ReportMergeCli, FormatsAndExitCodes) {
  auto run = test::run_kvsight({"report", "merge", kFleet, "--format", "json"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["counts"]["nodes"], 6);
  // Outliers: node-02 (driver), node-04 (slow), node-05 (memory, verdict), node-06 (verdict).
  ASSERT_EQ(j["outliers"].size(), 4u);
  EXPECT_EQ(j["outliers"][1]["host"], "gpu-node-04");
  run = test::run_kvsight({"report", "merge", kFleet});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("gpu-node-04: slow: bandwidth"), std::string::npos) << run.out;
  run = test::run_kvsight({"report", "merge", kFleet, "--format", "csv"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out.rfind("host,device,driver_version,", 0), 0u) << run.out;
  run = test::run_kvsight({"report", "merge", kFleet, "--format", "markdown"});
  EXPECT_NE(run.out.find("| gpu-node-01 |"), std::string::npos) << run.out;
  const std::string dir = test::temp_dir("merge-cli-schema");
  test::write_file(dir + "/x.json", "{\"schema\": \"other\"}");
  run = test::run_kvsight({"report", "merge", dir});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("x.json: schema"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kvsight
