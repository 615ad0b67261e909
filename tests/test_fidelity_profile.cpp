// Published vLLM 0.17-0.27 start-up logs that print the profile's own terms (docs/fidelity.md rows
// 29-40), replayed with `kvsight explain`: they test the dummy-sampler and CUDA-graph terms read
// from each release's code (docs/reference/vllm-profile-terms.md, issue #28 item 1). Each excerpt
// names its source in tests/fixtures/logs/. The logged figures are read off the log text here;
// kvsight's are derived by hand in each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kvsight/app/explain.hpp"
#include "log_fixtures.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

app::ExplainOutcome explain(const std::string& log, const std::string& model, const std::string& gpu,
                            EngineOptions options = {}) {
  app::ExplainRequest r;
  r.log_name = log;
  r.log_text = test::fixture_text(log);
  r.model = model;
  r.gpu = gpu;
  r.options = options;
  return app::run_explain(r);
}

const app::ExplainTerm& term(const app::ExplainOutcome& out, const std::string& name, const std::string& replay) {
  for (const app::ExplainTerm& t : out.terms)
    if (t.name == name && t.replay == replay) return t;
  throw std::runtime_error("no term " + name + " / " + replay);
}

double difference(const app::ExplainOutcome& out, const std::string& name,
                  const std::string& replay = "GPU and flags") {
  const app::ExplainTerm& t = term(out, name, replay);
  EXPECT_TRUE(t.logged.has_value()) << name;
  EXPECT_TRUE(t.kvsight.has_value()) << name;
  return t.difference().value_or(1e9);
}

// Within max(3 %, 0.25 GiB) of the logged figure (issue #28's bound for GPU and flags only).
void expect_within_bound(const app::ExplainOutcome& out, const std::string& name) {
  const app::ExplainTerm& t = term(out, name, "GPU and flags");
  ASSERT_TRUE(t.logged && t.kvsight) << name;
  EXPECT_LE(std::fabs(*t.kvsight - *t.logged), std::max(0.03 * std::fabs(*t.logged), 0.25))
      << name << ": kvsight " << *t.kvsight << " against " << *t.logged;
}

// The given-KV replay lands within 0.3 % of the logged tokens.
void expect_tokens_from_given_memory(const app::ExplainOutcome& out) {
  const app::ExplainTerm& t = term(out, "KV tokens", "given KV memory");
  ASSERT_TRUE(t.logged && t.kvsight);
  EXPECT_LE(std::fabs(*t.kvsight - *t.logged), 0.003 * *t.logged) << *t.kvsight << " against " << *t.logged;
}

// ------------------------------------------------ llm-d-planner's vLLM 0.19.0 sweep on H100 80GB
// The 0.19 V1 runner's dummy sampler is the Triton top-k/top-p path (FlashInfer only opted in:
// the logs print "FlashInfer top-p/top-k sampling is available but disabled by default"):
// 1,024 rows (max_num_seqs 1024 < 8192 batched tokens) x V x 14 B, plus the Triton buffer of
// min(pow2(min(132, 1024)), 132) = 132 rows x V x 4 B, plus 0.15 GiB. The logs print the torch
// peak increase that this term predicts; graphs are estimated but not subtracted in 0.19.
double sampler_activation_gib(double vocab) {
  return (1024.0 * vocab * 14 + 132.0 * vocab * 4) / (1024.0 * 1024 * 1024) + 0.15;
}

TEST(FidelityProfile, Llama8bH100SamplerIsTheTorchPeak) {
  const auto out = explain("vllm-0190-llama8b-h100.log", "llama-3.1-8b", "h100-sxm");
  // 1,024 x 128,256 x 14 + 132 x 128,256 x 4 B = 1.78 GiB; + 0.15 = 1.93 GiB, against the logged
  // torch peak increase of 1.89 GiB (the 38 B per logit assumed before gave 4.80 GiB).
  const double act = sampler_activation_gib(128256);
  EXPECT_NEAR(act, 1.93, 0.005);
  EXPECT_DOUBLE_EQ(*term(out, "activation peak", "GPU and flags").logged, 1.89);
  EXPECT_NEAR(*term(out, "activation peak", "GPU and flags").kvsight, act, 0.005);
  EXPECT_LE(std::fabs(difference(out, "activation peak")), 0.05);
  // Graphs: estimated (0.84) and captured (0.91), not subtracted before 0.20.
  EXPECT_FALSE(term(out, "CUDA graph memory", "GPU and flags").logged.has_value());
  // 0.95 x 79.19 = 75.23 GiB; - 14.99 - 1.89 - 0.25 = 58.11 logged; kvsight 58.25.
  expect_within_bound(out, "available KV cache memory");
  expect_tokens_from_given_memory(out);
}

TEST(FidelityProfile, Llama8bFp8KvHoldsTwiceTheTokens) {
  EngineOptions o;
  o.kv_cache_dtype = "fp8";
  const auto out = explain("vllm-0190-llama8b-fp8kv-h100.log", "llama-3.1-8b", "h100-sxm", o);
  expect_within_bound(out, "available KV cache memory");
  expect_tokens_from_given_memory(out);  // 952,032 tokens: 65,536 B per token
  EXPECT_LE(std::fabs(difference(out, "activation peak")), 0.05);
}

TEST(FidelityProfile, Qwen3Qwen25Gemma2SamplersFollowTheVocabulary) {
  // Qwen3-8B: V 151,936 -> 2.25 GiB against 2.21; Qwen2.5-7B: V 152,064 -> 2.26 against 2.21;
  // gemma-2-9b: V 256,000 -> 3.69 against 3.65.
  for (const auto& [log, model, vocab, logged] :
       {std::tuple{"vllm-0190-qwen3-8b-h100.log", "qwen3-8b", 151936.0, 2.21},
        std::tuple{"vllm-0190-qwen25-7b-h100.log", "qwen2.5-7b", 152064.0, 2.21},
        std::tuple{"vllm-0190-gemma2-9b-h100.log", "gemma-2-9b", 256000.0, 3.65}}) {
    const auto out = explain(log, model, "h100-sxm");
    EXPECT_DOUBLE_EQ(*term(out, "activation peak", "GPU and flags").logged, logged) << log;
    EXPECT_NEAR(*term(out, "activation peak", "GPU and flags").kvsight, sampler_activation_gib(vocab), 0.005)
        << log;
    EXPECT_LE(std::fabs(difference(out, "activation peak")), 0.06) << log;
    expect_within_bound(out, "available KV cache memory");
    expect_tokens_from_given_memory(out);
  }
}

TEST(FidelityProfile, Gemma3MissesByItsVisionProfileAndWeights) {
  // gemma-3-27b-it: the sampler (V 262,208: 3.78 GiB) is 0.21 GiB under the logged 3.99 (the
  // vision encoder's profile, not modelled) and the weights 0.35 GiB under 51.45 (the vision
  // tower's estimate): available 20.25 against 19.53, outside the bound (docs/fidelity.md row 36).
  const auto out = explain("vllm-0190-gemma3-27b-h100.log", "gemma-3-27b", "h100-sxm");
  EXPECT_NEAR(difference(out, "activation peak"), -0.21, 0.02);
  EXPECT_NEAR(difference(out, "weights per rank"), -0.35, 0.02);
  EXPECT_NEAR(difference(out, "available KV cache memory"), 0.72, 0.03);
  expect_tokens_from_given_memory(out);
}

TEST(FidelityProfile, TensorParallelNonTorchMemoryIsTheMiss) {
  // TP 2 and 4 on H100s (NVLink): the sampler is per rank and whole-vocabulary, so the torch
  // peak is TP 1's 1.89 GiB (kvsight 1.93); non-torch memory (NCCL and custom all-reduce
  // buffers) is logged at 2.07 and 2.13 GiB, where kvsight assumes 0.25: available 1.8-1.9 GiB
  // over (docs/fidelity.md rows 31-32; a figure outside vLLM's own code).
  for (const char* log : {"vllm-0190-llama8b-h100-tp2.log", "vllm-0190-llama8b-h100-tp4.log"}) {
    const auto out = explain(log, "llama-3.1-8b", "h100-sxm");
    EXPECT_LE(std::fabs(difference(out, "activation peak")), 0.05) << log;
    EXPECT_NEAR(difference(out, "non-torch memory"), -1.85, 0.05) << log;
    EXPECT_NEAR(difference(out, "available KV cache memory") + difference(out, "non-torch memory") +
                    difference(out, "weights per rank") + difference(out, "activation peak"),
                0.0, 0.05)
        << log;
    expect_tokens_from_given_memory(out);
  }
}

TEST(FidelityProfile, GptOss20bTp2) {
  // gpt-oss-20b (V 201,088) at TP 2: the torch peak 2.87 GiB against kvsight's 2.93
  // (1,024 x 201,088 x 14 + 132 x 201,088 x 4 B + 0.15 GiB); weights 6.40 against 7.01 (the
  // mxfp4 MoE layout of 0.19 on Hopper, not modelled) and the TP non-torch term miss.
  const auto out = explain("vllm-0190-gptoss20b-h100-tp2.log", "gpt-oss-20b", "h100-sxm");
  EXPECT_NEAR(*term(out, "activation peak", "GPU and flags").kvsight, sampler_activation_gib(201088), 0.005);
  EXPECT_LE(std::fabs(difference(out, "activation peak")), 0.07);
  expect_tokens_from_given_memory(out);
}

// ------------------------------------------------ other GPUs and releases
TEST(FidelityProfile, Llama8bRtx3090On0171) {
  // TheBuccaneer/vllm-offload-profiles: RTX 3090, vLLM 0.17.1, util 0.9, max_model_len 8192;
  // "Available KV cache memory: 5.68 GiB", 46,544 tokens. Below 70 GiB: S 256, T 2048; the
  // Triton sampler 256 x 128,256 x 14 + min(pow2(82) = 128, 82) x 128,256 x 4 B = 0.47 GiB, above
  // the forward (2048 x (3 x 14,336 + 4 x 4,096) x 2 B = 0.23 GiB).
  EngineOptions o;
  o.engine_version = "0.17.1";
  o.vllm.gpu_memory_utilization = 0.9;
  const auto out = explain("vllm-0171-llama8b-rtx3090.log", "llama-3.1-8b", "rtx3090", o);
  expect_within_bound(out, "available KV cache memory");
  expect_tokens_from_given_memory(out);
}

TEST(FidelityProfile, Qwen3Rtx4090OnTheV2RunnerOf0271) {
  // alexostapiuk11/coldstart-recon-worker: RTX 4090, vLLM 0.27.1, "Using V2 Model Runner";
  // total 23.52 GiB and utilization 0.92 read from the log. Qwen3ForCausalLM is dense, so 0.27
  // runs it on V2 (config/vllm.py): no graph estimate is subtracted, the sampler's default pass
  // holds 6 B per logit (256 x 151,936 x 6 B = 0.22 GiB) and the penalties state is counted
  // (256 x 151,936 x 4 + 256 x 4,748 x 4 B = 0.15 GiB). 5.91 GiB logged.
  const auto out = explain("vllm-0271-qwen3-8b-rtx4090.log", "qwen3-8b", "rtx4090");
  EXPECT_FALSE(term(out, "CUDA graph memory", "GPU and flags").logged.has_value());
  EXPECT_DOUBLE_EQ(*term(out, "CUDA graph memory", "GPU and flags").kvsight, 0.0);
  expect_within_bound(out, "available KV cache memory");
  expect_tokens_from_given_memory(out);
}

TEST(FidelityProfile, Qwen3A100On0191IsAMiss) {
  // dariustanrd/tokenkaki: A100-SXM4-40GB, vLLM 0.19.1 defaults (util 0.92, max_model_len 40,960):
  // "Available KV cache memory: 19.36 GiB". The log leaves 36.24 - 15.27 - 19.36 = 1.61 GiB for
  // activation and non-torch memory; kvsight's 0.82 (S 256: 256 x 151,936 x 14 B + the Triton
  // buffer + 0.15, and 0.1 non-torch) leaves the miss unexplained: the log does not print the
  // profile's terms (docs/fidelity.md row 39).
  const auto out = explain("vllm-0191-qwen3-8b-a100-40gb.log", "qwen3-8b", "a100-40gb");
  EXPECT_NEAR(difference(out, "activation + non-torch (implied)"), -0.79, 0.03);
  expect_tokens_from_given_memory(out);
}

}  // namespace
}  // namespace kvsight
