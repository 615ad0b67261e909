// vLLM's FlashInfer GDN prefill checkpoints (issue #28 item 4): from 0.33, on the devices where
// `_resolve_gdn_prefill_backend` (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py) picks
// FlashInfer (SM 9.0; SM 10.x / 12.x with linear_key_head_dim 128 on CUDA 13), align mode gives
// every gated delta-net layer a prefill-checkpoint alignment of 64
// (v1/attention/backends/gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT) and a spec with
// num_prefill_checkpoint_blocks = 1. platforms/interface.py _align_hybrid_block_size then takes
// lcm(max(16, block), 64) as the alignment, and MambaSpec.max_memory_usage_bytes counts
// 2 + 1 state pages per request. Every expected number is derived here by hand.
#include <gtest/gtest.h>

#include <string>

#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/engine_vllm.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"

namespace kvsight {
namespace {

// Qwen3.6-27B at TP 1 (engine_fixtures.hpp): the GDN state page is
//   conv (3 x (2 x 16 x 128 + 48 x 128) x 2 B = 3 x 10,240 x 2 = 61,440) +
//   ssm  (48 x 128 x 128 x 4 B = 3,145,728) = 3,207,168 B;
// an attention token is 4 KV heads x 256 x 2 (K, V) x 2 B = 4,096 B.
// Alignment 16 (Triton prefill): 16 x ceil(3,207,168 / (16 x 4,096)) = 16 x ceil(48.94) = 784.
// Alignment 64 (FlashInfer):     64 x ceil(3,207,168 / (64 x 4,096)) = 64 x ceil(12.23) = 832.
constexpr std::uint32_t kTritonBlock = 784;
constexpr std::uint32_t kFlashInferBlock = 832;

EngineOptions v033() {
  EngineOptions o;
  o.engine_version = "0.33.0";
  return o;
}

TEST(VllmGdnCheckpoint, BlockAlignsTo64WhereFlashInferRunsTheGdnPrefill) {
  const ModelSpec m = qwen36_27b_shape();
  const EngineOptions o = v033();
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("h100-sxm")), kFlashInferBlock);  // sm_90
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("h200")), kFlashInferBlock);
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("b200")), kFlashInferBlock);     // sm_100, head_k_dim 128
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("rtx5090")), kFlashInferBlock);  // sm_120, head_k_dim 128
  // SM 8.x and ROCm keep the Triton prefill; no device named: Triton assumed.
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("a100-80gb")), kTritonBlock);
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("mi300x")), kTritonBlock);
  EXPECT_EQ(vllm_block_size(m, o, nullptr), kTritonBlock);
}

TEST(VllmGdnCheckpoint, BlackwellNeedsKeyHeadDim128AndHopperDoesNot) {
  // head_k_dim 64: Blackwell falls back to Triton; SM 9.0 takes FlashInfer whatever the dim.
  // The state page with key heads of 64: conv 3 x (2 x 16 x 64 + 48 x 128) x 2 = 49,152;
  // ssm 48 x 128 x 64 x 4 = 1,572,864 (value heads x value dim x key dim) -> 1,622,016 B.
  // Triton: 16 x ceil(1,622,016 / 65,536) = 16 x 25 = 400; FlashInfer: 64 x ceil(6.19) = 448.
  ModelSpec m = qwen36_27b_shape();
  m.recurrent->key_head_dim = 64;
  const EngineOptions o = v033();
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("b200")), 400u);
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("rtx5090")), 400u);
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("h200")), 448u);
}

TEST(VllmGdnCheckpoint, OnlyFrom033InAlignModeAndWithTheFlashInferBackend) {
  const ModelSpec m = qwen36_27b_shape();
  const GpuSpec& h200 = find_gpu("h200");
  EngineOptions o = v033();
  o.engine_version = "0.32.0";  // the backend is chosen in 0.30-0.32 but exports no checkpoint
  EXPECT_EQ(vllm_block_size(m, o, &h200), kTritonBlock);
  o = v033();
  o.vllm.disable_prefix_caching = true;  // no align mode: no checkpoint alignment
  EXPECT_EQ(vllm_block_size(m, o, &h200), kTritonBlock);
  o = v033();
  set_option(o, OptionField::gdn_prefill_backend, "triton");
  EXPECT_EQ(vllm_block_size(m, o, &h200), kTritonBlock);
  o = v033();
  set_option(o, OptionField::gdn_prefill_backend, "flashinfer");
  EXPECT_EQ(vllm_block_size(m, o, &h200), kFlashInferBlock);
  EXPECT_EQ(vllm_block_size(m, o, &find_gpu("a100-80gb")), kTritonBlock);  // requested, unsupported
  EXPECT_THROW(set_option(o, OptionField::gdn_prefill_backend, "fla"), InputError);
}

TEST(VllmGdnCheckpoint, EachGdnLayerKeepsAThirdStatePage) {
  // With a given KV memory the pages of one request at 32,768 tokens: attention
  // ceil(32,768 / block) plus the GDN groups' state pages. 16 full-attention layers and 48 GDN
  // layers group as 1 attention + 3 state groups of 16 layers each; a request takes
  // ceil(32768 / 832) = 40 attention pages + 3 state pages per state group on an H200
  // (2 + the checkpoint), ceil(32768 / 784) = 42 + 2 per group on an A100.
  const ModelSpec m = qwen36_27b_shape();
  EngineOptions o = v033();
  o.max_model_len = 32768;
  o.vllm.kv_cache_memory_bytes = 20'000'000'000ull;
  const PlanResult hopper = make_engine("vllm")->plan(m, &find_gpu("h200"), o);
  EXPECT_EQ(hopper.kv.block_size, kFlashInferBlock);
  EXPECT_EQ(hopper.kv.blocks_per_sequence, 40u + 3u * 3u);
  const PlanResult ampere = make_engine("vllm")->plan(m, &find_gpu("a100-80gb"), o);
  EXPECT_EQ(ampere.kv.block_size, kTritonBlock);
  EXPECT_EQ(ampere.kv.blocks_per_sequence, 42u + 3u * 2u);
  // The pool (kv_cache_utils.py, uniform pages): one layer's page is 832 x 4,096 = 3,407,872 B
  // and each group has 16 layers, so num_blocks = 20e9 // 3,407,872 // 16 = 5,868 // 16 = 366.
  // From 0.20 the logged tokens are max_concurrency x max_model_len (PR #40694):
  // 366 / 49 pages x 32,768 = 244,756.4 -> 244,756.
  ASSERT_TRUE(hopper.capacity);
  EXPECT_EQ(hopper.capacity->num_blocks, 366u);
  EXPECT_EQ(hopper.capacity->kv_tokens, 244'756u);
}

}  // namespace
}  // namespace kvsight
