// The preflight verdict, one planned scenario per reason, with the device facts
// injected (no GPU, no probes: PreflightRequest::injected_survey, measure = false),
// and the reasons that need measurements judged on hand-built facts.
#include <gtest/gtest.h>

#include <algorithm>

#include "kvsight/app/preflight.hpp"
#include "preflight_fixtures.hpp"

namespace kvsight::app {
namespace {

using namespace preflight_fixtures;

probes::DeviceRecord gpu_record_for_match(const std::string& name, const std::string& arch,
                                          std::uint64_t total) {
  return gpu(0, name, arch, total, total);
}

std::vector<std::string> codes(const PreflightOutcome& o) {
  std::vector<std::string> out;
  for (const PreflightReason& r : o.reasons) out.push_back(r.code);
  return out;
}

bool has(const PreflightOutcome& o, const std::string& code) {
  const auto c = codes(o);
  return std::find(c.begin(), c.end(), code) != c.end();
}

TEST(PreflightVerdict, CleanH200PassesAndMatchesTheCatalog) {
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, kH200Total)}));
  ASSERT_TRUE(o.catalog.has_value());
  EXPECT_EQ(o.catalog->id, "h200");
  EXPECT_EQ(o.verdict, "PASS") << (o.reasons.empty() ? "" : o.reasons.front().message);
  EXPECT_EQ(preflight_exit_code(o.verdict, "fail"), 0);
  EXPECT_EQ(preflight_exit_code(o.verdict, "warn"), 0);
}

TEST(PreflightVerdict, ModelDoesNotFitInTheMemoryFreeNow) {
  // llama-3.1-8b weights: embeddings and lm_head 2 x 128,256 x 4,096 = 1,050,673,152;
  // per layer q,o 2 x 4,096^2 + k,v 2 x 4,096 x 1,024 + MLP 3 x 4,096 x 14,336 + norms
  // 2 x 4,096 = 218,112,000, x 32 = 6,979,584,000; + final norm 4,096: 8,030,261,248
  // params x 2 B = 16.06 GB = 14.96 GiB, more than the 8 GiB free.
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, 8 * kGiB)}));
  ASSERT_TRUE(has(o, "model_does_not_fit"));
  EXPECT_EQ(o.verdict, "FAIL");
  EXPECT_EQ(preflight_exit_code(o.verdict, "fail"), 1);
  EXPECT_EQ(o.reasons.front().severity, "FAIL");
  EXPECT_EQ(o.facts.free_now->gpu_memory_bytes, 8 * kGiB);
}

TEST(PreflightVerdict, FewerThanNSequencesFit) {
  // KV per token: 32 layers x 8 KV heads x 128 x (K + V) x 2 B = 131,072 B; one
  // sequence of max_model_len 131,072 tokens is 2^17 x 2^17 = 16 GiB. vLLM gives KV at
  // most 0.92 x 139.72 GiB - 14.96 GiB of weights = 113.58 GiB: fewer than 113.58 / 16
  // = 7.1 sequences, so 8 cannot fit and 1 must.
  const probes::DeviceSurvey node = survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, kH200Total)});
  const PreflightOutcome eight = plan_only("llama-3.1-8b", node, {}, 8);
  ASSERT_EQ(codes(eight), std::vector<std::string>{"concurrency_does_not_fit"});
  EXPECT_EQ(eight.reasons.front().figures["requested_concurrency"], 8);
  EXPECT_LT(eight.reasons.front().figures["max_concurrency"].get<double>(), 113.58 / 16.0);
  const PreflightOutcome one = plan_only("llama-3.1-8b", node, {}, 1);
  EXPECT_EQ(one.verdict, "PASS");
}

TEST(PreflightVerdict, TpThatDoesNotDivideTheHeadsRefusesStart) {
  // 32 attention heads / TP 3 is not whole.
  EngineOptions options;
  options.tp = 3;
  const PreflightOutcome o = plan_only("llama-3.1-8b",
                                       survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, kH200Total),
                                                  gpu(1, "NVIDIA H200", "sm_90", kH200Total, kH200Total),
                                                  gpu(2, "NVIDIA H200", "sm_90", kH200Total, kH200Total)}),
                                       options);
  ASSERT_TRUE(has(o, "engine_refuses_start"));
  EXPECT_EQ(o.verdict, "FAIL");
}

TEST(PreflightVerdict, MoreRanksThanGpusRefusesStart) {
  // TP 2 x PP 1 = 2 ranks, one GPU on the node (32 heads / 2 divides: only the count fails).
  EngineOptions options;
  options.tp = 2;
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, kH200Total)}), options);
  ASSERT_EQ(codes(o), std::vector<std::string>{"engine_refuses_start"});
  EXPECT_NE(o.reasons.front().message.find("2 ranks need 2 GPUs; this node has 1"), std::string::npos)
      << o.reasons.front().message;
}

TEST(PreflightVerdict, FreeMemoryBelowVllmsRequestRefusesStart) {
  // requested = 0.92 x 150,023,962,624 = 138,022,045,614 B > 100 GiB = 107,374,182,400 B free;
  // the model itself fits in 100 GiB (0.92 x 100 - 14.96 GiB of weights leaves > 16 GiB).
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, 100 * kGiB)}));
  ASSERT_EQ(codes(o), std::vector<std::string>{"free_memory_below_requested"});
  EXPECT_EQ(o.reasons.front().figures["free_bytes"], 100 * kGiB);
  EXPECT_NEAR(o.reasons.front().figures["requested_bytes"].get<double>(), 0.92 * 150023962624.0, 1.0);
}

TEST(PreflightVerdict, KernelThatDoesNotSplitWarnsOfTheCliff) {
  // The vLLM #50264 case (docs/reference/cliff.md): Qwen3.6-27B, TP 2 on two RX 7900 XT
  // (gfx1100): head_dim 256 fails the ROCm custom kernel's gate, the Triton 2D fallback
  // does not split; published 235.29 ms/token at 32,084 tokens against 82.51 at 518:
  // 2.85x, well above the 1.5x bound.
  const PreflightOutcome o = vllm_50264_case();
  ASSERT_TRUE(o.catalog.has_value());
  EXPECT_EQ(o.catalog->id, "rx7900xt");
  EXPECT_FALSE(o.facts.splits_context);
  ASSERT_TRUE(has(o, "decode_cliff"));
  for (const PreflightReason& r : o.reasons) {
    if (r.code != "decode_cliff") continue;
    EXPECT_EQ(r.severity, "WARN");
    EXPECT_GT(r.figures["ratio"].get<double>(), 2.0);
    EXPECT_LT(r.figures["ratio"].get<double>(), 4.0);
  }
}

TEST(PreflightVerdict, MemoryHeldByOtherProcessesWarns) {
  probes::DeviceRecord d = gpu(0, "NVIDIA H200", "sm_90", kH200Total, kH200Total - 2 * kGiB);
  d.processes.push_back({4242, "python", 2 * kGiB});
  d.memory_used_by_others_bytes = 2 * kGiB;
  // 150,023,962,624 - 2 GiB = 147,876,478,976 B free, above vLLM's 138,022,045,614 B request.
  const PreflightOutcome o = plan_only("llama-3.1-8b", survey_of({d}));
  ASSERT_EQ(codes(o), std::vector<std::string>{"memory_held_by_others"});
  EXPECT_EQ(o.verdict, "WARN");
  EXPECT_EQ(o.reasons.front().figures["used_by_others_bytes"], 2 * kGiB);
  EXPECT_EQ(preflight_exit_code(o.verdict, "fail"), 0);
  EXPECT_EQ(preflight_exit_code(o.verdict, "warn"), 1);
}

TEST(PreflightVerdict, UnknownDeviceStillWorksFromItsFigures) {
  // No catalog entry has "x9000": the device spec is built from the survey.
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA X9000", "sm_90", 64 * kGiB, 64 * kGiB)}));
  EXPECT_FALSE(o.catalog.has_value());
  EXPECT_FALSE(o.facts.catalog_total.has_value());
  EXPECT_EQ(o.device_spec.memory_bytes, 64 * kGiB);
  EXPECT_TRUE(o.facts.free_now->capacity.fits);
}

TEST(PreflightCatalog, DeviceNamesMatchTheirEntries) {
  // NVML's names for the SXM and PCIe H100 (both 85,029,027,840 B in gpus.json): the
  // words in common decide ("hbm3" is the SXM entry's, "pcie" the PCIe one's).
  const auto id = [](const std::string& name, const std::string& arch, std::uint64_t total) {
    const GpuSpec* gpu = match_catalog(gpu_record_for_match(name, arch, total));
    return gpu ? gpu->id : std::string("none");
  };
  EXPECT_EQ(id("NVIDIA H100 80GB HBM3", "sm_90", 85029027840ull), "h100-sxm");
  EXPECT_EQ(id("NVIDIA H100 PCIe", "sm_90", 85029027840ull), "h100-pcie");
  // A100 40 GB: 42,295,361,536 B; the 80 GB entry (85,094,039,552 B) is 50% away, beyond 25%.
  EXPECT_EQ(id("NVIDIA A100-SXM4-40GB", "sm_80", 42295361536ull), "a100-40gb");
  // RX 7900 XT 20 GB against XTX 24 GB: the nearest memory total.
  EXPECT_EQ(id("AMD Radeon RX 7900 XT", "gfx1100", 21458059264ull), "rx7900xt");
  EXPECT_EQ(id("AMD Radeon RX 7900 XTX", "gfx1100", 25753026560ull), "rx7900xtx");
  // An H200 reporting 40 GB is no catalog H200 (more than 25% away), nor is an unknown name.
  EXPECT_EQ(id("NVIDIA H200", "sm_90", 40 * kGiB), "none");
  EXPECT_EQ(id("NVIDIA X9000", "sm_90", 64 * kGiB), "none");
}

// ---- Reasons that need measurements: facts by hand.

PreflightFacts measured_facts() {
  PreflightFacts f;
  f.survey = survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, kH200Total)});
  f.engine = "vllm";
  f.kernel = "flash_attn";
  f.splits_context = true;
  BandwidthFacts b;
  b.measured_bytes_per_s = 4.1e12;
  b.catalog_peak_bytes_per_s = 4.8e12;
  b.converged = true;
  b.samples = 10;
  f.bandwidth = b;
  return f;
}

TEST(PreflightVerdict, BandwidthBelowEightyPercentOfPeakWarns) {
  PreflightFacts f = measured_facts();
  EXPECT_TRUE(judge_preflight(f).empty());     // 4.1 / 4.8 = 0.854 >= 0.8
  f.bandwidth->measured_bytes_per_s = 3.6e12;  // 3.6 / 4.8 = 0.75 < 0.8
  const auto reasons = judge_preflight(f);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].code, "bandwidth_below_peak");
  EXPECT_DOUBLE_EQ(reasons[0].figures["ratio"].get<double>(), 0.75);
  EXPECT_EQ(verdict_of(reasons), "WARN");
}

TEST(PreflightVerdict, FailedReferenceCheckFails) {
  PreflightFacts f = measured_facts();
  ProbeFacts p;
  p.kernel = "engine_path";
  p.probe_kernel = "nosplit";
  p.context = 8192;
  p.reference_ok = false;
  p.error = "max relative error 0.5 > bound 0.01";
  f.probes.push_back(p);
  const auto reasons = judge_preflight(f);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].code, "probe_reference_failed");
  EXPECT_EQ(verdict_of(reasons), "FAIL");
}

TEST(PreflightVerdict, FigureThatDidNotConvergeWarnsAndFailsComeFirst) {
  PreflightFacts f = measured_facts();
  f.bandwidth->converged = false;
  f.bandwidth->noise = 0.07;
  f.refusals.push_back("tp divides attention heads: 32 % 3 != 0");
  const auto reasons = judge_preflight(f);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0].code, "engine_refuses_start");  // FAIL before WARN
  EXPECT_EQ(reasons[1].code, "measurement_not_converged");
  EXPECT_DOUBLE_EQ(reasons[1].figures["noise"].get<double>(), 0.07);
}

TEST(PreflightVerdict, JsonCarriesTheFixedSchemaKeys) {
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, 8 * kGiB)}));
  const nlohmann::json j = preflight_json(o, 1);
  EXPECT_EQ(j["schema"], "kvsight.preflight/1");
  for (const char* key : {"kvsight_version", "host", "generated_at", "mode", "backend", "no_gpu", "model",
                          "engine", "requested", "verdict", "exit_code", "reasons", "devices", "bandwidth",
                          "probes", "capacity", "decode"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["devices"][0]["catalog_id"], "h200");
  EXPECT_EQ(j["devices"][0]["memory_free_bytes"], 8 * kGiB);
  EXPECT_EQ(j["capacity"]["free_now"]["gpu_memory_bytes"], 8 * kGiB);
  EXPECT_EQ(j["capacity"]["catalog_total"]["gpu_memory_bytes"], kH200Total);
  for (const auto& r : j["reasons"]) {
    EXPECT_TRUE(r.contains("code") && r.contains("message") && r.contains("figures"));
  }
}

// Issue #23 item 3: one line per class of reason, the verdict first. Three of five measured
// figures noisy at 12 %, 78 % and 40 % (relative noise) give one WARN line "3 of 5 ... 12-78 %";
// the FAIL keeps its own message; JSON keeps every reason.
TEST(PreflightFigures, OneLinePerReasonClassAndTheVerdictFirst) {
  PreflightOutcome o;
  o.verdict = "FAIL";
  o.facts.bandwidth = BandwidthFacts{};
  o.facts.bandwidth->noise = 0.12;
  for (int i = 0; i < 4; ++i) {  // 4 measured probe points + the bandwidth = 5 measurements
    ProbeFacts p;
    p.measured = true;
    p.reference_ok = true;
    o.facts.probes.push_back(p);
  }
  o.reasons.push_back({"model_does_not_fit", "FAIL", "one sequence does not fit", nlohmann::json::object(), {}});
  for (double noise : {0.12, 0.78, 0.40})
    o.reasons.push_back({"measurement_not_converged", "WARN", "noisy", {{"noise", noise}}, {}});
  const FigureDoc doc = preflight_figures(o, 1);
  ASSERT_FALSE(doc.sections.empty());
  const FigureSection& verdict = doc.sections.front();
  EXPECT_EQ(verdict.title, "Verdict: FAIL");
  ASSERT_EQ(verdict.figures.size(), 2u);
  EXPECT_EQ(verdict.figures[0].label, "FAIL");
  EXPECT_EQ(verdict.figures[0].note, "one sequence does not fit");
  EXPECT_EQ(verdict.figures[1].label, "WARN");
  EXPECT_EQ(verdict.figures[1].text, "measurement_not_converged");
  EXPECT_EQ(verdict.figures[1].note,
            "3 of 5 measurements noisy, 12-78 % relative noise: a busy host? rerun when it is idle "
            "(--format json lists each)");
  EXPECT_EQ(preflight_json(o, 1)["reasons"].size(), 4u);
}

}  // namespace
}  // namespace kvsight::app
