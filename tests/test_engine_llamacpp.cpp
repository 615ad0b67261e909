// llama.cpp budget: cells, ggml cache types, SWA cache sizing, MLA storage by build,
// recurrent state, and what fits. Expected numbers derived in the tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kvsight/budget.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/error.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kMiB = 1024ull * 1024ull;
constexpr std::uint64_t kGiB = 1024ull * kMiB;

PlanResult plan(const ModelSpec& m, const EngineOptions& o) {
  return make_engine("llamacpp")->plan(m, nullptr, o);
}

TEST(LlamaCpp, F16CacheAndItsLogLine) {
  // Per layer per cell: K 8 x 128 x 2 B = 2,048, V the same -> 4,096; 32 layers -> 131,072 B.
  // 8192 cells -> 1,073,741,824 B = 1024 MiB (K 512, V 512).
  EngineOptions o;
  o.llamacpp.ctx_size = 8192;
  const PlanResult r = plan(llama31_8b(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 131072u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 8192u * 131072u);
  EXPECT_NE(joined(r.engine_log)
                .find("llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), "
                      "K (f16):  512.00 MiB, V (f16):  512.00 MiB"),
            std::string::npos)
      << joined(r.engine_log);
}

TEST(LlamaCpp, DefaultContextIs4096AndZeroMeansTraining) {
  // common.h default n_ctx 4096: 4096 cells x 131,072 B; --ctx-size 0: 131,072 cells.
  EngineOptions o;
  EXPECT_EQ(plan(llama31_8b(), o).kv.bytes_per_sequence, 4096u * 131072u);
  o.llamacpp.ctx_size = 0;
  EXPECT_EQ(plan(llama31_8b(), o).kv.bytes_per_sequence, 131072ull * 131072u);
}

TEST(LlamaCpp, Q8CacheUsesGgmlBlocks) {
  // q8_0: 34 B per 32 elements. K row 8 x 128 = 1024 elements = 32 blocks = 1,088 B; V the
  // same -> 2,176 B per layer per cell, x 32 layers = 69,632 B; x 8192 cells = 544 MiB.
  EngineOptions o;
  o.llamacpp.ctx_size = 8192;
  o.llamacpp.cache_type_k = "q8_0";
  o.llamacpp.cache_type_v = "q8_0";
  const PlanResult r = plan(llama31_8b(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 32u * 2u * (1024u / 32u * 34u));
  EXPECT_EQ(r.kv.bytes_per_sequence, 8192u * 69632u);
  EXPECT_NE(joined(r.engine_log).find("size =  544.00 MiB"), std::string::npos) << joined(r.engine_log);
  EXPECT_NE(joined(r.notes).find("flash attention"), std::string::npos);
}

TEST(LlamaCpp, BadCacheTypeNamesTheFlag) {
  EngineOptions o;
  o.llamacpp.cache_type_k = "fp8";
  try {
    plan(llama31_8b(), o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--cache-type-k");
  }
  o.llamacpp.cache_type_k = "f16";
  o.llamacpp.parallel = 0;
  EXPECT_THROW(plan(llama31_8b(), o), InputError);
  o.llamacpp.parallel = 1;
  o.engine_version = "latest";
  EXPECT_THROW(plan(llama31_8b(), o), InputError);
}

TEST(LlamaCpp, OldBuildsPadTheContextTo256) {
  // Before the padding was dropped, n_ctx = GGML_PAD(1000, 256) = 1024 cells.
  EngineOptions o;
  o.llamacpp.ctx_size = 1000;
  o.engine_version = "b6000";
  EXPECT_EQ(plan(llama31_8b(), o).kv.bytes_per_sequence, 1024u * 131072u);
  o.engine_version = "b7900";  // newest: unpadded
  EXPECT_EQ(plan(llama31_8b(), o).kv.bytes_per_sequence, 1000u * 131072u);
}

// Gemma-2-9B shape: 42 layers alternating sliding (W 4096) / full, 8 KV heads x 256.
ModelSpec gemma2_like() {
  ModelSpec m = llama31_8b();
  m.max_position_embeddings = 32768;
  m.layers.clear();
  for (int i = 0; i < 42; ++i)
    m.layers.push_back(i % 2 == 0 ? attn(LayerKind::sliding_window, 8, 256, 4096)
                                  : attn(LayerKind::full_attention, 8, 256));
  return m;
}

TEST(LlamaCpp, SlidingWindowCacheIsCapped) {
  // Per layer per cell f16: 2 x 8 x 256 x 2 = 8,192 B.
  const std::uint64_t per_layer = 2 * 8 * 256 * 2;
  EngineOptions o;
  o.llamacpp.ctx_size = 32768;
  // One slot: SWA cells = pad(min(32768, 4096 x 1 + 512), 256) = 4608.
  PlanResult r = plan(gemma2_like(), o);
  EXPECT_EQ(r.kv.bytes_per_sequence, 21 * per_layer * 32768 + 21 * per_layer * 4608);
  EXPECT_EQ(r.kv.bytes_per_token, 21 * per_layer);
  EXPECT_EQ(r.kv.bytes_per_token_all_layers, 42 * per_layer);
  EXPECT_NE(joined(r.engine_log).find("(  4608 cells,  21 layers"), std::string::npos)
      << joined(r.engine_log);

  // 4 slots, separate streams: each stream 32768 / 4 = 8192 base cells and
  // pad(min(8192, 4096 + 512), 256) = 4608 SWA cells -> 4 x 4608 = 18432.
  o.llamacpp.parallel = 4;
  r = plan(gemma2_like(), o);
  EXPECT_NE(joined(r.engine_log).find("( 18432 cells,  21 layers,  4/4 seqs)"), std::string::npos)
      << joined(r.engine_log);
  EXPECT_NE(joined(r.engine_log).find("n_ctx_seq     = 8192"), std::string::npos);
  // Unified: pad(min(32768, 4096 x 4 + 512), 256) = 16896 cells in one stream.
  o.llamacpp.kv_unified = true;
  r = plan(gemma2_like(), o);
  EXPECT_NE(joined(r.engine_log).find("( 16896 cells,  21 layers,  1/4 seqs)"), std::string::npos)
      << joined(r.engine_log);
  // --swa-full: the SWA cache as large as the base cache.
  o.llamacpp.swa_full = true;
  r = plan(gemma2_like(), o);
  EXPECT_NE(joined(r.engine_log).find("( 32768 cells,  21 layers,  1/4 seqs)"), std::string::npos);
}

TEST(LlamaCpp, MlaStorageByBuildWithQ8K) {
  EngineOptions o;
  o.llamacpp.ctx_size = 4096;
  o.llamacpp.cache_type_k = "q8_0";  // V stays f16
  // Newest (V-less, PR #19067): K = 576 elements q8_0 = 18 blocks x 34 = 612 B per layer.
  PlanResult r = plan(deepseek_v3_shape(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 61u * 612u);
  // b6000 (PR #12801 latent): K 612 B + V 512 x 2 B = 1,636 B per layer.
  o.engine_version = "b6000";
  r = plan(deepseek_v3_shape(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 61u * (612u + 1024u));
  // b5000 (decompressed): K 128 x (128 + 64) = 24,576 elements q8_0 = 768 x 34 = 26,112 B;
  // V 128 x 128 x 2 B = 32,768 B.
  o.engine_version = "b5000";
  r = plan(deepseek_v3_shape(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 61u * (24576u / 32u * 34u + 128u * 128u * 2u));
  EXPECT_NE(joined(r.notes).find("decompressed"), std::string::npos);
}

TEST(LlamaCpp, RecurrentStateInF32PerSlot) {
  // Gated delta-net (Qwen3.6 shape) in f32: conv (10240, 3) x 4 = 122,880 B;
  // ssm 48 x 128 x 128 x 4 = 3,145,728 B; 3,268,608 B per layer per slot.
  ModelSpec m = llama31_8b();
  RecurrentSpec rs;
  rs.kind = RecurrentKind::gated_delta_net;
  rs.d_conv = 4;
  rs.key_head_dim = 128;
  rs.num_key_heads = 16;
  rs.value_head_dim = 128;
  rs.num_value_heads = 48;
  m.recurrent = rs;
  m.layers.clear();
  for (int i = 0; i < 8; ++i) {
    if (i % 4 == 3)
      m.layers.push_back(attn(LayerKind::full_attention, 4, 256));
    else {
      LayerSpec l;
      l.kind = LayerKind::recurrent;
      m.layers.push_back(l);
    }
  }
  const std::uint64_t state = 10240ull * 3 * 4 + 48ull * 128 * 128 * 4;
  EngineOptions o;
  o.llamacpp.ctx_size = 4096;
  o.llamacpp.parallel = 2;
  const PlanResult r = plan(m, o);
  EXPECT_EQ(r.kv.state_bytes_per_sequence, 6 * state);
  // One sequence = one slot of n_ctx / parallel = 2048 cells: 2 attention layers x 2048 cells
  // x (2 x 4 x 256 x 2 B) + 6 states.
  EXPECT_EQ(r.kv.bytes_per_sequence, 2ull * 2048 * 4096 + 6 * state);
  // The pool keeps max(1, n_seq_max) = 2 state cells per recurrent layer:
  // 6 x 2 x 3,268,608 B = 39,223,296 B = 37.41 MiB.
  EXPECT_NE(
      joined(r.engine_log).find("llama_memory_recurrent: size =   37.41 MiB (     2 cells,   6 layers)"),
      std::string::npos)
      << joined(r.engine_log);
}

TEST(LlamaCpp, CapacityAndTheLargestContext) {
  // 24 GiB device, weights 15 GiB, compute 0.5 + runtime 0.5 -> 8 GiB for KV.
  // ctx 131072 needs 131072 x 131,072 B = 16 GiB: no fit; the largest is 8 GiB / 131,072 B = 65,536.
  EngineOptions o;
  o.llamacpp.ctx_size = 0;  // the training context, 131,072
  o.gpu_memory_bytes = 24 * kGiB;
  o.overheads.weights_gib = 15.0;
  o.overheads.activation_gib = 0.5;
  o.overheads.non_torch_gib = 0.5;
  PlanResult r = plan(llama31_8b(), o);
  ASSERT_TRUE(r.capacity);
  EXPECT_EQ(r.capacity->available_kv_bytes, 8 * kGiB);
  EXPECT_FALSE(r.capacity->fits);
  EXPECT_EQ(r.capacity->max_concurrency, 0.0);
  EXPECT_EQ(r.capacity->largest_max_model_len, 65536u);
  EXPECT_NE(joined(r.warnings).find("largest --ctx-size that fits is 65536"), std::string::npos)
      << joined(r.warnings);
  // 4 slots of 8192 (ctx 32768 = 4 GiB): fits, concurrency = --parallel.
  o.llamacpp.ctx_size = 32768;
  o.llamacpp.parallel = 4;
  r = plan(llama31_8b(), o);
  EXPECT_TRUE(r.capacity->fits);
  EXPECT_EQ(r.capacity->max_concurrency, 4.0);
  EXPECT_EQ(r.capacity->max_model_len, 8192u);
  // largest total ctx 65536 over 4 slots = 16384 per slot
  EXPECT_EQ(r.capacity->largest_max_model_len, 16384u);
}

}  // namespace
}  // namespace kvsight
