// Decode model: the arithmetic of step(c) = baseline + layers x call(c), checked by
// hand from the published figures (docs/reference/cliff.md).
#include <gtest/gtest.h>

#include <cmath>

#include "kvsight/budget.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight {
namespace {

// Published kernel_paged_attention_2d per-call times (cliff.md kernel profile).
constexpr double kCallAt1K = 356.664;     // us at 1024 tokens
constexpr double kCallAt32K = 10095.188;  // us at 32768 tokens

// slope = (10095.188 - 356.664) / (32768 - 1024) = 9738.524 / 31744 = 0.306784...
double hand_slope() { return (kCallAt32K - kCallAt1K) / (32768.0 - 1024.0); }
// t0 = 356.664 - 1024 x slope = 42.518...
double hand_t0() { return kCallAt1K - 1024.0 * hand_slope(); }
double hand_call(double context) { return hand_t0() + hand_slope() * context; }
// The published non-attention time: 82.51 ms at 518 tokens less 16 calls there.
double hand_baseline_ms() { return 82.51 - 16.0 * hand_call(518) / 1000.0; }
double hand_step_ms(double context) { return hand_baseline_ms() + 16.0 * hand_call(context) / 1000.0; }

TEST(DecodeModel, HandArithmeticOfTheCalibration) {
  EXPECT_NEAR(hand_slope(), 0.306784, 1e-6);
  EXPECT_NEAR(hand_t0(), 42.5183, 1e-3);
  EXPECT_NEAR(hand_baseline_ms(), 79.287, 1e-3);
}

// The data file (planner/data/published/vllm-50264.json) holds cliff.md's tables as published.
TEST(DecodeModel, PublishedFiguresAreCliffMds) {
  const PublishedCliff& published = vllm_50264_figures();
  EXPECT_EQ(published.call_us_1k, kCallAt1K);
  EXPECT_EQ(published.call_us_32k, kCallAt32K);
  EXPECT_EQ(published.slope_us_per_token, 4.840);
  EXPECT_EQ(published.split_call_us_32k, 635.779);
  EXPECT_EQ(published.reduce_us, 4.117);
  EXPECT_EQ(published.split_slope_us_per_token, 0.430);
  ASSERT_EQ(published.collapse.size(), 4u);  // 518, 8,026, 16,058, 32,084 tokens
  EXPECT_EQ(published.collapse.front().context, 518u);
  EXPECT_EQ(published.collapse.front().ms_per_token, 82.51);
  EXPECT_EQ(published.collapse.back().tok_s, 4.25);
  ASSERT_EQ(published.split.size(), 4u);  // 1,024 .. 32,768 tokens
  EXPECT_EQ(published.split.back().context, 32768u);
  EXPECT_EQ(published.split.back().ms_per_token, 93.30);
  EXPECT_NEAR(published.split.back().tok_s, 10.718, 1e-3);  // 1000 / 93.30, not published
  // Derived: 10,095.188 / 356.664 = 28.30x; (10,095.188 - 356.664) / 31,744 = 0.306784 us per
  // token; 635.779 + 4.117 = 639.896 us.
  EXPECT_NEAR(published.growth(), 28.3045, 1e-4);
  EXPECT_NEAR(published.call_slope_us_per_token(), hand_slope(), 1e-12);
  EXPECT_NEAR(published.split_total_us_32k(), 639.896, 1e-9);
}

TEST(DecodeModel, Vllm50264MatchesHandArithmeticAndPublished) {
  const DecodeScenario scenario = vllm_50264_scenario();
  ASSERT_EQ(scenario.groups.size(), 1u);
  EXPECT_EQ(scenario.groups[0].layers, 16u);
  EXPECT_EQ(scenario.groups[0].kv_heads_per_rank, 2u);
  EXPECT_FALSE(scenario.groups[0].splits_context);
  // One program reads (256 + 256) x 2 B = 1024 B per token; rate = 1024 B / slope.
  EXPECT_NEAR(scenario.calibration.per_program_gbps, 1024.0 / hand_slope() / 1000.0, 1e-9);
  EXPECT_NEAR(scenario.baseline_ms, hand_baseline_ms(), 1e-9);

  const std::vector<std::uint64_t> contexts = {518, 8026, 16058, 32084};
  const std::vector<double> published = {82.51, 117.23, 157.60, 235.29};
  const DecodeCurve curve = predict_decode(scenario, contexts);
  ASSERT_EQ(curve.points.size(), 4u);
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    const double c = static_cast<double>(contexts[i]);
    EXPECT_NEAR(curve.points[i].attention_us_per_call, hand_call(c), 1e-6) << c;
    EXPECT_NEAR(curve.points[i].ms_per_token, hand_step_ms(c), 1e-9) << c;
    EXPECT_NEAR(curve.points[i].tok_s, 1000.0 / hand_step_ms(c), 1e-9);
    // Acceptance: within 5% of the published ms/token.
    EXPECT_LT(std::fabs(curve.points[i].ms_per_token - published[i]) / published[i], 0.05) << c;
  }
  // 8026: 79.287 + 16 x (42.518 + 0.306784 x 8026) / 1000 = 79.287 + 40.076 = 119.36 ms.
  EXPECT_NEAR(curve.points[1].ms_per_token, 119.36, 0.01);
  // Step slope = 16 layers x per-call slope = 4.9085 us/token (published 4.840).
  EXPECT_NEAR(curve.slope_us_per_token, 16.0 * hand_slope(), 1e-6);
  EXPECT_LT(std::fabs(curve.slope_us_per_token - 4.840) / 4.840, 0.05);
  // Growth 1K -> 32K of the per-call time: 10095.188 / 356.664 = 28.30x.
  const double growth = attention_call_us(scenario, scenario.groups[0], 32768, false) /
                        attention_call_us(scenario, scenario.groups[0], 1024, false);
  EXPECT_NEAR(growth, kCallAt32K / kCallAt1K, 1e-6);
  EXPECT_LT(std::fabs(growth - 28.3) / 28.3, 0.10);
}

// PR #45916: 14 splits at batch 1 from 4096 up, none below 1344; reduce 4.117 us.
// Two programs x 14 splits = 28 <= 84 CUs: one wave, each program reads c / 14 tokens.
TEST(DecodeModel, SplitKvPrediction) {
  const DecodeScenario scenario = vllm_50264_scenario();
  std::uint32_t splits = 0;
  const double call = attention_call_us(scenario, scenario.groups[0], 32768, true, &splits);
  EXPECT_EQ(splits, 14u);
  // t0 + (32768 / 14) x slope + 4.117 = 42.518 + 718.06 + 4.117 = 764.70 us
  const double hand = hand_t0() + 32768.0 / 14.0 * hand_slope() + 4.117;
  EXPECT_NEAR(call, hand, 1e-6);
  // The bandwidth bound (2 programs x 1024 B x 32768 / 640 GB/s = 104.9 us) is below.
  EXPECT_GT(32768.0 / 14.0 * hand_slope(), 2.0 * 1024.0 * 32768.0 / 640e3);
  // Below 1344 tokens: no split, no reduce.
  attention_call_us(scenario, scenario.groups[0], 1024, true, &splits);
  EXPECT_EQ(splits, 1u);
  // Step at 32768 with the split kernel vs the published 93.30 ms (PR #45916): within 5%.
  const double step = hand_baseline_ms() + 16.0 * hand / 1000.0;
  const DecodeCurve curve = predict_decode(scenario, {32768}, true);
  EXPECT_NEAR(curve.points[0].ms_per_token, step, 1e-9);
  EXPECT_LT(std::fabs(step - 93.30) / 93.30, 0.05);
}

// Many programs: the bandwidth bound takes over. 64 sequences x 8 KV heads = 512
// programs on 84 CUs: waves = ceil(512 / 84) = 7.
TEST(DecodeModel, WavesAndBandwidthBound) {
  DecodeScenario s;
  s.batch = 64;
  s.calibration.call_overhead_us = 10;
  s.calibration.per_program_gbps = 4.0;           // 4000 B/us
  s.calibration.achieved_bandwidth_gbps = 500.0;  // 500000 B/us
  s.calibration.concurrent_programs = 84;
  DecodeLayerGroup g;
  g.layers = 1;
  g.kv_heads_per_rank = 8;
  g.bytes_per_token_per_program = 512;
  s.groups.push_back(g);
  // stream: 1000 x 512 / 4000 x 7 waves = 896 us; bandwidth: 1000 x 512 x 512 / 500000 = 524.288 us.
  EXPECT_NEAR(attention_call_us(s, g, 1000, false), 10 + 896.0, 1e-9);
  s.calibration.achieved_bandwidth_gbps = 200.0;  // 1310.72 us now dominates
  EXPECT_NEAR(attention_call_us(s, g, 1000, false), 10 + 1000.0 * 512 * 512 / 200000.0, 1e-9);
  // A sliding window caps the context: 4096 tokens at window 1000 cost what 1000 does.
  g.window = 1000;
  EXPECT_NEAR(attention_call_us(s, g, 4096, false), attention_call_us(s, g, 1000, false), 1e-12);
}

TEST(DecodeModel, DefaultCalibrationScalesByBandwidthPerCu) {
  GpuSpec gpu;
  gpu.id = "test";
  gpu.arch = "gfx942";
  gpu.vendor = "amd";
  gpu.multiprocessors = 304;
  gpu.bandwidth_gbps = 5300;
  const KernelCalibration c = default_calibration(gpu);
  // gfx1100: 1024 B / slope; scaled by (5300 / 304) / (800 / 84).
  const double base = 1024.0 / hand_slope() / 1000.0;
  EXPECT_NEAR(c.per_program_gbps, base * (5300.0 / 304.0) / (800.0 / 84.0), 1e-9);
  EXPECT_NEAR(c.achieved_bandwidth_gbps, 0.8 * 5300, 1e-9);
  EXPECT_NE(c.source.find("estimate"), std::string::npos);
  gpu.arch = "gfx1100";
  EXPECT_NE(default_calibration(gpu).source.find("cliff.md"), std::string::npos);
}

TEST(DecodeModel, CalibrationFromProbeJson) {
  // Two points: 100 us at 1024, 150 us at 2048 -> slope 50 / 1024 us/token, t0 = 50 us.
  // head_dim 128 bf16: one program reads 2 x 128 x 2 = 512 B per token.
  const std::string json = R"({"backend":"cpu","device":"x","kernel":"nosplit",
    "shape":{"head_dim":128,"block_size":16,"kv_heads":2,"q_heads":8,"batch":1,"dtype":"bf16"},
    "points":[{"context":1024,"time_us":100.0,"bytes":1,"gbps":1},
              {"context":2048,"time_us":150.0,"bytes":1,"gbps":1}],
    "slope_us_per_token":0.048828125,"growth":1.5})";
  GpuSpec gpu;
  gpu.multiprocessors = 10;
  gpu.bandwidth_gbps = 100;
  const KernelCalibration c = calibration_from_probe_json(json, "sweep.json", gpu);
  const double slope = 50.0 / 1024.0;
  EXPECT_NEAR(c.call_overhead_us, 100.0 - 1024.0 * slope, 1e-9);
  EXPECT_NEAR(c.per_program_gbps, 512.0 / slope / 1000.0, 1e-9);
  EXPECT_NE(c.source.find("sweep.json"), std::string::npos);
  // The layout `kvsight probe sweep --format json` writes: each kernel keyed by name.
  const std::string nested =
      R"({"backend":"cpu","kernels":["nosplit","splitkv"],"nosplit":)" + json +
      R"(,"splitkv":{"kernel":"splitkv","points":[{"context":1024,"time_us":10,"gbps":42.5}]}})";
  const KernelCalibration n = calibration_from_probe_json(nested, "sweep.json", gpu);
  EXPECT_NEAR(n.per_program_gbps, c.per_program_gbps, 1e-12);
  // The best splitkv point's bandwidth is the fill-device bandwidth.
  EXPECT_NEAR(n.achieved_bandwidth_gbps, 42.5, 1e-12);
  // A file without a nosplit sweep names what is missing.
  EXPECT_THROW(calibration_from_probe_json(R"({"kernel":"splitkv","points":[]})", "f", gpu), InputError);
  EXPECT_THROW(calibration_from_probe_json("not json", "f", gpu), InputError);
}

TEST(DecodeModel, CalibrationDividesOutTheSweepsWaves) {
  // The same sweep at batch 4 x 2 KV heads = 8 programs on a 2-thread cpu ran in ceil(8 / 2) = 4
  // waves: each thread streamed 4 programs one after another, so one program's rate is 4 x
  // 512 B / slope, and a predicted call of the same shape (4 waves again) gives back the
  // measured slope x context instead of 4x it (issue #23 item 4).
  const std::string json = R"({"backend":"cpu","device":"x","kernel":"nosplit",
    "shape":{"head_dim":128,"block_size":16,"kv_heads":2,"q_heads":8,"batch":4,"dtype":"bf16"},
    "points":[{"context":1024,"time_us":100.0,"gbps":1},{"context":2048,"time_us":150.0,"gbps":1}]})";
  GpuSpec cpu;
  cpu.multiprocessors = 2;
  cpu.bandwidth_gbps = 100;
  const double slope = 50.0 / 1024.0;
  const KernelCalibration c = calibration_from_probe_json(json, "sweep.json", cpu);
  EXPECT_NEAR(c.per_program_gbps, 4.0 * 512.0 / slope / 1000.0, 1e-9);
  EXPECT_NE(c.source.find("over 4 waves"), std::string::npos) << c.source;
  // On 10 multiprocessors the 8 programs are one wave: the rate is 512 B / slope.
  cpu.multiprocessors = 10;
  EXPECT_NEAR(calibration_from_probe_json(json, "sweep.json", cpu).per_program_gbps, 512.0 / slope / 1000.0,
              1e-9);
  // A batch the probes never write is bad input naming the field.
  const std::string bad = R"({"kernel":"nosplit","shape":{"head_dim":128,"kv_heads":2,"batch":0},
    "points":[{"context":1024,"time_us":100.0},{"context":2048,"time_us":150.0}]})";
  try {
    (void)calibration_from_probe_json(bad, "f", cpu);
    ADD_FAILURE() << "batch 0 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("shape.batch"), std::string::npos) << e.what();
  }
}

TEST(DecodeModel, CliffWarningForPlan) {
  const ModelSpec qwen = resolve_model("qwen3.6-27b");
  const GpuSpec& rdna = find_gpu("rx7900xt");
  EngineOptions options;
  options.tp = 2;
  options.max_model_len = 32768;
  const auto warning =
      decode_cliff_warning(qwen, rdna, options, decide(*make_engine("vllm"), qwen, &rdna, options));
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("triton_paged_attention_2d"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("no context split"), std::string::npos) << *warning;
  // Llama-3.1-8B gets the custom kernel, which splits: no warning.
  EngineOptions single;
  const ModelSpec llama = resolve_model("llama-3.1-8b");
  EXPECT_FALSE(decode_cliff_warning(llama, rdna, single, decide(*make_engine("vllm"), llama, &rdna, single))
                   .has_value());
  // Engines without gate rules: no gates in the decision, no warning, no error.
  EngineOptions exl;
  exl.engine = "exllamav2";
  exl.exllama.cache_mode = "f16";
  EXPECT_FALSE(
      decode_cliff_warning(qwen, rdna, exl, decide(*make_engine("exllamav2"), qwen, &rdna, exl)).has_value());
}

}  // namespace
}  // namespace kvsight
