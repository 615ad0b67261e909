// Published engine start-up logs (docs/fidelity.md) replayed through the vLLM engine: with
// the logged KV memory the tokens / blocks must match within 0.3 %; with nothing but the
// GPU and the flags "Available KV cache memory" must land within max(3 %, 0.25 GiB). The
// expected figures are the logged ones; each case cites its source.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"
#include "log_fixtures.hpp"

namespace kvsight {
namespace {

using test::fixture_model;
using test::gib;
using test::kGiBd;
using test::within_budget_tolerance;

// ---------------------------------------------------------------- vLLM issue #10517
// RTX 3090 (23.58 GiB as torch reports it), Llama-3.1-8B-Instruct bf16, V0 (0.6.x), util 0.90.
// max_model_len 20,000: kv_cache_size=3.81GiB, 1952 GPU blocks; 29,000: 2.89 GiB, 1478 blocks.

TEST(FidelityVllm10517, LoggedMemoryGivesTheLoggedBlocks) {
  // One block: 16 tokens x 131,072 B = 2 MiB; 3.81 GiB = 1950.7 blocks -> 1950, within
  // 2 of 1952 (0.1 %): the log rounds the GiB to 2 decimals.
  EngineOptions o;
  o.engine_version = "0.6.4";
  o.max_model_len = 20000;
  o.vllm.kv_cache_memory_bytes = gib(3.81);
  const auto r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_LE(std::fabs(static_cast<double>(r.capacity->num_blocks) - 1952.0) / 1952.0, 0.003);
  o.max_model_len = 29000;
  o.vllm.kv_cache_memory_bytes = gib(2.89);  // 2.89 x 512 = 1479.7 -> 1479 vs 1478
  const auto r2 = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_LE(std::fabs(static_cast<double>(r2.capacity->num_blocks) - 1478.0) / 1478.0, 0.003);
}

TEST(FidelityVllm10517, GpuAndFlagsOnlyPredictTheBudget) {
  const GpuSpec& gpu = find_gpu("rtx3090");
  const ModelSpec model = resolve_model("llama-3.1-8b");
  EngineOptions o;
  o.engine_version = "0.6.4";
  o.vllm.gpu_memory_utilization = 0.90;
  o.max_model_len = 20000;
  const auto r = make_engine("vllm")->plan(model, &gpu, o);
  EXPECT_TRUE(within_budget_tolerance(static_cast<double>(r.capacity->available_kv_bytes) / kGiBd, 3.81))
      << static_cast<double>(r.capacity->available_kv_bytes) / kGiBd;
  o.max_model_len = 29000;
  const auto r2 = make_engine("vllm")->plan(model, &gpu, o);
  EXPECT_TRUE(within_budget_tolerance(static_cast<double>(r2.capacity->available_kv_bytes) / kGiBd, 2.89))
      << static_cast<double>(r2.capacity->available_kv_bytes) / kGiBd;
}

// ---------------------------------------------------------------- alvarobartt/hf-mem issue #60
// openai/gpt-oss-120b on vLLM (0.10-0.19 era): "reserved 5.38 GiB", "GPU KV cache size: 78,384
// tokens". 36 layers alternating sliding (W 128) / full, 8 KV heads x 64, bf16 cache: page
// 16 x 2 x 8 x 64 x 2 B = 32,768 B, 18 layers per group, a block id 589,824 B.
TEST(FidelityHfMem60, GptOss120bTokensFromTheLoggedMemory) {
  ModelSpec m = llama31_8b();
  m.layers.clear();
  for (int i = 0; i < 36; ++i)
    m.layers.push_back(i % 2 == 0 ? attn(LayerKind::sliding_window, 8, 64, 128)
                                  : attn(LayerKind::full_attention, 8, 64));
  EngineOptions o;
  o.engine_version = "0.19.0";
  o.vllm.kv_cache_memory_bytes = gib(5.38);
  // 5.38 x 2^30 = 5,776,731,013 B / 589,824 B = 9,793.9 -> 9,793 blocks;
  // 9,793 // 2 groups x 16 = 4,896 x 16 = 78,336 tokens against the logged 78,384: -0.06 %.
  const auto r = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r.capacity->num_blocks, 9793u);
  EXPECT_EQ(r.capacity->kv_tokens, 78336u);
  EXPECT_LE(std::fabs(static_cast<double>(r.capacity->kv_tokens) - 78384.0) / 78384.0, 0.003);
}

// ---------------------------------------------------------------- vLLM issue #21348
// Qwen3-235B-A22B-FP8 on 4 x H100 at TP 4 with the LMCache connector (vLLM ~0.9.2-0.10):
// "Available KV cache memory: 8.11 GiB", "GPU KV cache size: 178,880 tokens". 94 layers,
// 4 KV heads x 128, bf16 cache: 1 head per rank, 512 B per token per layer; a block id
// 16 x 94 x 512 = 770,048 B. 8.11 GiB gives 11,308 blocks = 180,928 tokens, +1.1 %: the pool
// is sized by the smallest rank's memory while rank 0's figure is logged, and LMCache
// holds memory (a missing input, docs/fidelity.md).
TEST(FidelityVllm21348, DocumentedMissFromTheMinimumOverRanks) {
  ModelSpec m = llama31_8b();
  m.num_attention_heads = 64;
  m.num_kv_heads = 4;
  m.layers.assign(94, attn(LayerKind::full_attention, 4, 128));
  EngineOptions o;
  o.engine_version = "0.10.2";
  o.tp = 4;
  o.vllm.kv_cache_memory_bytes = gib(8.11);
  const auto r = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r.capacity->page_bytes, 770048u);
  EXPECT_EQ(r.capacity->kv_tokens, gib(8.11) / 770048 * 16);
  const double error = (static_cast<double>(r.capacity->kv_tokens) - 178880.0) / 178880.0;
  EXPECT_GT(error, 0.003);  // the documented miss: more than the 0.3 % bound
  EXPECT_LT(error, 0.02);
}

// ---------------------------------------------------------------- vLLM PR #12569
// neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8, VLLM_USE_V1=1 on 0.7,
// --max-model-len 2048: "# GPU blocks: 1381", "Maximum concurrency for 2048 tokens per
// request: 10.79x" = 1381 x 16 / 2048 = 10.789.
TEST(FidelityVllmPr12569, ConcurrencyFromTheLoggedBlocks) {
  const ModelSpec model = resolve_model("llama-3.1-70b");  // same attention shape as 3.1-70B
  EngineOptions o;
  o.engine_version = "0.8.5";  // V1 line: blocks / ceil(2048 / 16) = 1381 / 128
  o.max_model_len = 2048;
  o.vllm.kv_cache_memory_bytes = 1381ull * 16 * 327680;  // 80 layers x 8 x 256 x 2 B = 327,680 B per token
  const auto r = make_engine("vllm")->plan(model, nullptr, o);
  EXPECT_EQ(r.capacity->num_blocks, 1381u);
  EXPECT_NEAR(r.capacity->max_concurrency, 1381.0 / 128.0, 1e-9);  // 10.79x
}

// ---------------------------------------------------------------- fixtures with a real config
// Models not in the catalog are read from the config shapes stored next to the logs
// (tests/fixtures/logs/<model>.config.json, each naming the HF config it restates).

double relative_error(double predicted, double logged) { return (predicted - logged) / logged; }

// ---------------------------------------------------------------- LMCache issue #1739
// Qwen3-14B, one GPU, vLLM V1 (0.10.2 / 0.11 era), --max-model-len 32768:
// "Available KV cache memory: 6.51 GiB", "GPU KV cache size: 42,656 tokens", "1.30x".
TEST(FidelityLmcache1739, Qwen3_14bTokensFromTheLoggedMemory) {
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.max_model_len = 32768;
  o.vllm.kv_cache_memory_bytes = gib(6.51);
  const auto r = make_engine("vllm")->plan(fixture_model("qwen3-14b"), nullptr, o);
  // 40 layers x 2 x 8 heads x 128 x 2 B = 163,840 B per token; a block of 16 = 2,621,440 B;
  // 6.51 x 2^30 = 6,990,059,274 B / 2,621,440 = 2,666.5 -> 2,666 blocks x 16 = 42,656 tokens,
  // the logged figure exactly; 42,656 / 32,768 = 1.30x.
  EXPECT_EQ(r.kv.bytes_per_token, 163840u);
  EXPECT_EQ(r.capacity->num_blocks, 2666u);
  EXPECT_EQ(r.capacity->kv_tokens, 42656u);
  EXPECT_NEAR(r.capacity->max_concurrency, 1.30, 0.005);
}

// ---------------------------------------------------------------- vLLM issue #13061
// DeepSeek-R1-Distill-Qwen-14B on 2 x RTX 4090, TP 2, V0 0.7.x, util 0.98: KV 8.69 GiB on
// the reporter's rank, "maximum number of tokens that can be stored in KV cache (81536)".
TEST(FidelityVllm13061, DocumentedMissFromTheMinimumOverRanks) {
  EngineOptions o;
  o.engine_version = "0.7.2";
  o.tp = 2;
  o.vllm.kv_cache_memory_bytes = gib(8.69);
  const auto r = make_engine("vllm")->plan(fixture_model("deepseek-r1-distill-qwen-14b"), nullptr, o);
  // Per rank 4 of 8 KV heads: 48 x 2 x 4 x 128 x 2 B = 98,304 B per token; a block 1,572,864 B;
  // 8.69 x 2^30 / 1,572,864 = 5,932.4 -> 5,932 blocks = 94,912 tokens against the logged 81,536
  // (5,096 blocks = 7.46 GiB): V0 takes the smallest worker's block count and the quoted
  // 8.69 GiB is not that worker's (docs/fidelity.md: a missing input).
  EXPECT_EQ(r.kv.bytes_per_token, 98304u);
  EXPECT_EQ(r.capacity->kv_tokens, 94912u);
  EXPECT_GT(relative_error(static_cast<double>(r.capacity->kv_tokens), 81536.0), 0.15);
}

// GPU and flags only. max_model_len 131,072 > 32,768 on a CUDA device and no sliding window,
// so V0 turns chunked prefill on by itself and T defaults to 2048 (arg_utils.py
// create_engine_config, config.py SchedulerConfig, 0.7.2); the logged activation peak of
// 0.19 GiB is that small T (forward at T = 131,072 would be 10 GiB). By hand, per rank:
//   requested  = ceil(25,383,927,808 x 0.98) = 24,876,249,252 B = 23.1679 GiB
//   weights    = 14,769,689,600 B = 13.7553 GiB (bf16 shapes / 2)
//   activation = max(forward 2048 x (3 x 13,824 / 2 + 4 x 5,120) x 2 B = 0.1572 GiB,
//                    sampler 256 x 152,064 x 38 B = 1.3777 GiB) + 0.15 = 1.5277 GiB
//   non-torch  = 0.25 GiB (TP > 1 over PCIe)
//   available  = 23.1679 - 13.7553 - 1.5277 - 0.25 = 7.6349 GiB -> 5,212 blocks of 1,572,864 B.
// The pool is the smallest rank's: 81,536 tokens = 5,096 blocks = 7.4648 GiB, which is rank 0
// (the driver, the only V0 rank that runs the sampler); +2.3 %, within max(3 %, 0.25 GiB).
// The quoted 8.69 GiB is the reporter's worker rank, which runs no sampler.
TEST(FidelityVllm13061, GpuAndFlagsOnlyWithinBoundOfTheSmallestRank) {
  EngineOptions o;
  o.engine_version = "0.7.2";
  o.tp = 2;
  o.vllm.gpu_memory_utilization = 0.98;
  const GpuSpec& gpu = find_gpu("rtx4090");
  const auto r = make_engine("vllm")->plan(fixture_model("deepseek-r1-distill-qwen-14b"), &gpu, o);
  const auto t = std::find_if(r.assumptions.begin(), r.assumptions.end(),
                              [](const Assumption& a) { return a.name.find("max_num_batched_tokens") == 0; });
  ASSERT_NE(t, r.assumptions.end());
  EXPECT_EQ(t->value.rfind("2048 /", 0), 0u) << t->value;
  const double available = static_cast<double>(r.capacity->available_kv_bytes) / kGiBd;
  EXPECT_NEAR(available, 7.6349, 0.005);
  EXPECT_EQ(r.capacity->num_blocks, 5212u);
  const double smallest_rank = 81536.0 * 98304.0 / kGiBd;  // 7.4648 GiB
  EXPECT_TRUE(within_budget_tolerance(available, smallest_rank)) << available << " vs " << smallest_rank;
}

// ---------------------------------------------------------------- vLLM recipes PR #12
// Qwen3-Coder-480B-A35B-FP8, DP 8 (one rank holds every layer), v0.10.1: "62.00 GiB KV cache
// is needed" at 262,144; available 48.66 GiB -> "estimated maximum model length is 205728";
// with util 0.95, 55.65 GiB -> 235296.
TEST(FidelityVllmRecipes12, LargestLengthFromTheLoggedMemory) {
  const ModelSpec m = fixture_model("qwen3-coder-480b-a35b");
  EngineOptions o;
  o.engine_version = "0.10.1";
  o.vllm.kv_cache_memory_bytes = gib(48.66);
  const auto r = make_engine("vllm")->plan(m, nullptr, o);
  // 62 x 2 x 8 x 128 x 2 B = 253,952 B per token; x 262,144 = 66,571,993,088 B = 62.00 GiB.
  EXPECT_EQ(r.kv.bytes_per_token * 262144, 66571993088u);
  // 48.66 x 2^30 / (16 x 253,952) = 12,858.6 -> 12,858 blocks x 16 = 205,728: exact.
  EXPECT_EQ(r.capacity->largest_max_model_len, 205728u);
  o.vllm.kv_cache_memory_bytes = gib(55.65);
  const auto r2 = make_engine("vllm")->plan(m, nullptr, o);
  // 55.65 x 2^30 / 4,063,232 = 14,705.97 -> 14,705 x 16 = 235,280 against 235,296: one block
  // (-0.007 %), the log's rounding of the GiB to two decimals.
  EXPECT_EQ(r2.capacity->largest_max_model_len, 235280u);
  EXPECT_LE(std::fabs(relative_error(235280.0, 235296.0)), 0.003);
}

// ---------------------------------------------------------------- vLLM issue #34076
// Qwen3-Coder-30B-A3B-FP8, PP 2 over an RTX 5070 Ti + 5090 D (layers 16 / 32), 0.15.2rc1:
// "(24.0 GiB KV cache is needed ... available KV cache memory (3.18 GiB) ... estimated
// maximum model length is 34736". The message counts all 48 layers (the issue reports that
// as vLLM's bug); replayed as logged, with every layer on one worker.
TEST(FidelityVllm34076, LargestLengthFromTheLoggedMemory) {
  EngineOptions o;
  o.engine_version = "0.15.2";
  o.vllm.kv_cache_memory_bytes = gib(3.18);
  const auto r = make_engine("vllm")->plan(fixture_model("qwen3-coder-30b-a3b"), nullptr, o);
  // 48 x 2 x 4 x 128 x 2 B = 98,304 B per token; x 262,144 = 24.0 GiB as logged.
  EXPECT_EQ(r.kv.bytes_per_token * 262144, 24ull << 30);
  // 3.18 x 2^30 / (16 x 98,304) = 2,170.9 -> 2,170 blocks = 34,720 against 34,736 (-0.05 %).
  EXPECT_EQ(r.capacity->largest_max_model_len, 34720u);
  EXPECT_LE(std::fabs(relative_error(34720.0, 34736.0)), 0.003);
}

// ---------------------------------------------------------------- SGLang, vLLM issue #21348
// Qwen3-235B-A22B-FP8 on SGLang, --tp 4: "KV Cache is allocated. #tokens: 367404, K size:
// 8.23 GB, V size: 8.23 GB". SGLang's "GB" is 2^30 B (mem_cache/memory_pool.py, 0.5.2:
// GB = 1024 * 1024 * 1024). Per rank 1 of 4 KV heads: K (or V) is 94 x 128 x 2 B = 24,064 B
// per token.
TEST(FidelitySglang21348, TokensFromTheLoggedKAndVSize) {
  ModelSpec m = llama31_8b();
  m.num_attention_heads = 64;
  m.num_kv_heads = 4;
  m.layers.assign(94, attn(LayerKind::full_attention, 4, 128));
  EngineOptions o;
  o.engine = "sglang";
  o.tp = 4;
  const auto r = make_engine("sglang")->plan(m, nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_token, 2u * 24064u);
  // The K and V buffers hold #tokens + page_size (1) rows (MHATokenToKVPool._create_buffers,
  // 0.5.2): 16.46 x 2^30 = 17,673,790,423 B / 48,128 = 367,224.7 -> 367,224 rows - 1 = 367,223
  // tokens against the logged 367,404 (-0.05 %; the two printed sizes carry +-0.005 GiB each,
  // +-0.06 %).
  const double tokens = std::floor(16.46 * kGiBd / static_cast<double>(r.kv.bytes_per_token)) - 1.0;
  EXPECT_EQ(tokens, 367223.0);
  EXPECT_LE(std::fabs(relative_error(tokens, 367404.0)), 0.003);
}

// ---------------------------------------------------------------- TensorRT-LLM issue #1400
// TensorRT-LLM 0.8 on an A100, a 7B SmoothQuant engine: "Allocate 69524783104 bytes for k/v
// cache", "Using 132608 tokens in paged KV cache". The model is not named; the byte count
// is 132,608 x 524,288 B, the per-token size of the Llama-2-7B shape (32 x 2 x 32 x 128 x 2 B).
TEST(FidelityTrtllm1400, TokensFromTheLoggedBytes) {
  EngineOptions o;
  o.engine = "trtllm";
  const auto r = make_engine("trtllm")->plan(fixture_model("llama-2-7b"), nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_token, 524288u);
  EXPECT_EQ(69524783104ull / r.kv.bytes_per_token, 132608u);
  EXPECT_EQ(69524783104ull % r.kv.bytes_per_token, 0u);
}

// ---------------------------------------------------------------- TensorRT-LLM issue #224
// llama-2-7b fp16 engine built for max_batch_size 25 x max_output_len 4096, A10 (24 GB),
// kv_cache_free_gpu_mem_fraction 0.95, tokens_per_block 16: "Using 10718 tokens in paged KV
// cache" = 10,718 x 524,288 B = 5.23 GiB. GPU and flags only (A10G, the same 24 GB board in
// the catalog): kvsight gives 7.88 GiB, +51 %: the prebuilt engine's buffers for its
// max_batch_size are not modelled (docs/fidelity.md: a documented miss).
TEST(FidelityTrtllm224, DocumentedMissFromEngineBuffers) {
  const GpuSpec& gpu = find_gpu("a10g");
  EngineOptions o;
  o.engine = "trtllm";
  o.trtllm.free_gpu_memory_fraction = 0.95;
  o.block_size = 16;
  const auto r = make_engine("trtllm")->plan(fixture_model("llama-2-7b"), &gpu, o);
  const double logged_gib = 10718.0 * 524288.0 / kGiBd;  // 5.233 GiB
  const double predicted_gib = static_cast<double>(r.capacity->available_kv_bytes) / kGiBd;
  EXPECT_FALSE(within_budget_tolerance(predicted_gib, logged_gib)) << predicted_gib;
  EXPECT_GT(relative_error(predicted_gib, logged_gib), 0.3);
}

}  // namespace
}  // namespace kvsight
