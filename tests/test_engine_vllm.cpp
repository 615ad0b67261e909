// vLLM budget: block size (incl. the hybrid raise), grouping, blocks, concurrency,
// log lines. Every expected number is derived in the test from the shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "config_fixtures.hpp"
#include "../planner/src/engines/vllm_stages.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kMiB = 1024ull * 1024ull;
constexpr double kGiBd = 1024.0 * 1024.0 * 1024.0;

bool has_line(const PlanResult& r, const std::string& line) {
  return std::find(r.engine_log.begin(), r.engine_log.end(), line) != r.engine_log.end();
}

EngineOptions base_options(const std::string& version) {
  EngineOptions o;
  o.engine_version = version;
  o.gpu_memory_bytes = static_cast<std::uint64_t>(23.58 * kGiBd);  // RTX 3090 as torch reports it
  o.overheads.weights_gib = 14.99;
  return o;
}

// ---------------------------------------------------------------- vllm_block_size

TEST(VllmBlockSize, DenseDefaultsTo16AndKeepsUserValue) {
  ModelSpec m = llama31_8b();
  EngineOptions o;
  EXPECT_EQ(vllm_block_size(m, o), 16u);
  o.block_size = 32;
  EXPECT_EQ(vllm_block_size(m, o), 32u);
  o.block_size = 0;
  EXPECT_THROW(vllm_block_size(m, o), InputError);
}

TEST(VllmBlockSize, MlaForcedTo64UnlessAMultiple) {
  ModelSpec m = deepseek_v3_shape();
  EngineOptions o;
  o.engine_version = "0.27.1";            // FlashMLA era; 0.33 below
  EXPECT_EQ(vllm_block_size(m, o), 64u);  // FlashMLA: block % 64 != 0 -> 64
  o.block_size = 16;
  EXPECT_EQ(vllm_block_size(m, o), 64u);
  o.block_size = 128;
  EXPECT_EQ(vllm_block_size(m, o), 128u);  // already a multiple of 64
}


TEST(VllmBlockSize, HybridRaiseGivesBlock784ForQwen36AtTp2) {
  // conv_dim = dk nk 2 + dv nv = 128*16*2 + 128*48 = 4096 + 6144 = 10240
  // conv  = (conv_dim / tp) x (k - 1) x 2 B = 5120 x 3 x 2      = 30,720 B
  // ssm   = (nv / tp) x dv x dk x 4 B (fp32) = 24 x 128 x 128 x 4 = 1,572,864 B
  // state page = 1,603,584 B
  // attention per token per layer = 2 heads/rank x (256 + 256) x 2 B = 2,048 B
  // block = 16 x ceil(1,603,584 / (16 x 2,048)) = 16 x ceil(48.94) = 16 x 49 = 784
  const std::uint64_t state = 30720 + 1572864;
  const std::uint64_t per_token = 2 * (256 + 256) * 2;
  const std::uint64_t expected = 16 * ((state + 16 * per_token - 1) / (16 * per_token));
  ASSERT_EQ(expected, 784u);
  ModelSpec m = qwen36_27b_shape();
  EngineOptions o;
  o.tp = 2;
  EXPECT_EQ(vllm_block_size(m, o), expected);
  // A user block below the need is raised; one above it is kept (and the state page padded).
  o.block_size = 16;
  EXPECT_EQ(vllm_block_size(m, o), 784u);
  o.block_size = 1024;
  EXPECT_EQ(vllm_block_size(m, o), 1024u);
}

TEST(VllmBlockSize, HybridWithBf16SsmStateGives400) {
  // ssm in bf16: 24 x 128 x 128 x 2 = 786,432; + conv 30,720 = 817,152 B
  // 16 x ceil(817,152 / 32,768) = 16 x ceil(24.94) = 16 x 25 = 400: the fp32 state is what gives 784.
  ModelSpec m = qwen36_27b_shape("bf16");
  EngineOptions o;
  o.tp = 2;
  EXPECT_EQ(vllm_block_size(m, o), 400u);
}

TEST(VllmBlockSize, HybridPrefixCachingRoundsToTheChunk) {
  // Prefix caching: chunk = lcm(2048 (no chunk_size in the config), 16) = 2048;
  // ceil(1,603,584 / 2,048) = 783 tokens -> 2048 x ceil(783 / 2048) = 2048.
  ModelSpec m = qwen36_27b_shape();
  EngineOptions o;
  o.tp = 2;
  o.engine_version = "0.27.1";  // the "all" mode formula (before 0.28)
  o.vllm.enable_prefix_caching = true;
  EXPECT_EQ(vllm_block_size(m, o), 2048u);
}

// ---------------------------------------------------------------- issue #10517

// RTX 3090, Llama-3.1-8B bf16, block 16: 131,072 B per token (32 x 2 x 8 x 128 x 2), so one
// block across all 32 layers is 16 x 131,072 = 2,097,152 B = 2 MiB.
// max_model_len 20,000: 1952 blocks (31,232 tokens), 1.56x. 1952 x 2 MiB = 3.8125 GiB,
// logged as 3.81. max_model_len 29,000: 1478 blocks (23,648 tokens), 0.82x.
TEST(VllmIssue10517, V0LinesAt20000) {
  const std::uint64_t per_token = 32ull * 2 * 8 * 128 * 2;
  ASSERT_EQ(per_token, 131072u);
  const std::uint64_t block_bytes = 16 * per_token;
  ASSERT_EQ(block_bytes, 2 * kMiB);
  EngineOptions o = base_options("0.6.4");
  o.max_model_len = 20000;
  o.vllm.kv_cache_memory_bytes = 1952 * block_bytes;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.kv.bytes_per_token, per_token);
  EXPECT_EQ(r.kv.block_size, 16u);
  EXPECT_EQ(r.capacity->page_bytes, block_bytes);
  EXPECT_EQ(r.capacity->num_blocks, 1952u);
  EXPECT_EQ(r.capacity->kv_tokens, 1952u * 16u);  // 31,232
  // V0: 1952 x 16 / 20000 = 1.5616
  EXPECT_NEAR(r.capacity->max_concurrency, 1952.0 * 16 / 20000, 1e-12);
  EXPECT_TRUE(r.capacity->fits);
  // CPU blocks: swap space 4 GiB / 2 MiB = 2048 (the log in the issue).
  EXPECT_TRUE(has_line(r, "# GPU blocks: 1952, # CPU blocks: 2048")) << joined(r.engine_log);
  EXPECT_TRUE(has_line(r, "Maximum concurrency for 20000 tokens per request: 1.56x")) << joined(r.engine_log);
  EXPECT_NE(joined(r.engine_log).find("kv_cache_size=3.81GiB"), std::string::npos) << joined(r.engine_log);
}

TEST(VllmIssue10517, V0At29000DoesNotFit) {
  EngineOptions o = base_options("0.6.4");
  o.max_model_len = 29000;
  o.vllm.kv_cache_memory_bytes = 1478 * 2 * kMiB;  // 2.88671875 GiB, logged as 2.89
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->num_blocks, 1478u);
  EXPECT_EQ(r.capacity->kv_tokens, 1478u * 16u);                         // 23,648
  EXPECT_NEAR(r.capacity->max_concurrency, 1478.0 * 16 / 29000, 1e-12);  // 0.8154 -> 0.82x
  EXPECT_FALSE(r.capacity->fits);
  // ceil(L / 16) <= 1478  <=>  L <= 1478 x 16 = 23,648
  EXPECT_EQ(r.capacity->largest_max_model_len, 23648u);
  EXPECT_TRUE(has_line(r, "Maximum concurrency for 29000 tokens per request: 0.82x")) << joined(r.engine_log);
  EXPECT_NE(joined(r.engine_log).find("stored in KV cache (23648)"), std::string::npos)
      << joined(r.engine_log);
  EXPECT_NE(joined(r.engine_log).find("kv_cache_size=2.89GiB"), std::string::npos);
  EXPECT_NE(joined(r.warnings).find("largest that fits is 23648"), std::string::npos);
}

TEST(VllmIssue10517, TheRoundedGiBFigureGivesFewerBlocks) {
  // 3.81 GiB exactly = 3.81 x 512 = 1950.72 blocks of 2 MiB -> 1950: the log rounds to
  // 2 decimals, and 1952 blocks need >= 3.8125 GiB, so the published 3.81 hides the last 2.
  EngineOptions o = base_options("0.6.4");
  o.max_model_len = 20000;
  o.vllm.kv_cache_memory_bytes = static_cast<std::uint64_t>(std::llround(3.81 * kGiBd));
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->num_blocks, static_cast<std::uint64_t>(std::floor(3.81 * 512)));
  EXPECT_EQ(r.capacity->num_blocks, 1950u);
  // And 2.89 GiB = 2.89 x 512 = 1479.68 -> 1479, one more than the published 1478.
  o.max_model_len = 29000;
  o.vllm.kv_cache_memory_bytes = static_cast<std::uint64_t>(std::llround(2.89 * kGiBd));
  const PlanResult r2 = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r2.capacity->num_blocks, 1479u);
}

TEST(VllmIssue10517, V1LinesUseCommasAndPagesPerRequest) {
  EngineOptions o = base_options("0.11.0");
  o.max_model_len = 20000;
  o.vllm.kv_cache_memory_bytes = 1952 * 2 * kMiB;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  // V1: concurrency = num_blocks / ceil(20000 / 16) = 1952 / 1250 = 1.5616
  EXPECT_NEAR(r.capacity->max_concurrency, 1952.0 / 1250.0, 1e-12);
  EXPECT_TRUE(has_line(r, "GPU KV cache size: 31,232 tokens")) << joined(r.engine_log);
  EXPECT_TRUE(has_line(r, "Maximum concurrency for 20,000 tokens per request: 1.56x"))
      << joined(r.engine_log);
  // 29,000: 1478 / ceil(29000 / 16) = 1478 / 1813 = 0.815 and the start-up error.
  o.max_model_len = 29000;
  o.vllm.kv_cache_memory_bytes = 1478 * 2 * kMiB;
  const PlanResult r2 = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_NEAR(r2.capacity->max_concurrency, 1478.0 / 1813.0, 1e-12);
  EXPECT_FALSE(r2.capacity->fits);
  // needed = 1813 x 2 MiB = 3.5410 GiB
  EXPECT_NE(joined(r2.engine_log).find("(3.54 GiB KV cache is needed"), std::string::npos)
      << joined(r2.engine_log);
  EXPECT_NE(joined(r2.engine_log).find("estimated maximum model length is 23648"), std::string::npos);
}

TEST(VllmAutoFit, MinusOneSearchesTheLargestLength) {
  EngineOptions o = base_options("0.27.1");
  o.max_model_len = -1;
  o.vllm.kv_cache_memory_bytes = 1478 * 2 * kMiB;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  // ceil(L / 16) <= 1478 -> L = 23,648; derived 131,072 does not fit.
  EXPECT_EQ(r.capacity->max_model_len, 23648u);
  EXPECT_TRUE(r.capacity->fits);
  EXPECT_NEAR(r.capacity->max_concurrency, 1.0, 1e-12);  // 1478 / 1478
  EXPECT_NE(joined(r.engine_log).find("reduced from 131072 to 23648"), std::string::npos)
      << joined(r.engine_log);
}

TEST(VllmAutoFit, NewestVersionsHoldBackTheNullBlock) {
  // From PR #47272 the checks use (num_blocks - 1) blocks: 1477 x 16 = 23,632 tokens
  // (first released in 0.29, issue #13).
  EngineOptions o = base_options("0.29.0");
  o.max_model_len = -1;
  o.vllm.kv_cache_memory_bytes = 1478 * 2 * kMiB;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r.capacity->max_model_len, 1477u * 16u);
  EXPECT_EQ(r.capacity->num_blocks, 1478u);  // the pool itself still has 1478 blocks
  // An explicit 23,648 (all 1478 blocks) is refused there, accepted by 0.27.
  o.max_model_len = 23648;
  EXPECT_FALSE(make_engine("vllm")->plan(llama31_8b(), nullptr, o).capacity->fits);
  o.engine_version = "0.27.1";
  EXPECT_TRUE(make_engine("vllm")->plan(llama31_8b(), nullptr, o).capacity->fits);
}

// ---------------------------------------------------------------- sliding windows

TEST(VllmSlidingWindow, MistralAllLayersSlidingCapsPagesPerRequest) {
  // Mistral-7B-v0.1: 32 layers, all sliding W = 4096, 8 KV heads, head_dim 128, bf16.
  ModelSpec m = llama31_8b();
  m.max_position_embeddings = 32768;
  m.layers.assign(32, attn(LayerKind::sliding_window, 8, 128, 4096));
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.gpu_memory_bytes = 24ull * 1024 * kMiB;   // < 70 GiB, API server -> max_num_batched_tokens 2048
  o.vllm.kv_cache_memory_bytes = 1000 * 2 * kMiB;  // one block = 32 x 16 x 4096 B = 2 MiB
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  // pages = ceil(min(4096 - 1 + 2048, 32768) / 16) + 1 = ceil(6143 / 16) + 1 = 384 + 1 = 385
  const std::uint64_t pages = (6143 + 15) / 16 + 1;
  ASSERT_EQ(pages, 385u);
  EXPECT_EQ(r.kv.blocks_per_sequence, pages);
  EXPECT_EQ(r.kv.bytes_per_sequence, pages * 2 * kMiB);
  EXPECT_EQ(r.kv.bytes_per_token, 0u);  // nothing grows once the windows are full
  EXPECT_EQ(r.kv.bytes_per_token_all_layers, 32u * 4096u);
  EXPECT_EQ(r.capacity->num_blocks, 1000u);
  EXPECT_NEAR(r.capacity->max_concurrency, 1000.0 / 385.0, 1e-12);  // 2.60x
  EXPECT_EQ(r.capacity->kv_tokens, 1000u * 16u);                    // one group: blocks x block size
  // Newer log rule: tokens = int(max_concurrency x max_model_len) = int(1000 / 385 x 32768) = 85,111
  o.engine_version = "0.23.1";
  const PlanResult r2 = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r2.capacity->kv_tokens, static_cast<std::uint64_t>(1000.0 / 385.0 * 32768.0));
  EXPECT_EQ(r2.capacity->kv_tokens, 85111u);
  EXPECT_TRUE(has_line(r2, "GPU KV cache size: 85,111 tokens")) << joined(r2.engine_log);
}

TEST(VllmSlidingWindow, Starcoder2LogFromPr19029) {
  // PR #19029's log for bigcode/starcoder2-3b (30 layers, all sliding W = 4096, 2 KV heads x
  // 128, bf16; max_model_len 16,384; max_num_batched_tokens 8192):
  //   "GPU KV cache size: 2,198,512 tokens" = 137,407 blocks x 16
  //   "Maximum concurrency for 16,384 tokens per request: 178.68x"
  // pages per request = ceil(min(4095 + 8192, 16384) / 16) + 1 = ceil(12287 / 16) + 1 = 769;
  // 137,407 / 769 = 178.68. One block id: 30 layers x 16 x (2 x 2 x 128 x 2 B) = 491,520 B.
  ModelSpec m = llama31_8b();
  m.max_position_embeddings = 16384;
  m.layers.assign(30, attn(LayerKind::sliding_window, 2, 128, 4096));
  EngineOptions o;
  o.engine_version = "0.9.1";
  o.vllm.max_num_batched_tokens = 8192;
  o.vllm.kv_cache_memory_bytes = 137407ull * 491520;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->page_bytes, 491520u);
  EXPECT_EQ(r.kv.blocks_per_sequence, 769u);
  EXPECT_TRUE(has_line(r, "GPU KV cache size: 2,198,512 tokens")) << joined(r.engine_log);
  EXPECT_TRUE(has_line(r, "Maximum concurrency for 16,384 tokens per request: 178.68x"))
      << joined(r.engine_log);
}

TEST(VllmSlidingWindow, Gemma2AlternatingMakesTwoGroups) {
  // Gemma-2-9B shape: 42 layers alternating sliding (W 4096) / full, 8 KV heads, head_dim 256.
  // Per token per layer 2 x 8 x 256 x 2 = 8,192 B; page 16 x 8,192 = 131,072 B.
  // 21 + 21 layers: group size 21 (21 < 1.5 x 21), 2 groups, one block id costs 21 pages.
  ModelSpec m = llama31_8b();
  m.max_position_embeddings = 8192;
  m.layers.clear();
  for (int i = 0; i < 42; ++i)
    m.layers.push_back(i % 2 == 0 ? attn(LayerKind::sliding_window, 8, 256, 4096)
                                  : attn(LayerKind::full_attention, 8, 256));
  const std::uint64_t block_bytes = 21ull * 16 * 8192;
  // pages per request at 8192: full ceil(8192/16) = 512; sliding ceil(min(4095+2048, 8192)/16)+1 = 385
  const std::uint64_t pages = 512 + 385;
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.gpu_memory_bytes = 24ull * 1024 * kMiB;
  o.vllm.kv_cache_memory_bytes = 3 * pages * block_bytes;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->page_bytes, block_bytes);
  EXPECT_EQ(r.capacity->num_blocks, 3 * pages);
  EXPECT_NEAR(r.capacity->max_concurrency, 3.0, 1e-12);
  EXPECT_EQ(r.kv.blocks_per_sequence, pages);
  // 0.11 log: num_blocks // 2 groups x 16 = 2691 // 2 x 16 = 1345 x 16 = 21,520
  EXPECT_EQ(r.capacity->kv_tokens, (3 * pages) / 2 * 16);
  EXPECT_EQ(r.kv.bytes_per_token, 21u * 8192u);  // the full layers only
}

TEST(VllmSlidingWindow, GptOss120bLogFromHfMemIssue60) {
  // alvarobartt/hf-mem issue #60 quotes vLLM on openai/gpt-oss-120b: "Available KV cache
  // memory: 5.38 GiB", "GPU KV cache size: 78,384 tokens". 36 layers alternating sliding
  // (W 128) / full, 8 KV heads x 64: 2 x 8 x 64 x 2 = 2,048 B per token per layer, page
  // 16 x 2,048 = 32,768 B; 18 + 18 layers -> 2 groups of 18, one block id = 589,824 B.
  // The pre-0.20 line is num_blocks // 2 groups x 16: 78,384 = 4,899 x 16, so num_blocks is
  // 9,798 or 9,799; 9,798 x 589,824 B = 5.3823 GiB, printed 5.38.
  ModelSpec m = llama31_8b();
  m.layers.clear();
  for (int i = 0; i < 36; ++i)
    m.layers.push_back(i % 2 == 0 ? attn(LayerKind::sliding_window, 8, 64, 128)
                                  : attn(LayerKind::full_attention, 8, 64));
  EngineOptions o;
  o.engine_version = "0.19.0";
  o.vllm.kv_cache_memory_bytes = 9798ull * 589824;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->page_bytes, 589824u);
  EXPECT_EQ(r.capacity->num_blocks, 9798u);
  EXPECT_TRUE(has_line(r, "GPU KV cache size: 78,384 tokens")) << joined(r.engine_log);
  EXPECT_NE(joined(r.engine_log).find("reserved 5.38 GiB"), std::string::npos) << joined(r.engine_log);
}

TEST(VllmSlidingWindow, FiveToOnePatternAndPadding) {
  // 25 sliding + 5 full (Gemma 3 style 5:1): group size 5 -> 5 + 1 = 6 groups of 5.
  ModelSpec m = llama31_8b();
  m.max_position_embeddings = 8192;
  m.layers.clear();
  for (int i = 0; i < 30; ++i)
    m.layers.push_back(i % 6 == 5 ? attn(LayerKind::full_attention, 8, 128)
                                  : attn(LayerKind::sliding_window, 8, 128, 1024));
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.gpu_memory_bytes = 24ull * 1024 * kMiB;
  const std::uint64_t page = 16ull * 4096;
  o.vllm.kv_cache_memory_bytes = 100 * 5 * page;
  PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r.capacity->page_bytes, 5 * page);
  EXPECT_EQ(r.capacity->num_blocks, 100u);
  // pages: 1 full group ceil(8192/16) = 512, 5 sliding groups x (ceil(min(1023+2048, 8192)/16)+1 = 192+1)
  EXPECT_EQ(r.kv.blocks_per_sequence, 512u + 5u * 193u);
  EXPECT_TRUE(r.warnings.empty() || joined(r.warnings).find("padding") == std::string::npos);

  // 12 sliding + 13 full (gpt-oss + eagle): max 13 < 1.5 x 12 -> group size 13, one padding layer.
  m.layers.clear();
  for (int i = 0; i < 12; ++i) m.layers.push_back(attn(LayerKind::sliding_window, 8, 128, 128));
  for (int i = 0; i < 13; ++i) m.layers.push_back(attn(LayerKind::full_attention, 8, 128));
  o.vllm.kv_cache_memory_bytes = 10 * 13 * page;
  r = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r.capacity->page_bytes, 13 * page);
  EXPECT_EQ(r.capacity->num_blocks, 10u);
  EXPECT_NE(joined(r.warnings).find("adds 1 padding layers"), std::string::npos) << joined(r.warnings);
}

TEST(VllmChunkedLocal, Llama4ScoutShape) {
  // 48 layers: every 4th full attention (12), the others chunked local with C = 8192 (36);
  // 8 KV heads x 128 -> 4,096 B per token per layer, page 16 x 4,096 = 65,536 B.
  // Group size 12 (36 >= 1.5 x 12): 1 full + 3 chunked groups; a block id costs 12 pages.
  ModelSpec m = llama31_8b();
  m.max_position_embeddings = 131072;
  m.layers.clear();
  for (int i = 0; i < 48; ++i)
    m.layers.push_back(i % 4 == 3 ? attn(LayerKind::full_attention, 8, 128)
                                  : attn(LayerKind::chunked_local, 8, 128, 8192));
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.gpu_memory_bytes = 80ull * 1024 * kMiB;  // >= 70 GiB, not an A100, API server: T = 8192
  const std::uint64_t block_bytes = 12ull * 16 * 4096;
  // pages at 131,072: full ceil(131072 / 16) = 8192; chunked ceil(min(8192 + 8192, 131072) / 16) = 1024 x 3
  const std::uint64_t pages = 8192 + 3 * 1024;
  o.vllm.kv_cache_memory_bytes = 2 * pages * block_bytes;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->page_bytes, block_bytes);
  EXPECT_EQ(r.kv.blocks_per_sequence, pages);
  EXPECT_NEAR(r.capacity->max_concurrency, 2.0, 1e-12);
}

// ---------------------------------------------------------------- MLA

TEST(VllmMla, DeepSeekV3LatentAndBlock64) {
  // 61 layers x (512 + 64) x 2 B = 61 x 1,152 = 70,272 B per token; block 64;
  // one block across all layers = 64 x 70,272 = 4,497,408 B.
  const std::uint64_t per_token = 61ull * 576 * 2;
  ASSERT_EQ(per_token, 70272u);
  const std::uint64_t block_bytes = 64 * per_token;
  // 163,840 tokens = 2560 pages of 64.
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.vllm.kv_cache_memory_bytes = 25600 * block_bytes;
  const PlanResult r = make_engine("vllm")->plan(deepseek_v3_shape(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.kv.block_size, 64u);
  EXPECT_EQ(r.kv.bytes_per_token, per_token);
  EXPECT_EQ(r.capacity->page_bytes, block_bytes);
  EXPECT_EQ(r.capacity->num_blocks, 25600u);
  EXPECT_NEAR(r.capacity->max_concurrency, 25600.0 / 2560.0, 1e-12);
  // The latent is replicated: the same bytes per token on every rank at TP 8.
  o.tp = 8;
  const PlanResult r8 = make_engine("vllm")->plan(deepseek_v3_shape(), nullptr, o);
  EXPECT_EQ(r8.kv.bytes_per_token, per_token);
}

// ---------------------------------------------------------------- hybrid

TEST(VllmHybrid, Qwen36Tp2GroupsAndConcurrency) {
  // Block 784 (see above); attention page = 784 x 2,048 = 1,605,632 B; the state page
  // (1,603,584 B) is padded to it. 16 full + 48 recurrent layers: group size 16,
  // 1 + 3 = 4 groups; one block id costs 16 pages = 25,690,112 B.
  const std::uint64_t page = 784ull * 2048;
  const std::uint64_t block_bytes = 16 * page;
  // Per request at 32,768: ceil(32768 / 784) = 42 attention pages + 3 x 1 state page = 45.
  const std::uint64_t pages = (32768 + 783) / 784 + 3;
  ASSERT_EQ(pages, 45u);
  ModelSpec m = qwen36_27b_shape();
  EngineOptions o;
  o.tp = 2;
  o.engine_version = "0.19.0";
  o.max_model_len = 32768;
  o.vllm.kv_cache_memory_bytes = 100 * block_bytes;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.kv.block_size, 784u);
  EXPECT_EQ(r.capacity->page_bytes, block_bytes);
  EXPECT_EQ(r.capacity->num_blocks, 100u);
  EXPECT_EQ(r.kv.blocks_per_sequence, pages);
  EXPECT_NEAR(r.capacity->max_concurrency, 100.0 / 45.0, 1e-12);
  EXPECT_EQ(r.kv.state_bytes_per_sequence, 48u * (30720u + 1572864u));
  EXPECT_EQ(r.kv.bytes_per_token, 16u * 2048u);
  // 0.19 log: 100 // 4 groups x 784 = 19,600 (issue #40691's misleading figure)
  EXPECT_EQ(r.capacity->kv_tokens, 100u / 4u * 784u);
  // From 0.20: int(100 / 45 x 32768) = 72,817
  o.engine_version = "0.23.1";
  const PlanResult r2 = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r2.capacity->kv_tokens, static_cast<std::uint64_t>(100.0 / 45.0 * 32768.0));
  EXPECT_EQ(r2.capacity->kv_tokens, 72817u);
}

// Falcon-H1-0.5B (config_fixtures.hpp): 36 decoder layers, each attention (2 KV heads x 64 x 2 x
// 2 B = 512 B per token) beside a Mamba-2 mixer; one group of each (KV cache groups note). Block
// 800 (the state page padded to 800 x 512 B = 409,600 B per layer). At max_model_len 16,384 a
// request holds ceil(16384 / 800) = 21 attention pages plus the Mamba group's state pages in
// align mode (prefix caching, on by default for hybrids): 2 before 0.33, and from 0.33 a third,
// the prefill checkpoint every Mamba-2 layer's spec keeps (mamba_mixer2.py get_kv_cache_spec:
// num_prefill_checkpoint_blocks = 1; kv_cache_interface.py MambaSpec.max_memory_usage_bytes).
// Without prefix caching one page. vLLM's own planner on 0.33 gives 24 (issue #28).
TEST(VllmHybrid, Mamba2KeepsAPrefillCheckpointPageInAlignModeFrom033) {
  const ModelSpec m = parse_hf_config(test::kFalconH1Config, "falcon-h1");
  EngineOptions o;
  o.max_model_len = 16384;
  o.vllm.kv_cache_memory_bytes = 10'000'000'000ull;
  // The state pages of a request: its pages less the attention pages ceil(16,384 / block).
  const auto state_pages = [&](const std::string& version, bool prefix_off) {
    EngineOptions v = o;
    v.engine_version = version;
    v.vllm.disable_prefix_caching = prefix_off;
    const PlanResult r = make_engine("vllm")->plan(m, nullptr, v);
    return r.kv.blocks_per_sequence - (16384 + r.kv.block_size - 1) / r.kv.block_size;
  };
  EXPECT_EQ(make_engine("vllm")->plan(m, nullptr, o).kv.block_size, 800u);
  EXPECT_EQ(make_engine("vllm")->plan(m, nullptr, o).kv.blocks_per_sequence, 21u + 3u);
  EXPECT_EQ(state_pages("0.33.0", false), 3u);
  EXPECT_EQ(state_pages("0.34.0", false), 3u);  // mamba_mixer2.py unchanged in 0.34
  EXPECT_EQ(state_pages("0.32.0", false), 2u);
  EXPECT_EQ(state_pages("0.33.0", true), 1u);
}

TEST(VllmHybrid, PrefixCachingKeepsTwoStatePages) {
  // With prefix caching the block is 2048 (see the block-size test); the Mamba page is
  // padded to 2048 x 2,048 B; per request at 32,768: ceil(32768 / 2048) = 16 attention
  // pages + 3 groups x 2 state pages ("align" mode) = 22.
  ModelSpec m = qwen36_27b_shape();
  EngineOptions o;
  o.tp = 2;
  o.engine_version = "0.23.1";
  o.max_model_len = 32768;
  o.vllm.enable_prefix_caching = true;
  const std::uint64_t block_bytes = 16ull * 2048 * 2048;
  o.vllm.kv_cache_memory_bytes = 44 * block_bytes;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.kv.block_size, 2048u);
  EXPECT_EQ(r.kv.blocks_per_sequence, 16u + 3u * 2u);
  EXPECT_EQ(r.capacity->num_blocks, 44u);
  EXPECT_NEAR(r.capacity->max_concurrency, 2.0, 1e-12);
}

TEST(VllmHybrid, Qwen35LogFromIssue40691) {
  // vLLM issue #40691 (0.19.0, Qwen3.5-27B, TP 1, max_model_len 32,768):
  //   "GPU KV cache size: 290,864 tokens", "Maximum concurrency for 32,768 tokens per request: 33.04x".
  // TP 1: state = 10240 x 3 x 2 + 48 x 128 x 128 x 4 = 61,440 + 3,145,728 = 3,207,168 B;
  // attention 4 heads x 512 x 2 B = 4,096 B per token -> block 16 x ceil(3,207,168 / 65,536) = 784;
  // 4 groups of 16 layers; per request ceil(32768 / 784) + 3 = 45 pages.
  // 33.04 x 45 = 1486.8 -> num_blocks = 1487 (1487 / 45 = 33.04); 1487 // 4 x 784 = 290,864.
  ModelSpec m = qwen36_27b_shape();  // Qwen3.5-27B has the same attention and state shapes
  EngineOptions o;
  o.engine_version = "0.19.0";
  o.max_model_len = 32768;
  o.vllm.kv_cache_memory_bytes = 1487ull * 16 * 784 * 4096;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.kv.block_size, 784u);
  EXPECT_EQ(r.capacity->num_blocks, 1487u);
  EXPECT_TRUE(has_line(r, "GPU KV cache size: 290,864 tokens")) << joined(r.engine_log);
  EXPECT_TRUE(has_line(r, "Maximum concurrency for 32,768 tokens per request: 33.04x"))
      << joined(r.engine_log);
  // After PR #40694 the same pool logs int(1487 / 45 x 32768) tokens.
  o.engine_version = "0.20.0";
  const PlanResult r2 = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r2.capacity->kv_tokens, static_cast<std::uint64_t>(1487.0 / 45.0 * 32768.0));
}

TEST(VllmHybrid, PureMambaHasOneStatePagePerRequest) {
  // Mamba2-style model, 4 recurrent layers only: the page is the state itself and a request
  // needs one page per layer group, whatever its length.
  ModelSpec m = qwen36_27b_shape();
  m.layers.resize(4);
  for (auto& l : m.layers) l.kind = LayerKind::recurrent;
  // state at TP 1: 10240 x 3 x 2 + 48 x 128 x 128 x 4 = 3,207,168 B; one block id = 4 layers.
  const std::uint64_t block_bytes = 4ull * 3207168;
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.max_model_len = 4096;
  o.vllm.kv_cache_memory_bytes = 10 * block_bytes;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->page_bytes, block_bytes);
  EXPECT_EQ(r.kv.blocks_per_sequence, 1u);
  EXPECT_NEAR(r.capacity->max_concurrency, 10.0, 1e-12);
  EXPECT_EQ(r.capacity->kv_tokens, 10u * 4096u);  // MambaSpec.block_size = max_model_len
}

// ---------------------------------------------------------------- TP / PP

TEST(VllmParallel, KvHeadsReplicatedBeyondTheirCount) {
  // 8 KV heads at TP 16: max(1, 8 / 16) = 1 head per rank: 32 x 1 x (128 + 128) x 2 = 16,384 B.
  EngineOptions o;
  o.tp = 16;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_token, 32u * 1u * 256u * 2u);
  EXPECT_NE(joined(r.notes).find("replicated"), std::string::npos) << joined(r.notes);
  // TP 2: 4 heads per rank -> 32 x 4 x 256 x 2 = 65,536 B
  o.tp = 2;
  EXPECT_EQ(make_engine("vllm")->plan(llama31_8b(), nullptr, o).kv.bytes_per_token, 65536u);
}

TEST(VllmParallel, PipelineStagesTakeTheMinimumBlocks) {
  // PP 3 over 32 layers: get_pp_indices gives 11, 11, 10 layers. One layer's page is
  // 16 x 4,096 B = 65,536 B, so a block id costs 11 pages on the 11-layer stages.
  EngineOptions o;
  o.pp = 3;
  o.engine_version = "0.11.0";
  const std::uint64_t page = 16ull * 4096;
  o.vllm.kv_cache_memory_bytes = 1000 * 11 * page + 5;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->page_bytes, 11 * page);
  EXPECT_EQ(r.capacity->num_blocks, 1000u);  // the 10-layer stage could hold 1100
  EXPECT_EQ(r.kv.bytes_per_token, 11u * 4096u);
}

// ---------------------------------------------------------------- budget arithmetic

TEST(VllmBudget, ProfiledBudgetOnAnH100) {
  // Llama-3.1-8B on an 80 GB H100 (79.19 GiB as torch sees it), vLLM 0.11 (util 0.90),
  // API server on a >= 70 GiB non-A100 device: T = 8192, S = 1024.
  GpuSpec gpu;
  gpu.id = "h100-test";
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.memory_bytes = static_cast<std::uint64_t>(79.19 * kGiBd);
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.overheads.weights_gib = 14.99;
  o.max_model_len = 32768;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), &gpu, o);
  ASSERT_TRUE(r.capacity);
  const double requested = std::ceil(static_cast<double>(gpu.memory_bytes) * 0.90);
  // forward: 8192 x (3 x 14336 + 4 x 4096) x 2 = 973,078,528 B
  // sampler: min(1024, 8192) x 128,256 x 38 = 4,990,697,472 B (the larger)
  const double sampler = 1024.0 * 128256 * 38;
  const auto act = static_cast<std::uint64_t>(sampler + 0.15 * kGiBd);
  const auto nt = static_cast<std::uint64_t>(0.1 * kGiBd);
  const auto weights = static_cast<std::uint64_t>(std::llround(14.99 * kGiBd));
  EXPECT_EQ(r.capacity->requested_bytes, static_cast<std::uint64_t>(requested));
  EXPECT_EQ(r.capacity->overhead_bytes, act + nt);  // 0.11: no CUDA-graph term
  const std::uint64_t available = static_cast<std::uint64_t>(requested) - weights - act - nt;
  EXPECT_EQ(r.capacity->available_kv_bytes, available);
  EXPECT_EQ(r.capacity->num_blocks, available / (2 * kMiB));
  EXPECT_NE(joined(r.engine_log).find("Available KV cache memory: "), std::string::npos);

  // 0.23: util 0.92; Llama-3.1 runs on the V2 model runner (config/vllm.py 0.23), whose dummy
  // sampler holds 6 B per logit (1024 x 128,256 x 6 = 787,980,288 B, below the forward's
  // 973,078,528 B) and which subtracts no CUDA-graph estimate before 0.29.
  o.engine_version = "0.23.1";
  const PlanResult r2 = make_engine("vllm")->plan(llama31_8b(), &gpu, o);
  const double requested2 = std::ceil(static_cast<double>(gpu.memory_bytes) * 0.92);
  EXPECT_EQ(r2.capacity->requested_bytes, static_cast<std::uint64_t>(requested2));
  const double forward = 8192.0 * (3 * 14336 + 4 * 4096) * 2;
  const auto act2 = static_cast<std::uint64_t>(forward + 0.15 * kGiBd);
  EXPECT_EQ(r2.capacity->overhead_bytes, act2 + nt);
  // 0.21 runs V1: the Triton sampler's 14 B per logit (1,838,678,016 B, above the forward; the
  // test GPU has no SM count, so no per-program buffer) and the graph estimate's floor:
  // 512 tokens of forward activations (973,078,528 / 8192 x 512) + (51 - 1 + 51 - 1) x 1 MiB.
  o.engine_version = "0.21.0";
  const auto act3 = static_cast<std::uint64_t>(1024.0 * 128256 * 14 + 0.15 * kGiBd);
  const auto graphs3 = static_cast<std::uint64_t>(forward / 8192 * 512 + 100.0 * kMiB);
  EXPECT_EQ(make_engine("vllm")->plan(llama31_8b(), &gpu, o).capacity->overhead_bytes, act3 + nt + graphs3);
  // --enforce-eager drops the graph term.
  o.vllm.enforce_eager = true;
  EXPECT_EQ(make_engine("vllm")->plan(llama31_8b(), &gpu, o).capacity->overhead_bytes, act3 + nt);
  o.engine_version = "0.23.1";
  // Each term can be overridden.
  o.overheads.activation_gib = 1.0;
  o.overheads.non_torch_gib = 0.5;
  o.vllm.enforce_eager = false;
  o.overheads.cuda_graph_gib = 0.25;
  EXPECT_EQ(make_engine("vllm")->plan(llama31_8b(), &gpu, o).capacity->overhead_bytes,
            static_cast<std::uint64_t>(1.75 * kGiBd));
}

TEST(VllmBudget, WeightsOverrideIsTheWholeModelSplitOverRanks) {
  // --weights-gib 16 at TP 2: 8 GiB per rank. 24 GiB x 0.90 = 21.6 GiB requested (ceil of an
  // exact product); overheads fixed at 1 + 0.5 GiB -> 21.6 - 8 - 1.5 = 12.1 GiB for KV.
  EngineOptions o;
  o.engine_version = "0.11.0";
  o.tp = 2;
  o.gpu_memory_bytes = 24ull * 1024 * kMiB;
  o.overheads.weights_gib = 16.0;
  o.overheads.activation_gib = 1.0;
  o.overheads.non_torch_gib = 0.5;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r.weights.bytes_per_rank, 8ull * 1024 * kMiB);
  const auto requested = static_cast<std::uint64_t>(std::ceil(24.0 * kGiBd * 0.90));
  EXPECT_EQ(r.capacity->available_kv_bytes,
            requested - 8ull * 1024 * kMiB - static_cast<std::uint64_t>(1.5 * kGiBd));
  // TP 2: 4 KV heads per rank, one block across 32 layers = 16 x 32 x 4 x 256 x 2 B = 1 MiB.
  EXPECT_EQ(r.capacity->num_blocks, r.capacity->available_kv_bytes / kMiB);
}

TEST(VllmBudget, NoGpuMeansNoCapacity) {
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, EngineOptions{});
  EXPECT_FALSE(r.capacity);
  // context 0 = max_model_len = 131,072: ceil(131072 / 16) = 8192 pages of 2 MiB
  EXPECT_EQ(r.kv.blocks_per_sequence, 8192u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 8192u * 2 * kMiB);
  EXPECT_EQ(r.kv.context, 131072u);
}

TEST(VllmBudget, BatchMultipliesTheSequence) {
  EngineOptions o;
  o.context = 1000;  // ceil(1000 / 16) = 63 pages
  o.batch = 7;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_sequence, 63u * 2 * kMiB);
  EXPECT_EQ(r.kv.bytes_per_batch, 7u * 63u * 2 * kMiB);
}

TEST(VllmErrors, BadInputsNameTheFlag) {
  auto engine = make_engine("vllm");
  EngineOptions o;
  o.gpu_memory_bytes = 24ull * 1024 * kMiB;
  o.overheads.weights_gib = 1.0;
  o.vllm.gpu_memory_utilization = 0.0;
  try {
    engine->plan(llama31_8b(), nullptr, o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--gpu-memory-utilization");
  }
  o.vllm.gpu_memory_utilization = 1.5;
  EXPECT_THROW(engine->plan(llama31_8b(), nullptr, o), InputError);
  o.vllm.gpu_memory_utilization.reset();
  o.max_model_len = -2;
  EXPECT_THROW(engine->plan(llama31_8b(), nullptr, o), InputError);
  o.max_model_len.reset();
  o.engine_version = "banana";
  EXPECT_THROW(engine->plan(llama31_8b(), nullptr, o), InputError);
  EXPECT_THROW(make_engine("tgi"), InputError);
}

// ---------------------------------------------------------------- versioned rules (issue #13)

ModelSpec mistral_sliding() {
  // Mistral-7B-v0.1 shape: 32 layers, all sliding W = 4096, 8 KV heads x 128, bf16.
  ModelSpec m = llama31_8b();
  m.max_position_embeddings = 32768;
  m.layers.assign(32, attn(LayerKind::sliding_window, 8, 128, 4096));
  return m;
}

TEST(VllmVersions, SlidingWindowReservesMaxInFlightTokens) {
  // No GPU: < 70 GiB tier, API server, T = 2048.
  EngineOptions o;
  o.engine_version = "0.23.1";  // 1 x T: ceil(min(4095 + 2048, 32768) / 16) + 1 = 384 + 1 = 385
  EXPECT_EQ(make_engine("vllm")->plan(mistral_sliding(), nullptr, o).kv.blocks_per_sequence, 385u);
  // 0.26+: async scheduling, 2 batches in flight: ceil((4095 + 4096) / 16) + 1 = 512 + 1 = 513
  o.engine_version = "0.27.1";
  EXPECT_EQ(make_engine("vllm")->plan(mistral_sliding(), nullptr, o).kv.blocks_per_sequence, 513u);
  o.engine_version = "";  // the default, 0.33
  const PlanResult r = make_engine("vllm")->plan(mistral_sliding(), nullptr, o);
  EXPECT_EQ(r.engine_version, "0.33.0");
  EXPECT_EQ(r.kv.blocks_per_sequence, 513u);
  // --no-async-scheduling: one batch again.
  o.vllm.async_scheduling = false;
  EXPECT_EQ(make_engine("vllm")->plan(mistral_sliding(), nullptr, o).kv.blocks_per_sequence, 385u);
  o.vllm.async_scheduling.reset();
  // PP 2 on 0.33 (Model Runner V2): pp + 1 = 3 batches: ceil((4095 + 6144) / 16) + 1 = 640 + 1 = 641
  o.pp = 2;
  EXPECT_EQ(make_engine("vllm")->plan(mistral_sliding(), nullptr, o).kv.blocks_per_sequence, 641u);
  // PP 2 on 0.32 (V1 runner, no async with PP): pp = 2 batches -> 513
  o.engine_version = "0.32.0";
  EXPECT_EQ(make_engine("vllm")->plan(mistral_sliding(), nullptr, o).kv.blocks_per_sequence, 513u);
}

TEST(VllmVersions, LargeDevicesGet16384TokensFrom028) {
  EngineOptions o;
  GpuSpec b200;
  b200.id = "b200";
  b200.name = "NVIDIA B200";
  const std::uint64_t total = 178ull * 1024 * kMiB;  // >= 160 GiB
  auto limits = vllm::scheduler_limits(vllm::resolve_version(o), o, total, &b200, 131072);
  EXPECT_EQ(limits.max_num_batched_tokens, 16384u);
  EXPECT_EQ(limits.max_num_seqs, 1024u);
  o.engine_version = "0.27.1";  // the >= 70 GiB tier: 8192 for the API server
  limits = vllm::scheduler_limits(vllm::resolve_version(o), o, total, &b200, 131072);
  EXPECT_EQ(limits.max_num_batched_tokens, 8192u);
}

TEST(VllmVersions, HybridPrefixCachingIsOnByDefaultFrom028) {
  // Qwen3.6-27B shape at TP 2, max_model_len 32,768. Align mode keeps the 16-aligned block
  // 784 (no FlashInfer GDN checkpoint) and 2 state pages per Mamba group:
  // ceil(32768 / 784) = 42 attention pages + 3 groups x 2 = 48; without prefix caching 42 + 3 = 45.
  ModelSpec m = qwen36_27b_shape();
  EngineOptions o;
  o.tp = 2;
  o.max_model_len = 32768;
  EXPECT_EQ(vllm_block_size(m, o), 784u);
  PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r.kv.block_size, 784u);
  EXPECT_EQ(r.kv.blocks_per_sequence, 42u + 3u * 2u);
  o.vllm.disable_prefix_caching = true;
  EXPECT_EQ(make_engine("vllm")->plan(m, nullptr, o).kv.blocks_per_sequence, 45u);
  o.vllm.disable_prefix_caching = false;
  o.engine_version = "0.27.1";  // off by default before 0.28
  EXPECT_EQ(make_engine("vllm")->plan(m, nullptr, o).kv.blocks_per_sequence, 45u);
}

TEST(VllmVersions, NullBlockFrom029Not028) {
  // 1478 blocks of 2 MiB, auto-fit: 0.28 still uses all 1478 (1478 x 16 = 23,648 tokens).
  EngineOptions o = base_options("0.28.0");
  o.max_model_len = -1;
  o.vllm.kv_cache_memory_bytes = 1478 * 2 * kMiB;
  EXPECT_EQ(make_engine("vllm")->plan(llama31_8b(), nullptr, o).capacity->max_model_len, 23648u);
  o.engine_version = "0.29.0";  // 1477 x 16 = 23,632
  EXPECT_EQ(make_engine("vllm")->plan(llama31_8b(), nullptr, o).capacity->max_model_len, 23632u);
}

TEST(VllmVersions, MlaOnHopperIn033UsesFlashAttnMlaBlocks) {
  ModelSpec m = deepseek_v3_shape();
  EngineOptions o;  // 0.33: FLASH_ATTN_MLA, any multiple of 16
  EXPECT_EQ(vllm_block_size(m, o), 16u);
  o.block_size = 32;
  EXPECT_EQ(vllm_block_size(m, o), 32u);
  o.block_size = 8;  // not a multiple of 16: FlashMLA's 64
  EXPECT_EQ(vllm_block_size(m, o), 64u);
  o.block_size.reset();
  o.kv_cache_dtype = "fp8";  // FlashMLA with an fp8 cache: 64
  EXPECT_EQ(vllm_block_size(m, o), 64u);
}

TEST(VllmVersions, OverheadsOf033ReadFromTheSource) {
  // Llama-3.1-8B on an H100 (79.19 GiB), 0.33: T 8192, S 1024, the V2 model runner
  // (vllm_overheads.hpp; the test GPU has no SM count: FlashInfer assumed, no Triton buffer).
  // forward 8192 x (3 x 14336 + 4 x 4096) x 2 = 973,078,528 B; the sampler's warm-up pass
  // 1024 x 128,256 x 14 B = 1,838,678,016 B (larger); act = sampler + 0.15 GiB; non-torch 0.1 GiB
  // at TP 1; graphs = 512 tokens of forward + 100 graphs x 1 MiB; penalties state
  // 1024 x 128,256 x 4 + 1024 x 4,008 x 4 B.
  GpuSpec gpu;
  gpu.id = "h100-test";
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.memory_bytes = static_cast<std::uint64_t>(79.19 * kGiBd);
  EngineOptions o;
  o.overheads.weights_gib = 14.99;
  o.max_model_len = 32768;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), &gpu, o);
  const double forward = 8192.0 * (3 * 14336 + 4 * 4096) * 2;
  ASSERT_EQ(forward, 973078528.0);
  const double sampler = 1024.0 * 128256 * 14;
  ASSERT_EQ(sampler, 1838678016.0);
  const auto act = static_cast<std::uint64_t>(sampler + 0.15 * kGiBd);
  const auto nt = static_cast<std::uint64_t>(0.1 * kGiBd);
  const auto graphs = static_cast<std::uint64_t>(forward / 8192 * 512 + 100.0 * kMiB);
  const std::uint64_t penalties = 1024ull * 128256 * 4 + 1024ull * 4008 * 4;
  EXPECT_EQ(r.capacity->overhead_bytes, act + nt + graphs + penalties);
  // TP 2: the forward's MLP term halves (8192 x (3 x 14336 / 2 + 4 x 4096) x 2 = 620,756,992 B);
  // each rank samples the whole vocabulary, so the sampler is unchanged; non-torch 0.55 GiB.
  o.tp = 2;
  const PlanResult r2 = make_engine("vllm")->plan(llama31_8b(), &gpu, o);
  const double forward2 = 8192.0 * (3 * 14336 / 2 + 4 * 4096) * 2;
  EXPECT_EQ(r2.capacity->overhead_bytes, act + static_cast<std::uint64_t>(0.55 * kGiBd) +
                                             static_cast<std::uint64_t>(forward2 / 8192 * 512 + 100.0 * kMiB) +
                                             penalties);
}

TEST(VllmVersions, NegativeAvailableMemoryIsPrintedSigned) {
  // 24 GiB x 0.92 = 22.08 GiB requested; weights 24 + overheads 1.5 = 25.5 GiB, plus the V2
  // penalties state of 0.33 (S 256 below 70 GiB: 256 x 128,256 x 4 + 256 x 4,008 x 4 B =
  // 0.126 GiB), which no override covers -> -3.55 GiB.
  EngineOptions o;
  o.gpu_memory_bytes = 24ull * 1024 * kMiB;
  o.overheads.weights_gib = 24.0;
  o.overheads.activation_gib = 1.0;
  o.overheads.non_torch_gib = 0.5;
  o.overheads.cuda_graph_gib = 0.0;
  const PlanResult r = make_engine("vllm")->plan(llama31_8b(), nullptr, o);
  EXPECT_EQ(r.capacity->available_kv_bytes, 0u);
  EXPECT_NE(joined(r.engine_log).find("Available KV cache memory: -3.55 GiB"), std::string::npos)
      << joined(r.engine_log);
}

TEST(EngineRegistry, ListsTheEngines) {
  const auto names = engine_names();
  for (const char* n : {"vllm", "sglang", "trtllm", "llamacpp"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(make_engine("VLLM")->name(), "vllm");
}

}  // namespace
}  // namespace kvsight
