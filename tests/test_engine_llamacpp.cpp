// llama.cpp budget: cells, ggml cache types, SWA cache sizing, MLA storage by build,
// recurrent state, and what fits. Expected numbers derived in the tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "config_fixtures.hpp"
#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/catalog.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"
#include "kvsight/model.hpp"
#include "test_support.hpp"

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
  o.llamacpp.parallel_given = true;  // -np 1
  const PlanResult r = plan(llama31_8b(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 131072u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 8192u * 131072u);
  EXPECT_NE(joined(r.engine_log)
                .find("llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), "
                      "K (f16):  512.00 MiB, V (f16):  512.00 MiB"),
            std::string::npos)
      << joined(r.engine_log);
}

TEST(LlamaCpp, DefaultContextIs4096BeforePr16653AndZeroMeansTraining) {
  // b6900 (before PR #16653): common.h default n_ctx 4096: 4096 cells x 131,072 B;
  // --ctx-size 0: 131,072 cells.
  EngineOptions o;
  o.engine_version = "b6900";
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

TEST(LlamaCpp, ContextPaddingByBuild) {
  // Before PR #16812 (b6900) n_ctx = GGML_PAD(1000, 256) = 1024 cells; b6900 unpadded, 1000;
  // from PR #17046 padded again: 1024 (b7900 and b11312).
  EngineOptions o;
  o.llamacpp.ctx_size = 1000;
  o.llamacpp.parallel_given = true;  // -np 1
  o.engine_version = "b6000";
  EXPECT_EQ(plan(llama31_8b(), o).kv.bytes_per_sequence, 1024u * 131072u);
  o.engine_version = "b6900";
  EXPECT_EQ(plan(llama31_8b(), o).kv.bytes_per_sequence, 1000u * 131072u);
  o.engine_version = "b7900";
  EXPECT_EQ(plan(llama31_8b(), o).kv.bytes_per_sequence, 1024u * 131072u);
  o.engine_version.clear();  // the default build, b11312
  const PlanResult r = plan(llama31_8b(), o);
  EXPECT_EQ(r.engine_version, "b11312");
  EXPECT_EQ(r.kv.bytes_per_sequence, 1024u * 131072u);
  EXPECT_NE(joined(r.engine_log).find("llama_context: n_ctx         = 1024"), std::string::npos);
}

TEST(LlamaCpp, PerSequenceContextPaddedTo256) {
  // b11312, -np 3 -c 5000, not unified: n_ctx = pad(5000, 256) = 5120; n_ctx_seq =
  // pad(5120 / 3 = 1706, 256) = 1792; n_ctx = 1792 x 3 = 5376 cells, 5376 x 131,072 B =
  // 704,643,072 B = 672.00 MiB (K 336, V 336). The log prints the cells of one stream.
  EngineOptions o;
  o.llamacpp.ctx_size = 5000;
  o.llamacpp.parallel = 3;
  PlanResult r = plan(llama31_8b(), o);
  EXPECT_EQ(r.kv.context, 1792u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 1792u * 131072u);
  const std::string log = joined(r.engine_log);
  EXPECT_NE(log.find("n_ctx         = 5376"), std::string::npos) << log;
  EXPECT_NE(log.find("n_ctx_seq     = 1792"), std::string::npos) << log;
  EXPECT_NE(log.find("llama_kv_cache: size =  672.00 MiB (  1792 cells,  32 layers,  3/3 seqs), "
                     "K (f16):  336.00 MiB, V (f16):  336.00 MiB"),
            std::string::npos)
      << log;
  // b6900 (unpadded): 5000 / 3 = 1666 cells per stream (floor), 4998 in all.
  o.engine_version = "b6900";
  r = plan(llama31_8b(), o);
  EXPECT_EQ(r.kv.context, 1666u);
  EXPECT_NE(joined(r.engine_log).find("(  1666 cells,  32 layers,  3/3 seqs)"), std::string::npos)
      << joined(r.engine_log);
  // -kvu: one stream, n_ctx_seq = n_ctx = pad(5000, 256) = 5120 cells = 640.00 MiB.
  o.engine_version.clear();
  o.llamacpp.kv_unified = true;
  r = plan(llama31_8b(), o);
  EXPECT_EQ(r.kv.context, 5120u);
  EXPECT_NE(joined(r.engine_log).find("size =  640.00 MiB (  5120 cells,  32 layers,  3/1 seqs)"),
            std::string::npos)
      << joined(r.engine_log);
  // More slots than padded cells: 5120 / 6000 = 0 per sequence, llama.cpp throws "n_ctx_seq == 0".
  o.llamacpp.kv_unified = false;
  o.llamacpp.parallel = 6000;
  EXPECT_THROW(plan(llama31_8b(), o), InputError);
}

ModelSpec tinyllama() {
  const CatalogModel* c = find_catalog_model("tinyllama-1.1b-chat");
  EXPECT_NE(c, nullptr);
  return parse_hf_config(c ? c->config_text : "{}", "tinyllama-1.1b-chat");
}

TEST(LlamaCpp, NoCtxIsTheTrainingContextWithFourUnifiedSlots) {
  // TinyLlama: 22 layers x 4 KV heads x 64 x (K + V) x 2 B = 22,528 B per cell. b11312 with
  // no -c: n_ctx = n_ctx_train = 2048 (max_position_embeddings); no -np: llama-server's auto =
  // 4 slots, unified: one stream of 2048 cells = 46,137,344 B = 44.00 MiB.
  EngineOptions o;
  PlanResult r = plan(tinyllama(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 22528u);
  EXPECT_EQ(r.kv.context, 2048u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 2048u * 22528u);
  EXPECT_NE(joined(r.engine_log).find("size =   44.00 MiB (  2048 cells,  22 layers,  4/1 seqs)"),
            std::string::npos)
      << joined(r.engine_log);
  EXPECT_NE(joined(r.notes).find("fit_params"), std::string::npos) << joined(r.notes);
  EXPECT_NE(joined(r.notes).find("4 slots"), std::string::npos) << joined(r.notes);
  // -np 4 given, not unified: pad(2048 / 4 = 512, 256) = 512 cells per stream, 4 streams.
  o.llamacpp.parallel = 4;
  r = plan(tinyllama(), o);
  EXPECT_NE(joined(r.engine_log).find("(   512 cells,  22 layers,  4/4 seqs)"), std::string::npos)
      << joined(r.engine_log);
  // b6900: no -c = 4096 cells, -np 1 (before PR #16653 and PR #16736).
  o.llamacpp.parallel = 1;
  o.engine_version = "b6900";
  r = plan(tinyllama(), o);
  EXPECT_EQ(r.kv.bytes_per_sequence, 4096u * 22528u);
  EXPECT_NE(joined(r.engine_log).find("(  4096 cells,  22 layers,  1/1 seqs)"), std::string::npos)
      << joined(r.engine_log);
}

TEST(LlamaCpp, StartupRefusals) {
  // llama_init_from_model (llama-context.cpp): a quantized V cache with -fa off...
  EngineOptions o;
  o.llamacpp.ctx_size = 4096;
  o.llamacpp.cache_type_k = "q8_0";
  o.llamacpp.cache_type_v = "q8_0";
  o.llamacpp.flash_attn = "off";
  try {
    plan(llama31_8b(), o);
    ADD_FAILURE() << "a quantized V cache with -fa off was planned";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--cache-type-v");
    EXPECT_NE(std::string(e.what()).find("quantized V cache requires flash_attn to be enabled"),
              std::string::npos)
        << e.what();
  }
  // ...with -fa auto llama.cpp turns flash attention on instead (a note, a plan).
  o.llamacpp.flash_attn = "auto";
  EXPECT_NE(joined(plan(llama31_8b(), o).notes).find("enabling flash_attn"), std::string::npos);
  // An MLA model with K q8_0 and V f16.
  o.llamacpp.cache_type_v = "f16";
  try {
    plan(deepseek_v3_shape(), o);
    ADD_FAILURE() << "an MLA model with different K / V types was planned";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--cache-type-v");
    EXPECT_NE(std::string(e.what()).find("model does not support different K (q8_0) and V (f16) cache types"),
              std::string::npos)
        << e.what();
  }
}

TEST(LlamaCpp, StartupRefusalsExit2ViaTheCli) {
  const test::CliRun fa = test::run_kvsight({"plan", "--model", "llama-3.1-8b", "--engine", "llamacpp", "-c",
                                             "4096", "-ctv", "q8_0", "-fa", "off"});
  EXPECT_EQ(fa.exit_code, 2) << fa.out << fa.err;
  EXPECT_NE(fa.err.find("quantized V cache requires flash_attn to be enabled"), std::string::npos) << fa.err;
  const test::CliRun mla = test::run_kvsight({"plan", "--model", "deepseek-v3", "--engine", "llamacpp", "-c",
                                              "4096", "-ctk", "q8_0", "-ctv", "f16"});
  EXPECT_EQ(mla.exit_code, 2) << mla.out << mla.err;
  EXPECT_NE(mla.err.find("model does not support different K"), std::string::npos) << mla.err;
  // The same model with equal types plans (exit 0).
  const test::CliRun ok = test::run_kvsight({"plan", "--model", "deepseek-v3", "--engine", "llamacpp", "-c",
                                             "4096", "-ctk", "q8_0", "-ctv", "q8_0"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

// tiiuae/Falcon-H1-0.5B-Instruct: test::kFalconH1Config (config_fixtures.hpp).
const char* const kFalconH1 = test::kFalconH1Config;

TEST(LlamaCpp, FalconH1KeepsKvAndMamba2StateInEveryLayer) {
  // llama-hparams.cpp (Mamba-2): n_embd_r = (d_conv - 1) x (d_inner + 2 n_group d_state)
  // = 3 x (1536 + 2 x 1 x 128) = 5,376 f32 = 21,504 B; n_embd_s = d_state x d_inner =
  // 128 x 1536 = 196,608 f32 = 786,432 B; 807,936 B per layer, x 36 = 29,085,696 B per slot
  // = 27.74 MiB (R 774,144 B = 0.74 MiB, S 28,311,552 B = 27.00 MiB).
  // KV: 36 x 2 heads x 64 x (K + V) x 2 B = 18,432 B per cell; -c 4096 -np 1: 72.00 MiB.
  const ModelSpec m = parse_hf_config(kFalconH1, "falcon-h1");
  EngineOptions o;
  o.llamacpp.ctx_size = 4096;
  o.llamacpp.parallel_given = true;  // -np 1
  PlanResult r = plan(m, o);
  EXPECT_EQ(r.kv.bytes_per_token, 18432u);
  EXPECT_EQ(r.kv.state_bytes_per_sequence, 36u * (5376u + 196608u) * 4u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 4096u * 18432u + 29085696u);
  const std::string log = joined(r.engine_log);
  EXPECT_NE(log.find("llama_kv_cache: size =   72.00 MiB (  4096 cells,  36 layers,  1/1 seqs)"),
            std::string::npos)
      << log;
  EXPECT_NE(
      log.find("llama_memory_recurrent: size =   27.74 MiB (     1 cells,  36 layers,  1 seqs  0 rs_seq), "
               "R (f32):    0.74 MiB, S (f32):   27.00 MiB, P (f32):    0.00 MiB"),
      std::string::npos)
      << log;
  // 4 auto slots: max(1, n_seq_max) = 4 state cells: 4 x 29,085,696 B = 110.95 MiB.
  o.llamacpp.parallel_given = false;
  r = plan(m, o);
  EXPECT_NE(joined(r.engine_log).find("size =  110.95 MiB (     4 cells,  36 layers,  4 seqs"),
            std::string::npos)
      << joined(r.engine_log);
}

TEST(LlamaCpp, LogReaderCountsCellsPerStream) {
  // "2048 cells, 4/4 seqs": 4 streams of 2048 = 8192 cells; TinyLlama 8192 x 22,528 B = 176.00 MiB.
  EngineLogFigures f = read_engine_log(
      "llama_kv_cache: size =  176.00 MiB (  2048 cells,  22 layers,  4/4 seqs), K (f16):   88.00 MiB, "
      "V (f16):   88.00 MiB\n");
  EXPECT_EQ(f.engine, "llamacpp");
  EXPECT_EQ(f.kv_tokens.value_or(0), 8192u);
  EXPECT_EQ(f.llamacpp_seqs.value_or(0), 4u);
  EXPECT_EQ(f.llamacpp_streams.value_or(0), 4u);
  // Unified: "4/1 seqs" is one stream of 2048.
  f = read_engine_log(
      "llama_kv_cache: size =   44.00 MiB (  2048 cells,  22 layers,  4/1 seqs), K (f16): ...\n");
  EXPECT_EQ(f.kv_tokens.value_or(0), 2048u);
  // An older line with "1 seqs" only: one stream.
  f = read_engine_log(
      "llama_kv_cache_unified: size =   88.00 MiB (  4096 cells,  22 layers,  1 seqs), K (f16)\n");
  EXPECT_EQ(f.kv_tokens.value_or(0), 4096u);
  EXPECT_FALSE(f.llamacpp_streams);
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
  o.llamacpp.parallel_given = true;  // -np 1
  // One slot: SWA cells = pad(min(32768, 4096 x 1 + 512), 256) = 4608.
  PlanResult r = plan(gemma2_like(), o);
  EXPECT_EQ(r.kv.bytes_per_sequence, 21 * per_layer * 32768 + 21 * per_layer * 4608);
  EXPECT_EQ(r.kv.bytes_per_token, 21 * per_layer);
  EXPECT_EQ(r.kv.bytes_per_token_all_layers, 42 * per_layer);
  EXPECT_NE(joined(r.engine_log).find("(  4608 cells,  21 layers"), std::string::npos)
      << joined(r.engine_log);

  // 4 slots, separate streams: each stream 32768 / 4 = 8192 base cells and
  // pad(min(8192, 4096 + 512), 256) = 4608 SWA cells (4 x 4608 = 18432 in all); the log
  // prints the cells of one stream.
  o.llamacpp.parallel = 4;
  r = plan(gemma2_like(), o);
  EXPECT_NE(joined(r.engine_log).find("(  4608 cells,  21 layers,  4/4 seqs)"), std::string::npos)
      << joined(r.engine_log);
  EXPECT_NE(joined(r.engine_log).find("n_ctx_seq     = 8192"), std::string::npos);
  // Unified: pad(min(32768, 4096 x 4 + 512), 256) = 16896 cells in one stream.
  o.llamacpp.kv_unified = true;
  r = plan(gemma2_like(), o);
  EXPECT_NE(joined(r.engine_log).find("( 16896 cells,  21 layers,  4/1 seqs)"), std::string::npos)
      << joined(r.engine_log);
  // --swa-full: the SWA cache as large as the base cache.
  o.llamacpp.swa_full = true;
  r = plan(gemma2_like(), o);
  EXPECT_NE(joined(r.engine_log).find("( 32768 cells,  21 layers,  4/1 seqs)"), std::string::npos);
}

TEST(LlamaCpp, MlaStorageByBuildWithQ8K) {
  EngineOptions o;
  o.llamacpp.ctx_size = 4096;
  o.llamacpp.cache_type_k = "q8_0";
  o.llamacpp.cache_type_v = "q8_0";  // b11312 refuses K != V on MLA (StartupRefusals)
  // Newest (V-less, PR #19067): K = 576 elements q8_0 = 18 blocks x 34 = 612 B per layer.
  PlanResult r = plan(deepseek_v3_shape(), o);
  EXPECT_EQ(r.kv.bytes_per_token, 61u * 612u);
  o.llamacpp.cache_type_v = "f16";  // older builds: V stays f16
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
  // 6 x 2 x 3,268,608 B = 39,223,296 B = 37.41 MiB; R 6 x 2 x 122,880 = 1,474,560 B = 1.41 MiB,
  // S 6 x 2 x 3,145,728 = 37,748,736 B = 36.00 MiB; b11312 counts all 8 layers of the model.
  EXPECT_NE(
      joined(r.engine_log)
          .find("llama_memory_recurrent: size =   37.41 MiB (     2 cells,   8 layers,  2 seqs  0 rs_seq), "
                "R (f32):    1.41 MiB, S (f32):   36.00 MiB, P (f32):    0.00 MiB"),
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
