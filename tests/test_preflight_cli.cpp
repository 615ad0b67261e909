// `kvsight preflight` end to end on this machine's cpu backend: the JSON schema
// keys, the no-GPU path said plainly, the SVG parsed by a real XML parser (Python's
// xml.etree, installed by scripts/setup.sh) holding the measured points, bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvsight/probes/device_info.hpp"
#include "test_support.hpp"

namespace kvsight::test {
namespace {

std::string run_shell(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    status = -1;
    return out;
  }
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  status = pclose(pipe);
  return out;
}

// One quick run shared by the tests below (a run measures for a while on a cpu).
struct QuickRun {
  CliRun run;
  nlohmann::json json;
  std::string svg_path;
};

const QuickRun& quick_run() {
  static const QuickRun result = [] {
    QuickRun r;
    const std::string dir = temp_dir("preflight");
    r.svg_path = dir + "/decode.svg";
    r.run = run_kvsight({"preflight", "--model", "llama-3.1-8b", "--backend", "cpu", "--quick", "--quiet",
                         "--format", "json", "--plot", r.svg_path});
    r.json = nlohmann::json::parse(r.run.out, nullptr, false);
    return r;
  }();
  return result;
}

// One quick run (it measures for a while on a cpu): its JSON and its --plot SVG.
TEST(PreflightCli, QuickRunJsonAndSvg) {
  const QuickRun& r = quick_run();
  ASSERT_FALSE(r.json.is_discarded()) << r.run.err;
  // Exit 0 or 1 (a verdict), never 2 or 3; JSON says which it was.
  EXPECT_TRUE(r.run.exit_code == 0 || r.run.exit_code == 1) << r.run.err;
  EXPECT_EQ(r.json["exit_code"], r.run.exit_code);
  EXPECT_EQ(r.json["schema"], "kvsight.preflight/1");
  EXPECT_EQ(r.json["backend"], "cpu");
  EXPECT_EQ(r.json["mode"], "quick");
  for (const char* key : {"verdict", "reasons", "devices", "bandwidth", "probes", "capacity", "decode"})
    EXPECT_TRUE(r.json.contains(key)) << key;
  for (const auto& reason : r.json["reasons"]) {
    EXPECT_TRUE(reason.contains("code") && reason.contains("message") && reason.contains("figures"));
  }
  // Quick: 1K, 8K and 32K, both paths each: 3 x 2 probe entries, every one checked.
  ASSERT_EQ(r.json["probes"].size(), 6u);
  for (const auto& p : r.json["probes"]) {
    EXPECT_TRUE(p["reference_ok"].get<bool>());
    // llama-3.1-8b per rank at TP 1: head_dim 4096 / 32 = 128, 8 KV heads, GQA 32 / 8 = 4,
    // vLLM's default block of 16.
    EXPECT_EQ(p["head_dim"], 128);
    EXPECT_EQ(p["kv_heads"], 8);
    EXPECT_EQ(p["gqa_group"], 4);
    EXPECT_EQ(p["block_size"], 16);
    EXPECT_GT(p["us_per_token"].get<double>(), 0.0);
  }
  EXPECT_GT(r.json["bandwidth"]["measured_bytes_per_s"].get<double>(), 0.0);
  // The no-GPU path on this machine: the device is the CPU, labelled so.
  if (r.json["no_gpu"].get<bool>()) {
    ASSERT_EQ(r.json["devices"].size(), 1u);
    EXPECT_EQ(r.json["devices"][0]["sources"]["memory"], "cpu");
    EXPECT_TRUE(r.json["bandwidth"]["catalog_peak_bytes_per_s"].is_null());
  }

  // --plot: the SVG is parsed by a real XML parser and holds the measured points.
  // The parser prints the number of circles of each measured colour and whether every
  // legend text ends inside the canvas (12 px sans-serif: at most 7.5 px a character).
  const std::string script =
      "import sys, xml.etree.ElementTree as ET\n"
      "ns = '{http://www.w3.org/2000/svg}'\n"
      "root = ET.parse(sys.argv[1]).getroot()\n"
      "width = float(root.get('width'))\n"
      "circles = [c for c in root.iter(ns + 'circle')]\n"
      "texts = [t for t in root.iter(ns + 'text') if t.text and 'measured' in t.text]\n"
      "inside = all(float(t.get('x')) + 7.5 * len(t.text) <= width for t in texts)\n"
      "print(len(circles), len(texts), int(inside))\n";
  const std::string script_path = temp_dir("preflight-svg") + "/check.py";
  write_file(script_path, script);
  int status = 0;
  const std::string out = run_shell("python3 " + script_path + " " + r.svg_path, status);
  ASSERT_EQ(status, 0) << out;
  std::istringstream fields(out);
  int circles = 0, legend_texts = 0, inside = 0;
  fields >> circles >> legend_texts >> inside;
  // 3 measured contexts x 2 measured series = 6 markers, plus one legend marker per
  // markers-only series (2).
  EXPECT_GE(circles, 6 + 2);
  EXPECT_EQ(legend_texts, 2);
  EXPECT_EQ(inside, 1);
}

// Issue #23 items 1 and 3: without a GPU the default job exits 0 (capacity judged for h200,
// whose ~112 GiB of KV hold llama-3.1-8b's 16 GiB sequence 7 times), the verdict comes first
// and NO GPU is one of its WARN reasons, with its fix.
TEST(PreflightCli, TableSaysNoGpuInTheVerdictAndExitsZero) {
  if (!probes::survey_devices().no_gpu) GTEST_SKIP() << "this machine has a GPU";
  const CliRun table = run_kvsight({"preflight", "--model", "llama-3.1-8b", "--quiet"});
  EXPECT_EQ(table.exit_code, 0) << table.out << table.err;
  EXPECT_EQ(table.out.rfind("kvsight preflight: llama-3.1-8b on ", 0), 0u) << table.out.substr(0, 200);
  const std::size_t verdict = table.out.find("Verdict: WARN");
  const std::size_t no_gpu = table.out.find("no_gpu");
  const std::size_t node = table.out.find("\nNode\n");
  ASSERT_NE(verdict, std::string::npos) << table.out;
  ASSERT_NE(no_gpu, std::string::npos) << table.out;
  EXPECT_LT(verdict, no_gpu);
  EXPECT_LT(no_gpu, node);
  EXPECT_NE(table.out.find("--gpu ID"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("catalog total (h200), judged"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("source: cpu"), std::string::npos);
  // --quiet and a pipe: no progress lines.
  EXPECT_EQ(table.err.find("point 1 of"), std::string::npos);
}

// Issue #23 item 5: the help offered csv and `--format csv` exited 2. Now one RFC 4180 table of
// raw numbers: the verdict, reasons, devices, bandwidth and capacities as (table, key, value,
// unit, note) rows, then one row per probe point and per decode context under their columns.
TEST(PreflightCli, CsvIsOneTableOfRawNumbers) {
  const CliRun run = run_kvsight({"preflight", "--model", "llama-3.1-8b", "--gpu", "h200", "--backend", "cpu",
                                  "--quick", "--quiet", "--format", "csv"});
  ASSERT_LE(run.exit_code, 1) << run.err;
  std::istringstream in(run.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "table,key,value,unit,note,context,path,kernel,time_us,gbps,splits,noise,converged,samples,"
            "reference_ok,engine_path_ms,measured_engine_path_ms,split_ms,measured_split_ms,engine_path_tok_s");
  std::size_t probes = 0, decode = 0;
  bool catalog_memory = false, verdict = false;
  while (std::getline(in, line)) {
    if (line.rfind("probe,", 0) == 0) ++probes;
    if (line.rfind("decode,", 0) == 0) ++decode;
    // h200 in planner/data/gpus.json: 139.72 GiB as the runtime reports it = 150,023,962,624 B.
    if (line.rfind("capacity,catalog_total.gpu_memory_bytes,150023962624,B,", 0) == 0) catalog_memory = true;
    if (line == "verdict,verdict,PASS,,,,,,,,,,,,,,,,," || line == "verdict,verdict,WARN,,,,,,,,,,,,,,,,," ||
        line == "verdict,verdict,FAIL,,,,,,,,,,,,,,,,,")
      verdict = true;
    if (line.rfind("reason,", 0) != 0) {  // a reason's message is prose; every figure is raw
      EXPECT_EQ(line.find("GiB"), std::string::npos) << "a display string in the CSV: " << line;
    }
  }
  // --quick on the cpu backend: both kernels at 1K, 8K and 32K (probe_contexts), and the
  // decode table at each of those contexts and at max_model_len (131,072).
  EXPECT_EQ(probes, 6u) << run.out;
  EXPECT_EQ(decode, 4u) << run.out;
  EXPECT_TRUE(catalog_memory) << run.out;
  EXPECT_TRUE(verdict) << run.out;
}

TEST(PreflightCli, AskingForAGpuBackendWithoutOneIsADeviceError) {
  if (!probes::survey_devices().no_gpu) GTEST_SKIP() << "this machine has a GPU";
  const CliRun cuda = run_kvsight({"preflight", "--model", "llama-3.1-8b", "--backend", "cuda", "--quiet"});
  EXPECT_EQ(cuda.exit_code, 3);
  EXPECT_NE(cuda.err.find("--backend cuda"), std::string::npos) << cuda.err;
  EXPECT_TRUE(cuda.out.empty());
}

TEST(PreflightCli, BadInputExitsTwoNamingTheFlag) {
  const CliRun fail_on = run_kvsight({"preflight", "--model", "llama-3.1-8b", "--fail-on", "maybe"});
  EXPECT_EQ(fail_on.exit_code, 2);
  EXPECT_NE(fail_on.err.find("--fail-on"), std::string::npos) << fail_on.err;
  const CliRun backend = run_kvsight({"preflight", "--model", "llama-3.1-8b", "--backend", "opencl"});
  EXPECT_EQ(backend.exit_code, 2);
  EXPECT_NE(backend.err.find("--backend"), std::string::npos) << backend.err;
  const CliRun both = run_kvsight({"preflight", "--model", "llama-3.1-8b", "--quick", "--full"});
  EXPECT_EQ(both.exit_code, 2);
}

}  // namespace
}  // namespace kvsight::test

#include "progress.hpp"

namespace kvsight::cli {
namespace {

TEST(PreflightProgress, LineSaysPointElapsedAndTheFigure) {
  // 3.14159 s rounds to tenths: 3.1 s.
  EXPECT_EQ(Progress::line("kvsight preflight", 2, 4, 3.14159, "context 8192", "nosplit 12.3 us"),
            "kvsight preflight: point 2 of 4 (3.1 s): context 8192: nosplit 12.3 us");
  EXPECT_EQ(Progress::line("x", 1, 1, 0.0, "bandwidth", ""), "x: point 1 of 1 (0.0 s): bandwidth");
}

}  // namespace
}  // namespace kvsight::cli
