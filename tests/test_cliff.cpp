// kvsight cliff: the published vLLM #50264 case, reproduced from shapes, with the
// arithmetic redone here by hand from the published per-call times (cliff.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace kvsight {
namespace {

using test::run_kvsight;

// kernel_paged_attention_2d: 356.664 us at 1024, 10,095.188 us at 32768 (2 programs).
const double kSlope = (10095.188 - 356.664) / (32768.0 - 1024.0);  // 0.306784 us/token/call
const double kT0 = 356.664 - 1024.0 * kSlope;                      // 42.518 us
double call_us(double c) { return kT0 + kSlope * c; }
// Non-attention time: published 82.51 ms at 518 tokens less 16 attention calls there.
const double kBaselineMs = 82.51 - 16.0 * call_us(518) / 1000.0;  // 79.287 ms
double step_ms(double c) { return kBaselineMs + 16.0 * call_us(c) / 1000.0; }

TEST(Cliff, Vllm50264PredictedWithinFivePercent) {
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("kernel"), "triton_paged_attention_2d");
  EXPECT_FALSE(j.at("splits_context").get<bool>());
  const std::vector<double> contexts = {518, 8026, 16058, 32084};
  const std::vector<double> published = {82.51, 117.23, 157.60, 235.29};
  const auto& points = j.at("points");
  ASSERT_EQ(points.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(points[i].at("context").get<double>(), contexts[i]);
    const double ms = points[i].at("ms_per_token").get<double>();
    EXPECT_NEAR(ms, step_ms(contexts[i]), 1e-6) << contexts[i];
    EXPECT_LT(std::fabs(ms - published[i]) / published[i], 0.05) << contexts[i] << ": " << ms;
    EXPECT_NEAR(points[i].at("attention_us_per_call").get<double>(), call_us(contexts[i]), 1e-6);
    EXPECT_NEAR(points[i].at("tok_s").get<double>(), 1000.0 / step_ms(contexts[i]), 1e-6);
    // One call reads c tokens x 2 KV heads x (256 + 256) x 2 B.
    EXPECT_EQ(points[i].at("bytes").get<std::uint64_t>(), static_cast<std::uint64_t>(contexts[i]) * 2 * 1024);
    EXPECT_NEAR(points[i].at("gbps").get<double>(), contexts[i] * 2048.0 / call_us(contexts[i]) / 1000.0,
                1e-9);
  }
  // 32084: 79.287 + 16 x (42.518 + 0.306784 x 32084) / 1000 = 237.45 ms (published 235.29).
  EXPECT_NEAR(points[3].at("ms_per_token").get<double>(), 237.45, 0.01);
  // Growth 1K -> 32K within 10% of 28.3x; slope 16 x 0.306784 = 4.909 us/token.
  const double growth = j.at("growth").get<double>();
  EXPECT_LT(std::fabs(growth - 28.3) / 28.3, 0.10) << growth;
  EXPECT_NEAR(growth, call_us(32768) / call_us(1024), 1e-6);
  EXPECT_NEAR(j.at("slope_us_per_token").get<double>(), 16.0 * kSlope, 1e-6);
  // Split-KV at 32K: 14 splits, t0 + 32768 / 14 x slope + 4.117 us reduce = 764.70 us.
  EXPECT_NEAR(j.at("split_attention_us_per_call_32k").get<double>(), kT0 + 32768.0 / 14.0 * kSlope + 4.117,
              1e-6);
  ASSERT_EQ(j.at("split_points").size(), 4u);
  EXPECT_EQ(j.at("published").size(), 4u);
  // The calibration used is stated.
  EXPECT_NE(j.at("calibration").at("source").get<std::string>().find("cliff.md"), std::string::npos);
}

TEST(Cliff, TableStatesCalibrationAndPublished) {
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("calibration"), std::string::npos);
  EXPECT_NE(run.out.find("356.664"), std::string::npos);  // the calibration's source figures
  EXPECT_NE(run.out.find("82.51"), std::string::npos);    // published column
  EXPECT_NE(run.out.find("28.3x"), std::string::npos);
}

TEST(Cliff, PlotWritesSvg) {
  const std::string dir = test::temp_dir("cliff-plot");
  const std::string path = dir + "/cliff.svg";
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--plot", path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ifstream in(path);
  const std::string svg((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("published, vLLM 0.23.1"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // No temporary left behind.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

// Any model: Qwen3.6-27B at TP 2 on gfx1100 with a measured baseline of 79 ms; same
// calibration (gfx1100), same arithmetic: step = 79 + 16 x call(c).
TEST(Cliff, ModelModeUsesGatesAndBaseline) {
  const auto run = run_kvsight({"cliff", "--model", "qwen3.6-27b", "--gpu", "rx7900xt", "--tp", "2",
                                "--baseline-ms", "79", "--contexts", "1024,32768", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("kernel"), "triton_paged_attention_2d");
  EXPECT_EQ(j.at("shape").at("attention_layers"), 16);
  EXPECT_EQ(j.at("shape").at("kv_heads_per_rank"), 2);
  const auto& points = j.at("points");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_NEAR(points[0].at("ms_per_token").get<double>(), 79.0 + 16.0 * 356.664 / 1000.0, 1e-6);
  EXPECT_NEAR(points[1].at("ms_per_token").get<double>(), 79.0 + 16.0 * 10095.188 / 1000.0, 1e-6);
  EXPECT_EQ(j.at("baseline_source"), "--baseline-ms (measured by the user)");
}

TEST(Cliff, BadInput) {
  EXPECT_EQ(run_kvsight({"cliff", "--scenario", "nope"}).exit_code, 2);
  EXPECT_EQ(run_kvsight({"cliff"}).exit_code, 2);
  EXPECT_EQ(run_kvsight({"cliff", "--scenario", "vllm-50264", "--contexts", "12,abc"}).exit_code, 2);
  EXPECT_EQ(run_kvsight({"cliff", "--scenario", "vllm-50264", "--backend", "tpu"}).exit_code, 2);
}

// Both probe kernels measured on the cpu backend at the scenario's per-rank shape
// (head_dim 256, block 784, 2 KV / 12 Q heads, batch 1): the no-split kernel's time
// reads more KV as context grows.
TEST(Cliff, CpuBackendMeasuresBothKernels) {
  const auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--backend", "cpu", "--measure-contexts",
                                "1024,8192", "--repeats", "3", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  const auto& kernels = j.at("measured").at("kernels");
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].at("kernel"), "nosplit");
  EXPECT_EQ(kernels[1].at("kernel"), "splitkv");
  EXPECT_EQ(kernels[0].at("shape").at("block_size"), 784);
  EXPECT_EQ(kernels[0].at("points").size(), 2u);
  // Times are measurements on a shared machine, so nothing here asserts speed;
  // what must hold is that the longer context reads more KV: the bytes counted
  // grow with the 8x context (the no-split kernel reads every K and V row).
  const auto& pts = kernels[0].at("points");
  EXPECT_GT(pts[1].at("bytes").get<double>(), 7.0 * pts[0].at("bytes").get<double>());
  EXPECT_TRUE(std::isfinite(kernels[0].at("slope_us_per_token").get<double>()));
  // Step slope = 16 layers x the per-call slope.
  EXPECT_NEAR(kernels[0].at("step_slope_us_per_token").get<double>(),
              16.0 * kernels[0].at("slope_us_per_token").get<double>(), 1e-9);
}

// --calibration takes the JSON of `kvsight probe sweep`: the no-split kernel's
// least-squares line gives t0 and the per-program rate (bytes per token per program
// (256 + 256) x 2 = 1024 B over the slope), computed here from the file's own points.
TEST(Cliff, CalibrationFromProbeSweepFile) {
  const std::string dir = test::temp_dir("cliff-cal");
  const std::string path = dir + "/sweep.json";
  const auto sweep = run_kvsight({"probe",     "sweep",        "--backend",  "cpu",        "--head-dim",
                                  "256",       "--block-size", "784",        "--kv-heads", "2",
                                  "--q-heads", "12",           "--contexts", "1024,8192",  "--repeats",
                                  "3",         "--format",     "json",       "--output",   path});
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  // The file has the real shape of a probe sweep; its measured times are
  // replaced with chosen ones so the arithmetic below does not depend on how
  // busy the machine was (a loaded 2-core run can time 8K faster than 1K):
  // no-split 100 us at 1024 and 800 us at 8192.
  nlohmann::json file;
  {
    std::ifstream in(path);
    file = nlohmann::json::parse(in);
  }
  auto& pts = file.at("nosplit").at("points");
  ASSERT_EQ(pts.size(), 2u);
  pts[0]["time_us"] = 100.0;
  pts[1]["time_us"] = 800.0;
  file["nosplit"]["slope_us_per_token"] = 700.0 / (8192.0 - 1024.0);
  file["nosplit"]["growth"] = 8.0;
  {
    std::ofstream out(path, std::ios::trunc);
    out << file.dump(2);
  }
  const double c0 = pts[0].at("context").get<double>(), c1 = pts[1].at("context").get<double>();
  ASSERT_EQ(c0, 1024.0);
  ASSERT_EQ(c1, 8192.0);
  const double t0 = 100.0;
  const double slope = (800.0 - 100.0) / (8192.0 - 1024.0);  // two points: the least-squares line is the chord
  const auto run =
      run_kvsight({"cliff", "--model", "qwen3.6-27b", "--gpu", "rx7900xt", "--tp", "2", "--baseline-ms", "79",
                   "--contexts", "4096", "--calibration", path, "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  const auto& cal = j.at("calibration");
  EXPECT_NE(cal.at("source").get<std::string>().find(path), std::string::npos);
  EXPECT_NEAR(cal.at("per_program_gbps").get<double>(), 1024.0 / slope / 1000.0,
              1e-6 * (1024.0 / slope / 1000.0));
  // 2 programs on 84 CUs: one wave. call(4096) = intercept + max(stream, bandwidth bound):
  // stream = slope x 4096; bound = 4096 x 1024 B x 2 programs / best splitkv GB/s.
  double best_gbps = 0;
  for (const auto& p : file.at("splitkv").at("points"))
    best_gbps = std::max(best_gbps, p.at("gbps").get<double>());
  ASSERT_GT(best_gbps, 0.0);
  const double intercept = std::max(0.0, t0 - slope * c0);
  const double expected = intercept + std::max(slope * 4096.0, 4096.0 * 1024.0 * 2.0 / (best_gbps * 1000.0));
  EXPECT_NEAR(j.at("points")[0].at("attention_us_per_call").get<double>(), expected, 1e-6 * expected);
}

}  // namespace
}  // namespace kvsight
