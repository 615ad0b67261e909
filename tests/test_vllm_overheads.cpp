// vLLM's dummy-sampler and CUDA-graph terms per release (planner/src/engines/vllm_overheads.hpp,
// issue #28 item 1). Every expected byte count is derived here from the rule's tensors
// (docs/reference/vllm-profile-terms.md gives each with its file and line).
#include <gtest/gtest.h>

#include <string>

#include "../planner/src/engines/vllm_overheads.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/engine_version.hpp"
#include "kvsight/gpu.hpp"

namespace kvsight {
namespace {

using namespace vllm;

constexpr std::uint64_t kMiB = 1024ull * 1024ull;

ModelSpec with_architecture(ModelSpec m, const std::string& arch) {
  m.architecture = arch;
  return m;
}

ModelSpec moe(ModelSpec m, const std::string& arch) {
  m.architecture = arch;
  m.moe.num_experts = 64;
  m.moe.experts_per_token = 8;
  m.moe.moe_intermediate_size = 1024;
  return m;
}

TEST(VllmRunner, DefaultRunnerFollowsEachReleasesRule) {
  const EngineOptions o;
  const ModelSpec llama = llama31_8b();
  const ModelSpec qwen3 = with_architecture(llama31_8b(), "Qwen3ForCausalLM");
  ModelSpec llama_fp8 = llama31_8b();
  llama_fp8.quantization.method = "fp8";
  const ModelSpec mixtral = moe(llama31_8b(), "MixtralForCausalLM");
  const ModelSpec qwen2moe = moe(llama31_8b(), "Qwen2MoeForCausalLM");
  // V1 before 0.22.
  EXPECT_FALSE(uses_v2_model_runner(read_engine_version("0.21.0"), qwen3, o, nullptr));
  // 0.22: Qwen3ForCausalLM only, dense and unquantized.
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.22.0"), qwen3, o, nullptr));
  EXPECT_FALSE(uses_v2_model_runner(read_engine_version("0.22.0"), llama, o, nullptr));
  // 0.23: Llama, Mistral, Qwen3, dense and unquantized.
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.23.1"), llama, o, nullptr));
  EXPECT_FALSE(uses_v2_model_runner(read_engine_version("0.23.0"), llama_fp8, o, nullptr));
  // 0.24: the six listed architectures, any quantization.
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.24.0"), llama_fp8, o, nullptr));
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.24.0"), qwen2moe, o, nullptr));
  EXPECT_FALSE(uses_v2_model_runner(read_engine_version("0.24.0"), mixtral, o, nullptr));
  // 0.25-0.28: every dense model and the listed MoE ones.
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.25.0"), with_architecture(llama31_8b(), "GemmaForCausalLM"), o, nullptr));
  EXPECT_FALSE(uses_v2_model_runner(read_engine_version("0.28.0"), mixtral, o, nullptr));
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.28.0"), qwen2moe, o, nullptr));
  // 0.29+: every model, but ngram speculation stays on V1; 0.34 has only V2.
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.29.0"), mixtral, o, nullptr));
  EngineOptions ngram;
  ngram.vllm.speculative = SpeculativeConfig{};
  ngram.vllm.speculative->method = "ngram";
  EXPECT_FALSE(uses_v2_model_runner(read_engine_version("0.33.0"), llama, ngram, nullptr));
  EXPECT_TRUE(uses_v2_model_runner(read_engine_version("0.34.0"), llama, ngram, nullptr));
}

TEST(VllmSampler, BytesPerLogitFollowTheSamplerPath) {
  const GpuSpec& h100 = find_gpu("h100");  // 132 SMs, sm_90
  ASSERT_EQ(h100.runtime_multiprocessors, 132u);
  const std::uint64_t V = 128256;
  const double rows = 1024;
  // 0.15, V1: the PyTorch sort, 2 + 4 + 4 + 8 + 8 + 12 = 38 B per element; 14 with FlashInfer.
  SamplerTerm s = sampler_term(read_engine_version("0.15.0"), false, &h100, 1024, 8192, V);
  EXPECT_EQ(s.rows, 1024u);
  EXPECT_EQ(s.bytes_per_element, 38.0);
  EXPECT_EQ(s.predicted_bytes, static_cast<std::uint64_t>(rows * V * 38));
  EXPECT_EQ(s.low_bytes, static_cast<std::uint64_t>(rows * V * 14));
  EXPECT_EQ(s.triton_buffer_bytes, 0u);
  // 64 rows take the full-sort route: 50 B.
  EXPECT_EQ(sampler_term(read_engine_version("0.15.0"), false, &h100, 64, 8192, V).bytes_per_element, 50.0);
  // 0.19, V1: Triton in place, 2 + 4 + 4 + 4 = 14 B, plus the per-program buffer of
  // min(pow2(min(132, 1024)) = 256, 132) = 132 rows of fp32 logits.
  s = sampler_term(read_engine_version("0.19.0"), false, &h100, 1024, 8192, V);
  EXPECT_EQ(s.bytes_per_element, 14.0);
  EXPECT_EQ(s.triton_buffer_bytes, 132u * V * 4);
  EXPECT_EQ(s.predicted_bytes, static_cast<std::uint64_t>(rows * V * 14) + 132u * V * 4);
  // ... and fewer than 8 rows still sort (4 rows: the full-sort route, 50 B).
  EXPECT_EQ(sampler_term(read_engine_version("0.25.0"), false, &h100, 4, 8192, V).bytes_per_element, 50.0);
  // 0.24, V2 default state: bf16 logits + fp32 copy = 6 B; 0.28: the bf16 logits alone.
  EXPECT_EQ(sampler_term(read_engine_version("0.24.0"), true, &h100, 1024, 8192, V).bytes_per_element, 6.0);
  EXPECT_EQ(sampler_term(read_engine_version("0.27.0"), true, &h100, 1024, 8192, V).bytes_per_element, 6.0);
  EXPECT_EQ(sampler_term(read_engine_version("0.28.0"), true, &h100, 1024, 8192, V).bytes_per_element, 2.0);
  // 0.33, V2 warm-up pass on an H100: FlashInfer, 2 + 4 + 4 + 4 = 14 B, no Triton buffer.
  s = sampler_term(read_engine_version("0.33.0"), true, &h100, 1024, 8192, V);
  EXPECT_EQ(s.bytes_per_element, 14.0);
  EXPECT_EQ(s.triton_buffer_bytes, 0u);
  EXPECT_EQ(s.predicted_bytes, static_cast<std::uint64_t>(rows * V * 14));
  // ... the range's low end is the Triton path: 6 B + 132 rows of buffer.
  EXPECT_EQ(s.low_bytes, static_cast<std::uint64_t>(rows * V * 6) + 132u * V * 4);
  // On an MI300X (ROCm, 304 CUs) there is no FlashInfer: 6 B + min(pow2(304) = 512, 304) rows.
  const GpuSpec& mi300x = find_gpu("mi300x");
  const std::uint64_t cus = mi300x.runtime_multiprocessors != 0 ? mi300x.runtime_multiprocessors
                                                                 : mi300x.multiprocessors;
  ASSERT_EQ(cus, 304u);
  s = sampler_term(read_engine_version("0.33.0"), true, &mi300x, 1024, 8192, V);
  EXPECT_EQ(s.bytes_per_element, 6.0);
  EXPECT_EQ(s.triton_buffer_bytes, 304u * V * 4);
  // The rows are min(max_num_seqs, max_num_batched_tokens).
  EXPECT_EQ(sampler_term(read_engine_version("0.33.0"), true, &h100, 1024, 512, V).rows, 512u);
}

TEST(VllmSampler, PenaltiesStateCountsFromTheReleaseThatMeasuresAllMemory) {
  const GpuSpec& h100 = find_gpu("h100");
  // 256 seqs x 128,256 x 4 B of output_bin_counts + 256 x ceil(128,256 / 32) = 4,008 x 4 B of mask.
  const std::uint64_t expected = 256ull * 128256 * 4 + 256ull * 4008 * 4;
  EXPECT_EQ(sampler_term(read_engine_version("0.28.0"), true, &h100, 256, 8192, 128256).penalties_state_bytes, expected);
  EXPECT_EQ(sampler_term(read_engine_version("0.26.0"), true, &h100, 256, 8192, 128256).penalties_state_bytes, 0u);
  EXPECT_EQ(sampler_term(read_engine_version("0.28.0"), false, &h100, 256, 8192, 128256).penalties_state_bytes, 0u);
}

TEST(VllmGraphs, CaptureSizesAndTheEstimateFloor) {
  // [1, 2, 4] + 8..248 step 8 (31) + 256..512 step 16 (17) = 51; up to 256: 3 + 31 + 1 = 35
  // (PR #39559's log: "PIECEWISE=51 (largest=512), FULL=35 (largest=256)").
  EXPECT_EQ(capture_size_count(512), 51u);
  EXPECT_EQ(capture_size_count(256), 35u);
  EXPECT_EQ(capture_size_count(8), 4u);
  EngineOptions o;
  const double per_token = 1000.0;
  // Before 0.20 the estimate is not subtracted; the V2 runner before 0.29 returns 0.
  EXPECT_FALSE(graph_term(read_engine_version("0.19.0"), false, o, nullptr, 1024, 8192, per_token).subtracted);
  EXPECT_EQ(graph_term(read_engine_version("0.23.0"), true, o, nullptr, 1024, 8192, per_token).predicted_bytes, 0u);
  // 0.23 V1, S 1024: largest min(2 x 1024, 512) = 512; 51 + 51 graphs: 512 x 1000 B + 100 MiB.
  GraphTerm g = graph_term(read_engine_version("0.23.0"), false, o, nullptr, 1024, 8192, per_token);
  EXPECT_TRUE(g.subtracted);
  EXPECT_EQ(g.largest_size, 512u);
  EXPECT_EQ(g.piecewise_graphs, 51u);
  EXPECT_EQ(g.full_graphs, 51u);
  EXPECT_EQ(g.predicted_bytes, 512u * 1000 + 100 * kMiB);
  // S 128: largest 256 (35 graphs), FULL up to 128 (3 + 16 = 19): 256 x 1000 B + 52 MiB.
  g = graph_term(read_engine_version("0.33.0"), true, o, nullptr, 128, 8192, per_token);
  EXPECT_EQ(g.piecewise_graphs, 35u);
  EXPECT_EQ(g.full_graphs, 19u);
  EXPECT_EQ(g.predicted_bytes, 256u * 1000 + 52 * kMiB);
  // From 0.28 a B200 (SM 10.0) captures up to 1024 tokens: 51 + 32 sizes 528..1024 = 83 graphs.
  const GpuSpec& b200 = find_gpu("b200");
  ASSERT_EQ(b200.arch.rfind("sm_10", 0), 0u);
  g = graph_term(read_engine_version("0.33.0"), true, o, &b200, 1024, 8192, per_token);
  EXPECT_EQ(g.largest_size, 1024u);
  EXPECT_EQ(g.piecewise_graphs, 83u);
  EXPECT_EQ(graph_term(read_engine_version("0.27.0"), false, o, &b200, 1024, 8192, per_token).largest_size, 512u);
  o.vllm.enforce_eager = true;
  EXPECT_EQ(graph_term(read_engine_version("0.33.0"), true, o, nullptr, 1024, 8192, per_token).predicted_bytes, 0u);
}

}  // namespace
}  // namespace kvsight
