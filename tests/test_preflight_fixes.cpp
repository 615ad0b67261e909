// Preflight's fixes (issue #23 items 1, 2 and 4): each reason with the change that clears it,
// spelled with the engine's own flag, and the figure of the fix derived by hand here from the
// model's shape and the budget the planner gave (the budget itself is the engines' tests').
// Devices are injected (no GPU, no probes: PreflightRequest::injected_survey, measure =
// false); the reasons that need measurements are judged on facts built by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "kvsight/app/preflight.hpp"
#include "preflight_fixtures.hpp"
#include "kvsight/budget.hpp"

namespace kvsight::app {
namespace {

using namespace preflight_fixtures;

constexpr std::uint64_t kRtx4090Total = 25383927808ull;     // planner/data/gpus.json rtx4090
// llama-3.1-8b: 32 layers x 8 KV heads x 128 x (K + V) x 2 B = 131,072 B of KV per token in
// bf16; a vLLM block of 16 tokens is 2 MiB.
constexpr std::uint64_t kBytesPerToken = 32ull * 8 * 128 * 2 * 2;
constexpr std::uint64_t kPageBytes = 16 * kBytesPerToken;

probes::DeviceSurvey h200s(int count) {
  std::vector<probes::DeviceRecord> devices;
  for (int i = 0; i < count; ++i) devices.push_back(gpu(i, "NVIDIA H200", "sm_90", kH200Total, kH200Total));
  return survey_of(std::move(devices));
}

const PreflightReason& reason(const PreflightOutcome& o, const std::string& code) {
  for (const PreflightReason& r : o.reasons)
    if (r.code == code) return r;
  throw std::runtime_error("no reason " + code);
}

// The fix of one kind, or nullptr.
const PreflightFix* fix_of(const PreflightReason& r, const std::string& kind) {
  for (const PreflightFix& f : r.fixes)
    if (f.kind == kind) return &f;
  return nullptr;
}

std::string flag_of(const PreflightReason& r, const std::string& kind) {
  const PreflightFix* f = fix_of(r, kind);
  return f ? f->flag : "(none)";
}

TEST(PreflightFixes, FewerThanNSequences) {
  // 8 sequences of 131,072 tokens on one H200: each needs 131,072 x 131,072 B = 16 GiB; the
  // budget gives ~112 GiB. Two GPUs on the node so a TP fix can be offered.
  const PreflightOutcome o = plan_only("llama-3.1-8b", h200s(2), {}, 8);
  const PreflightReason& r = reason(o, "concurrency_does_not_fit");
  const std::uint64_t available = o.facts.free_now->capacity.available_kv_bytes;
  // vLLM's blocks: available / 2 MiB, whole; one sequence of L tokens holds ceil(L / 16).
  const std::uint64_t blocks = available / kPageBytes;
  // --max-num-seqs: the sequences of 131,072 tokens (8,192 blocks) that fit.
  EXPECT_EQ(flag_of(r, "max_num_seqs"), "--max-num-seqs " + std::to_string(blocks / 8192));
  // --max-model-len: the longest L with 8 x ceil(L / 16) <= blocks, i.e. 16 x floor(blocks / 8)
  // (vLLM's max concurrency counts every block; only the one-sequence check holds one back).
  EXPECT_EQ(flag_of(r, "max_model_len"), "--max-model-len " + std::to_string(blocks / 8 * 16));
  // fp8 halves the bytes per token: 8 x 8 GiB = 64 GiB < 112 GiB. vLLM's first 8-bit type.
  EXPECT_EQ(flag_of(r, "kv_cache_dtype"), "--kv-cache-dtype fp8");
  // TP 2: 8 GiB of KV per sequence per rank, 64 GiB for 8, with half the weights per rank.
  EXPECT_EQ(flag_of(r, "parallelism"), "--tensor-parallel-size 2");
  // No fraction up to 0.99 holds 128 GiB: 0.99 x 139.72 GiB - 14.96 GiB of weights = 123.4 GiB.
  EXPECT_EQ(fix_of(r, "memory_fraction"), nullptr);
}

TEST(PreflightFixes, ModelDoesNotFitOnAnRtx4090) {
  // One sequence of 131,072 tokens (16 GiB of KV) against what 24 GB leaves after 14.96 GiB
  // of weights.
  const PreflightOutcome o = plan_only(
      "llama-3.1-8b", survey_of({gpu(0, "NVIDIA GeForce RTX 4090", "sm_89", kRtx4090Total, kRtx4090Total)}));
  ASSERT_TRUE(o.catalog.has_value());
  EXPECT_EQ(o.catalog->id, "rtx4090");
  const PreflightReason& r = reason(o, "model_does_not_fit");
  EXPECT_EQ(r.severity, "FAIL");
  const std::uint64_t available = o.facts.free_now->capacity.available_kv_bytes;
  ASSERT_LT(available, 16 * kGiB);
  ASSERT_GT(available, kPageBytes);
  // The longest one sequence can be: 16 tokens per whole block of the budget, less the null
  // block vLLM's fits check holds back from 0.29 on (PR #47272).
  EXPECT_EQ(flag_of(r, "max_model_len"),
            "--max-model-len " + std::to_string((available / kPageBytes - 1) * 16));
  // The message says what one sequence needs and what the engine leaves, not "5 of 22 free".
  EXPECT_NE(r.message.find("needs 16.00 GiB of KV"), std::string::npos) << r.message;
  // One GPU on the node: no TP fix.
  EXPECT_EQ(fix_of(r, "parallelism"), nullptr);
}

TEST(PreflightFixes, NothingOnTheNodeFitsPointsToFit) {
  // 8 GiB free, 14.96 GiB of weights: no length, type or fraction of one GPU holds it.
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, 8 * kGiB)}));
  const PreflightReason& r = reason(o, "model_does_not_fit");
  ASSERT_EQ(r.fixes.size(), 1u);
  EXPECT_EQ(r.fixes[0].kind, "action");
  EXPECT_TRUE(r.fixes[0].flag.empty());
  EXPECT_NE(r.fixes[0].text.find("kvsight fit --model llama-3.1-8b --concurrency 1 --context 131072"),
            std::string::npos)
      << r.fixes[0].text;
}

TEST(PreflightFixes, TpThatDoesNotDivideTheHeads) {
  // 32 heads / TP 3 is refused; TP 1 on one H200 serves one sequence (the clean-node test).
  EngineOptions options;
  options.tp = 3;
  const PreflightOutcome o = plan_only("llama-3.1-8b", h200s(3), options);
  EXPECT_EQ(flag_of(reason(o, "engine_refuses_start"), "parallelism"), "--tensor-parallel-size 1");
}

TEST(PreflightFixes, MoreRanksThanGpus) {
  EngineOptions options;
  options.tp = 2;
  const PreflightOutcome o = plan_only("llama-3.1-8b", h200s(1), options);
  EXPECT_EQ(flag_of(reason(o, "engine_refuses_start"), "parallelism"), "--tensor-parallel-size 1");
}

TEST(PreflightFixes, FreeMemoryBelowVllmsRequest) {
  // 100 GiB free of 139.72 GiB: vLLM asks 0.92 x total = 138,022,045,614 B and refuses. The
  // largest fraction it accepts is floor(100 GiB / total, 0.01) = floor(0.7157) = 0.71, where
  // 0.71 x 139.72 GiB - 14.96 GiB of weights still holds a 16 GiB sequence; or free the rest:
  // 138,022,045,614 - 107,374,182,400 = 30,647,863,214 B.
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, 100 * kGiB)}));
  const PreflightReason& r = reason(o, "free_memory_below_requested");
  EXPECT_EQ(flag_of(r, "memory_fraction"), "--gpu-memory-utilization 0.71");
  const PreflightFix* free = fix_of(r, "free_memory");
  ASSERT_NE(free, nullptr);
  EXPECT_NEAR(free->figures["bytes_to_free"].get<double>(), 30647863214.0, 1.0);
}

// vLLM 0.34's extensible KV cache (its default on CUDA) skips that check: "the budget is only a
// cap; exceeding free memory over-reserves address space rather than pages" (worker/utils.py
// request_memory, 0.34.0). The same node under 0.34 is no free_memory_below_requested FAIL; with
// --kv-cache-memory-bytes (which turns the extensible cache off) it is again.
TEST(PreflightFixes, Vllm034ExtensibleCacheSkipsTheFreeMemoryCheck) {
  EngineOptions v034;
  v034.engine_version = "0.34.0";
  const PreflightOutcome o =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, 100 * kGiB)}), v034);
  for (const PreflightReason& r : o.reasons) EXPECT_NE(r.code, "free_memory_below_requested") << r.message;
  EXPECT_FALSE(o.facts.engine_requested_bytes.has_value());
  EngineOptions fixed = v034;
  fixed.vllm.kv_cache_memory_bytes = 20 * kGiB;
  const PreflightOutcome p =
      plan_only("llama-3.1-8b", survey_of({gpu(0, "NVIDIA H200", "sm_90", kH200Total, 100 * kGiB)}), fixed);
  EXPECT_TRUE(p.facts.engine_requested_bytes.has_value());
}

TEST(PreflightFixes, MemoryHeldByOthersNamesTheProcesses) {
  probes::DeviceRecord d = gpu(0, "NVIDIA H200", "sm_90", kH200Total, kH200Total - 2 * kGiB);
  d.processes.push_back({4242, "python", 2 * kGiB});
  d.memory_used_by_others_bytes = 2 * kGiB;
  const PreflightOutcome o = plan_only("llama-3.1-8b", survey_of({d}));
  const PreflightReason& r = reason(o, "memory_held_by_others");
  const PreflightFix* free = fix_of(r, "free_memory");
  ASSERT_NE(free, nullptr);
  EXPECT_EQ(free->figures["bytes_to_free"], 2 * kGiB);
  EXPECT_NE(free->text.find("pid 4242 python"), std::string::npos) << free->text;
}

TEST(PreflightFixes, NoGpuJudgesTheTargetAndExitsZero) {
  // No device: the CPU stands in for the probes, capacity is judged for h200's catalog total
  // (7 sequences of 16 GiB fit in its ~112 GiB), NO GPU is a WARN and the exit code is 0.
  const PreflightOutcome o = plan_only("llama-3.1-8b", survey_of({}));
  EXPECT_TRUE(o.facts.survey.no_gpu);
  EXPECT_EQ(o.facts.target_gpu, "h200");
  EXPECT_EQ(o.verdict, "WARN");
  EXPECT_EQ(preflight_exit_code(o.verdict, "fail"), 0);
  const PreflightReason& r = reason(o, "no_gpu");
  EXPECT_EQ(flag_of(r, "target_gpu"), "--gpu ID");
  ASSERT_TRUE(o.facts.judged_capacity().has_value());
  EXPECT_EQ(o.facts.judged_capacity()->gpu_memory_bytes, kH200Total);
  // --gpu names the target; its failure is a real FAIL with the planner's fix on that GPU.
  const PreflightOutcome small = plan_only("llama-3.1-8b", survey_of({}), {}, std::nullopt, "rtx4090");
  EXPECT_EQ(small.facts.target_gpu, "rtx4090");
  const PreflightReason& fail = reason(small, "model_does_not_fit");
  const std::uint64_t available = small.facts.catalog_total->capacity.available_kv_bytes;
  EXPECT_EQ(flag_of(fail, "max_model_len"),
            "--max-model-len " + std::to_string((available / kPageBytes - 1) * 16));
  // With no GPU the fixes may use a node of 8 of the target: TP 2 halves the 16 GiB.
  EXPECT_EQ(flag_of(fail, "parallelism"), "--tensor-parallel-size 2");
}

TEST(PreflightFixes, SglangSpellsItsOwnFlags) {
  // The same H200 and 8 sequences under SGLang: its length flag is --context-length.
  EngineOptions options;
  options.engine = "sglang";
  const PreflightOutcome o = plan_only("llama-3.1-8b", h200s(1), options, 8);
  const PreflightReason& r = reason(o, "concurrency_does_not_fit");
  EXPECT_EQ(flag_of(r, "max_model_len").rfind("--context-length ", 0), 0u) << flag_of(r, "max_model_len");
  EXPECT_EQ(flag_of(r, "kv_cache_dtype").rfind("--kv-cache-dtype fp8", 0), 0u) << flag_of(r, "kv_cache_dtype");
}

// ---- Reasons judged on measurements: facts by hand.

PreflightFacts measured_facts() {
  PreflightFacts f;
  f.survey = h200s(1);
  f.engine = "vllm";
  f.kernel = "flash_attn";
  f.splits_context = true;
  return f;
}

FixInputs inputs_for(const Engine& engine) {
  FixInputs in;
  in.engine = &engine;
  in.device = find_gpu("h200");
  return in;
}

TEST(PreflightFixes, PredictionThatDisagreesWithTheMeasurementWarns) {
  // The calibrated prediction and the measured step: 635.00 vs 608.34 ms is 4.4 % apart,
  // under the 25 % bound; 1,853.57 vs 901.56 is 105.6 % apart, over it.
  PreflightFacts f = measured_facts();
  DecodeFacts near, far;
  near.context = 1024;
  near.engine_path.ms_per_token = 635.00;
  near.measured_engine_ms = 608.34;
  far.context = 32768;
  far.engine_path.ms_per_token = 1853.57;
  far.measured_engine_ms = 901.56;
  f.decode = {near, far};
  std::vector<PreflightReason> reasons = judge_preflight(f);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].code, "prediction_disagrees");
  EXPECT_EQ(reasons[0].figures["context"], 32768);
  EXPECT_NEAR(reasons[0].figures["gap"].get<double>(), (1853.57 - 901.56) / 901.56, 1e-12);
  const auto engine = make_engine("vllm");
  attach_fixes(reasons, f, inputs_for(*engine), nullptr);
  ASSERT_EQ(reasons[0].fixes.size(), 1u);
  EXPECT_EQ(reasons[0].fixes[0].kind, "action");
}

TEST(PreflightFixes, EveryMeasuredReasonCarriesAnAction) {
  PreflightFacts f = measured_facts();
  BandwidthFacts b;
  b.measured_bytes_per_s = 3.6e12;  // 75 % of 4.8 TB/s
  b.catalog_peak_bytes_per_s = 4.8e12;
  b.noise = 0.07;
  b.samples = 10;
  f.bandwidth = b;  // not converged: measurement_not_converged too
  ProbeFacts p;
  p.kernel = "engine_path";
  p.probe_kernel = "splitkv";
  p.context = 8192;
  p.reference_ok = false;
  p.error = "max relative error 0.5 > bound 0.01";
  f.probes.push_back(p);
  std::vector<PreflightReason> reasons = judge_preflight(f);
  const auto engine = make_engine("vllm");
  attach_fixes(reasons, f, inputs_for(*engine), nullptr);
  std::vector<std::string> seen;
  for (const PreflightReason& r : reasons) {
    seen.push_back(r.code);
    ASSERT_FALSE(r.fixes.empty()) << r.code;
    EXPECT_FALSE(r.fixes[0].text.empty()) << r.code;
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"bandwidth_below_peak", "measurement_not_converged",
                                            "probe_reference_failed"}));
}

TEST(PreflightFixes, DecodeCliffOnRdna3) {
  // The vLLM #50264 case. The selected ROCM_ATTN path runs Triton's 2D kernel (no split);
  // TRITON_ATTN's unified kernel is admitted on every device and splits a pure decode of
  // num_seqs 1 <= 128 / 2 KV heads per rank into 3D segments (docs/reference/gates.md "Triton
  // unified attention"). vLLM 0.33 takes the backend as --attention-backend (PR #26315, from
  // 0.13); before 0.13 the same switch is the environment variable.
  EXPECT_EQ(flag_of(reason(vllm_50264_case(), "decode_cliff"), "attention_backend"),
            "--attention-backend TRITON_ATTN");
  EXPECT_EQ(flag_of(reason(vllm_50264_case("0.12.0"), "decode_cliff"), "attention_backend")
                .rfind("VLLM_ATTENTION_BACKEND=", 0),
            0u);
}

}  // namespace
}  // namespace kvsight::app
