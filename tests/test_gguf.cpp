// GGUF reader: files written by llama.cpp's own gguf-py writer (tests/make_gguf.py)
// at test time, read back into a ModelSpec; llama.cpp's KV for them; malformed
// headers refused. Every expected number is derived here from the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "config_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gguf.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

namespace fs = std::filesystem;

using test::make_gguf;

TEST(Gguf, GgmlBlockSizesOfTheKQuantsAndIq) {
  // ggml-common.h: q8_0 = fp16 scale + 32 int8 = 34 B / 32; q4_K = 2 fp16 + 12 scale
  // bytes + 128 nibble bytes = 144 B / 256; q6_K = 128 + 64 + 16 + 2 = 210 B / 256;
  // iq4_xs = 2 + 2 + 4 + 128 = 136 B / 256; mxfp4 = 1 + 16 = 17 B / 32.
  EXPECT_EQ(find_ggml_type(8)->block_bytes, 2u + 32u);
  EXPECT_EQ(find_ggml_type(12)->block_bytes, 2u * 2 + 12 + 128);
  EXPECT_EQ(find_ggml_type(14)->block_bytes, 128u + 64 + 16 + 2);
  EXPECT_EQ(find_ggml_type(23)->block_bytes, 2u + 2 + 4 + 128);
  EXPECT_EQ(find_ggml_type(39)->block_bytes, 1u + 16);
  EXPECT_EQ(find_ggml_type(12)->block_elements, 256u);
  EXPECT_EQ(find_ggml_type(4), nullptr);   // Q4_2, removed
  EXPECT_EQ(find_ggml_type(31), nullptr);  // Q4_0_4_4, removed from files
}

// TinyLlama-1.1B: 22 layers, hidden 2048, 32 heads, 4 KV heads (head dim 64),
// ffn 5632, vocab 32000. Tensors as make_gguf.py writes them: token_embd f16,
// output q8_0, norms f32, the seven linears of each layer in `linear`.
std::uint64_t tinyllama_bytes(std::uint64_t linear_num, std::uint64_t linear_den) {
  const std::uint64_t H = 2048, KV = 256, F = 5632, V = 32000, L = 22;
  const std::uint64_t linears_per_layer =
      H * H + KV * H + KV * H + H * H + 3 * F * H;  // q k v o gate up down
  const std::uint64_t q8 = 34, q8_block = 32;
  return V * H * 2                // token_embd f16
         + V * H / q8_block * q8  // output q8_0
         + H * 4                  // output_norm f32
         + L * (2 * H * 4         // attn_norm, ffn_norm f32
                + linears_per_layer * linear_num / linear_den);
}

TEST(Gguf, TinyLlamaShapeAndExactWeights) {
  const std::string path = make_gguf("tinyllama.gguf", "tinyllama");
  ASSERT_FALSE(path.empty());
  const ModelSpec m = resolve_model(path);
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.num_layers(), 22u);
  EXPECT_EQ(m.hidden_size, 2048u);
  EXPECT_EQ(m.num_attention_heads, 32u);
  EXPECT_EQ(m.num_kv_heads, 4u);
  EXPECT_EQ(m.head_dim, 2048u / 32u);  // no key_length: n_embd / n_head = 64
  EXPECT_EQ(m.vocab_size, 32000u);
  EXPECT_EQ(m.max_position_embeddings, 2048u);
  EXPECT_FALSE(m.tie_word_embeddings);  // output.weight present
  ASSERT_TRUE(m.exact_weights);
  // q8_0 linears: 34 B per 32 elements.
  EXPECT_EQ(m.exact_weights->bytes, tinyllama_bytes(34, 32));
  const WeightsEstimate w = estimate_weights(m);
  EXPECT_TRUE(w.exact);
  EXPECT_EQ(w.bytes, tinyllama_bytes(34, 32));
  // Parameters = elements of every tensor: 2 x V x H + H + L x (2 H + linears).
  const std::uint64_t params =
      2ull * 32000 * 2048 + 2048 +
      22ull * (2 * 2048 + 2ull * 2048 * 2048 + 2ull * 256 * 2048 + 3ull * 5632 * 2048);
  EXPECT_EQ(w.params, params);
  EXPECT_EQ(params, 1100048384u);  // TinyLlama's published 1.1 B
}

TEST(Gguf, LlamaCppKvForTheTinyLlamaGguf) {
  const std::string path = make_gguf("tinyllama.gguf", "tinyllama");
  ASSERT_FALSE(path.empty());
  // llama.cpp at -c 2048, f16 cache: per layer per cell K = 4 heads x 64 x 2 B = 512 B,
  // V the same; 22 layers x 1,024 B = 22,528 B per cell; 2048 cells = 46,137,344 B
  // = 44.00 MiB, K 22.00 MiB, V 22.00 MiB, which llama.cpp logs as
  // "llama_kv_cache: size =   44.00 MiB (  2048 cells,  22 layers,  1/1 seqs), K (f16):   22.00 MiB, V (f16):
  // 22.00 MiB".
  const auto run = test::run_kvsight(
      {"plan", "--model", path, "--engine", "llamacpp", "--ctx-size", "2048", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["kv"]["bytes_per_token"].get<std::uint64_t>(), 22u * (512u + 512u));
  EXPECT_EQ(j["kv"]["bytes_per_sequence"].get<std::uint64_t>(), 2048ull * 22 * 1024);
  EXPECT_EQ(j["weights"]["bytes"].get<std::uint64_t>(), tinyllama_bytes(34, 32));
  EXPECT_TRUE(j["weights"]["exact"].get<bool>());
  std::string log;
  for (const auto& line : j["engine_log"]) log += line.get<std::string>() + "\n";
  EXPECT_NE(log.find("size =   44.00 MiB"), std::string::npos) << log;
  EXPECT_NE(log.find("K (f16):   22.00 MiB, V (f16):   22.00 MiB"), std::string::npos) << log;
}

TEST(Gguf, F16FileOfTwoGigabytesIsReadFromItsHeader) {
  // Every matrix f16: the file is 2.2 GB (a sparse hole after the header), of which
  // the reader reads the header only. Time and memory: docs/reference/model-inputs.md
  // gives the /usr/bin/time -v command and its figures (no timing assertion here).
  const std::string path = make_gguf("tinyllama-f16.gguf", "tinyllama-f16");
  ASSERT_FALSE(path.empty());
  EXPECT_GT(fs::file_size(path), 2000000000u);
  const ModelSpec m = resolve_model(path);
  ASSERT_TRUE(m.exact_weights);
  // f16 everywhere: tinyllama_bytes with f16 linears, and output.weight f16 too
  // (V x H x 2 B instead of V x H / 32 x 34 B).
  const std::uint64_t VH = 32000ull * 2048;
  EXPECT_EQ(m.exact_weights->bytes, tinyllama_bytes(2, 1) - VH / 32 * 34 + VH * 2);
}

TEST(Gguf, SplitFilesAreSummedAndAMissingSplitIsNamed) {
  // 2 layers x 9 tensors + 3 = 21 tensors, 10 per split -> 3 splits.
  const std::string first = make_gguf("split.gguf", "split");
  ASSERT_FALSE(first.empty());
  const std::string dir = fs::path(first).parent_path().string();
  const std::string split1 = dir + "/split-00001-of-00003.gguf";
  const ModelSpec m = resolve_model(split1);
  ASSERT_TRUE(m.exact_weights);
  EXPECT_EQ(m.exact_weights->files.size(), 3u);
  const std::uint64_t H = 2048, KV = 256, F = 5632, V = 32000;
  const std::uint64_t expected =
      V * H * 2 + V * H / 32 * 34 + H * 4 + 2 * (2 * H * 4 + (2 * H * H + 2 * KV * H + 3 * F * H) / 32 * 34);
  EXPECT_EQ(m.exact_weights->bytes, expected);
  // The directory alone finds the split set too.
  EXPECT_EQ(resolve_model(dir).exact_weights->bytes, expected);
  fs::remove(dir + "/split-00002-of-00003.gguf");
  try {
    resolve_model(split1);
    FAIL() << "a missing split must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("split-00002-of-00003.gguf"), std::string::npos) << e.what();
  }
}

TEST(Gguf, MlaLayoutDecidesLlamaCppCache) {
  // DeepSeek-V2-Lite MLA: kv_lora_rank 512, rope 64, nope 128, v 128, 16 heads, 2 layers.
  const std::string fresh = make_gguf("new.gguf", "mla-new");
  const std::string old = make_gguf("old.gguf", "mla-old");
  ASSERT_FALSE(fresh.empty());
  ASSERT_FALSE(old.empty());
  const ModelSpec n = resolve_model(fresh), o = resolve_model(old);
  ASSERT_TRUE(n.mla && o.mla);
  EXPECT_EQ(n.mla->qk_nope_head_dim, 128u);
  EXPECT_EQ(o.mla->qk_nope_head_dim, 128u);
  EXPECT_EQ(n.layers[0].head_dim_k, 512u + 64u);
  EXPECT_FALSE(n.mla->gguf_decompressed_cache);
  EXPECT_TRUE(o.mla->gguf_decompressed_cache);
  EngineOptions options;
  options.llamacpp.ctx_size = 1024;
  options.engine_version = "b6000";  // latent K and V, before the V-less cache
  const auto engine = make_engine("llamacpp");
  // New layout, f16: K 576 x 2 + V 512 x 2 = 2,176 B per layer per cell, 2 layers.
  EXPECT_EQ(engine->plan(n, nullptr, options).kv.bytes_per_token, 2u * (576u * 2 + 512u * 2));
  // Old layout: decompressed K 16 x 192 x 2 + V 16 x 128 x 2 = 10,240 B per layer.
  EXPECT_EQ(engine->plan(o, nullptr, options).kv.bytes_per_token, 2u * (16u * 192 * 2 + 16u * 128 * 2));
}

TEST(Gguf, HybridLayersFromHeadCountKv) {
  const std::string path = make_gguf("jamba.gguf", "jamba");
  ASSERT_FALSE(path.empty());
  const ModelSpec m = resolve_model(path);
  // head_count_kv [0, 0, 2, 0]: layer 2 attention, the rest Mamba (v1: no group count).
  EXPECT_EQ(m.count(LayerKind::recurrent), 3u);
  EXPECT_EQ(m.layers[2].kind, LayerKind::full_attention);
  EXPECT_EQ(m.layers[2].kv_heads, 2u);
  ASSERT_TRUE(m.recurrent);
  EXPECT_EQ(m.recurrent->kind, RecurrentKind::mamba1);
  EXPECT_EQ(m.recurrent->d_inner, 2048u);
  EXPECT_EQ(m.recurrent->d_state, 16u);
}

// Falcon-H1 from a GGUF (architecture falcon-h1) is listed as the HF reader lists it: each
// decoder layer as attention then its Mamba2 state, and the norms and the MLP belong to
// the attention entry only (they were counted on both entries before: 91,628).
TEST(Gguf, FalconH1CountsNormsAndMlpOncePerDecoderLayer) {
  const std::string path = make_gguf("falcon-h1.gguf", "falcon-h1");
  ASSERT_FALSE(path.empty());
  const ModelSpec m = resolve_model(path);
  ASSERT_EQ(m.num_layers(), 2u);
  EXPECT_EQ(m.layers[0].kind, LayerKind::full_attention);
  EXPECT_EQ(m.layers[1].kind, LayerKind::recurrent);
  ASSERT_TRUE(m.recurrent);
  EXPECT_EQ(m.recurrent->kind, RecurrentKind::mamba2);
  // H 64, I 128, 4 heads of 64 / 4 = 16, 2 KV heads; vocab 32, no output.weight (tied).
  const std::uint64_t embedding = 32 * 64, final_norm = 64;
  // Attention entry: 2 norms; q 64 x 4 x 16, k + v 64 x 2 x (16 + 16), o 4 x 16 x 64;
  // gated MLP 3 x 64 x 128.
  const std::uint64_t attention = 2 * 64 + 64 * 4 * 16 + 64 * 2 * 32 + 4 * 16 * 64 + 3 * 64 * 128;
  // Mamba2 entry: inner 128, conv_dim 128 + 2 x 1 group x 16 = 160, 4 heads, conv 4:
  // in_proj 64 x (128 + 160 + 4), conv1d 160 x (4 + 1), dt_bias/A_log/D/norm 3 x 4 + 128,
  // out_proj 128 x 64.
  const std::uint64_t mamba = 64 * (128 + 160 + 4) + 160 * 5 + (3 * 4 + 128) + 128 * 64;
  EXPECT_EQ(count_params(m), embedding + final_norm + attention + mamba);  // 66,924
}

// gpt-oss from a GGUF (architecture gpt-oss) has attention sinks, as the HF gpt_oss does:
// vLLM's ROCM_ATTN refuses them (rocm_attn.py supports_sink False), so the custom paged
// attention kernel is refused for its full-attention layers on gfx9.
TEST(Gguf, GptOssHasAttentionSinks) {
  const std::string path = make_gguf("gpt-oss.gguf", "gpt-oss");
  ASSERT_FALSE(path.empty());
  const auto run = test::run_kvsight({"gates", "--model", path, "--gpu", "mi300x", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  bool refused_for_sinks = false;
  for (const auto& item : j.at("attention").at("refused"))
    if (item.at("kernel") == "rocm_custom_paged_attention")
      for (const auto& reason : item.at("reasons"))
        refused_for_sinks = refused_for_sinks || reason == "attention sinks are used (must be absent)";
  EXPECT_TRUE(refused_for_sinks) << run.out;
}

// One family table for both readers (issue #26 item 3): the GGUF of a family has the traits
// its HF config has.
TEST(Gguf, BothReadersGiveAFamilyTheSameTraits) {
  const std::pair<const char*, ModelSpec> pairs[] = {
      {"gpt-oss", resolve_model("gpt-oss-20b")},  // attention sinks
      {"falcon-h1", parse_hf_config(test::kFalconH1Config, "falcon-h1")},  // parallel hybrid
      {"tiny-gemma2", resolve_model("gemma-2-9b")},  // pre/post feed-forward norms
  };
  for (const auto& [variant, hf] : pairs) {
    const std::string path = make_gguf(std::string(variant) + ".gguf", variant);
    ASSERT_FALSE(path.empty());
    const ModelSpec gguf = resolve_model(path);
    EXPECT_TRUE(gguf.traits == hf.traits) << variant;
    EXPECT_FALSE(gguf.traits == FamilyTraits{}) << variant;
  }
}

// Hand-made headers for the refusals.
std::string le(std::uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}
std::string gstr(const std::string& s) { return le(s.size(), 8) + s; }

std::string write(const std::string& name, const std::string& bytes) {
  const std::string path = test::temp_dir("gguf-bad") + "/" + name;
  test::write_file(path, bytes);
  return path;
}

TEST(Gguf, MalformedHeadersAreRefusedNamingWhat) {
  const std::string head = std::string("GGUF") + le(3, 4);
  auto refused = [](const std::string& path, const std::string& needle) {
    try {
      read_gguf(path);
      ADD_FAILURE() << path << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Version 1 (32-bit counts) and 4 do not exist for llama.cpp.
  refused(write("v1.gguf", std::string("GGUF") + le(1, 4) + le(0, 8) + le(0, 8)), "allowed: 2, 3");
  // A metadata count that cannot fit the file.
  refused(write("count.gguf", head + le(0, 8) + le(1ull << 40, 8)), "cannot fit");
  // A key whose length runs past the end of the file.
  refused(write("key.gguf", head + le(0, 8) + le(1, 8) + le(1ull << 60, 8) + std::string(64, '\0')),
          "allowed: at most");
  // A value type that is not one (13).
  refused(write("type.gguf", head + le(0, 8) + le(1, 8) + gstr("a") + le(13, 4) + le(0, 8)), "value type 13");
  // A tensor of a removed ggml type (4, Q4_2).
  const std::string tensor_head = head + le(1, 8) + le(0, 8) + gstr("w") + le(1, 4) + le(32, 8);
  refused(write("ttype.gguf", tensor_head + le(4, 4) + le(0, 8) + std::string(64, '\0')), "ggml type 4");
  // q8_0 with ne[0] not a multiple of its 32-element block.
  refused(write("block.gguf",
                head + le(1, 8) + le(0, 8) + gstr("w") + le(1, 4) + le(33, 8) + le(8, 4) + le(0, 8)),
          "not a multiple");
  // Tensor data beyond the end of the file: f32 [32] = 128 B after the header.
  refused(write("short.gguf", tensor_head + le(0, 4) + le(0, 8)), "truncated");
  // A tensor whose offset is not where the previous one ended.
  refused(write("offset.gguf", tensor_head + le(0, 4) + le(64, 8) + std::string(256, '\0')), "expected 0");
  // Five dimensions (GGML_MAX_DIMS is 4).
  refused(write("dims.gguf", head + le(1, 8) + le(0, 8) + gstr("w") + le(5, 4) + std::string(64, '\0')),
          "allowed: 1 to 4");
}

TEST(Gguf, NoArchitectureOrNoTensorsIsRefused) {
  const std::string head = std::string("GGUF") + le(3, 4);
  EXPECT_THROW(read_gguf_model(write("noarch.gguf", head + le(0, 8) + le(0, 8))), InputError);
  // general.architecture llama and a block count, but no tensors at all.
  const std::string no_tensors = head + le(0, 8) + le(2, 8) + gstr("general.architecture") + le(8, 4) +
                                 gstr("llama") + gstr("llama.block_count") + le(4, 4) + le(2, 4);
  try {
    read_gguf_model(write("empty.gguf", no_tensors));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no tensors"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- hostile files (issue #25 class 3)

std::string kv_u32(const std::string& key, std::uint64_t v) { return gstr(key) + le(4, 4) + le(v, 4); }
std::string kv_str(const std::string& key, const std::string& v) { return gstr(key) + le(8, 4) + gstr(v); }
std::string kv_f32(const std::string& key, float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, 4);
  return gstr(key) + le(6, 4) + le(bits, 4);
}
// An array entry: element type, count, the elements' bytes.
std::string kv_array(const std::string& key, std::uint32_t elem, std::uint64_t count,
                     const std::string& payload) {
  return gstr(key) + le(9, 4) + le(elem, 4) + le(count, 8) + payload;
}
// The keys of a 2-layer model of `arch`: hidden 64, 4 heads (head dim 16).
std::vector<std::string> model_kvs(const std::string& arch) {
  return {kv_str("general.architecture", arch), kv_u32(arch + ".block_count", 2),
          kv_u32(arch + ".embedding_length", 64), kv_u32(arch + ".attention.head_count", 4)};
}
// A GGUF v3 of these entries and one f32 [32] tensor (128 B of data after 32-byte padding).
std::string gguf_of(const std::vector<std::string>& kvs) {
  std::string out = std::string("GGUF") + le(3, 4) + le(1, 8) + le(kvs.size(), 8);
  for (const auto& kv : kvs) out += kv;
  out += gstr("token_embd.weight") + le(1, 4) + le(32, 8) + le(0, 4) + le(0, 8);
  out += std::string((32 - out.size() % 32) % 32, '\0') + std::string(128, '\0');
  return out;
}
std::string refusal(const std::string& path) {
  try {
    read_gguf_model(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Gguf, HostileMetadataIsRefusedNamingTheKeyAsInTheFile) {
  auto with = [](const std::string& arch, std::vector<std::string> extra) {
    std::vector<std::string> kvs = model_kvs(arch);
    kvs.insert(kvs.end(), extra.begin(), extra.end());
    return gguf_of(kvs);
  };
  // The control: a plain 2-layer llama is a model.
  EXPECT_EQ(read_gguf_model(write("ok.gguf", with("llama", {}))).num_layers(), 2u);
  // An architecture llama.cpp does not know: its own words (llama-model.cpp llama_model_create).
  EXPECT_NE(refusal(write("arch.gguf", with("llamax", {}))).find("unknown model architecture: 'llamax'"),
            std::string::npos);
  // A NUL inside the name ("lla\0ma" is no architecture, though C would read "lla").
  const std::string nul = refusal(write("nul.gguf", with(std::string("lla\0ma", 6), {})));
  EXPECT_NE(nul.find("general.architecture"), std::string::npos) << nul;
  EXPECT_NE(nul.find("NUL byte at offset 3"), std::string::npos) << nul;
  EXPECT_NE(refusal(write("clip.gguf", with("clip", {}))).find("vision projector"), std::string::npos);
  // NaN and infinite RoPE bases, named by the key in the file.
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    const std::string e = refusal(write("rope.gguf", with("llama", {kv_f32("llama.rope.freq_base", bad)})));
    EXPECT_NE(e.find("llama.rope.freq_base: is not a finite number"), std::string::npos) << e;
  }
  // A LoRA adapter (convert_lora_to_gguf.py writes general.type and adapter.type).
  const std::string lora = refusal(
      write("lora.gguf", with("llama", {kv_str("general.type", "adapter"), kv_str("adapter.type", "lora")})));
  EXPECT_NE(lora.find("this is a LoRA adapter, not a model"), std::string::npos) << lora;
  // 3 KV heads do not divide 4 heads: the key as spelled in the file.
  const std::string kv =
      refusal(write("kv.gguf", with("llama", {kv_u32("llama.attention.head_count_kv", 3)})));
  EXPECT_NE(kv.find("llama.attention.head_count_kv"), std::string::npos) << kv;
  // Qwen3-Next with full_attention_interval 0 (llama.cpp would take i % 0).
  const std::string interval = refusal(
      write("interval.gguf",
            with("qwen3next",
                 {kv_u32("qwen3next.ssm.conv_kernel", 4), kv_u32("qwen3next.ssm.state_size", 16),
                  kv_u32("qwen3next.ssm.inner_size", 64), kv_u32("qwen3next.ssm.time_step_rank", 4),
                  kv_u32("qwen3next.ssm.group_count", 2), kv_u32("qwen3next.full_attention_interval", 0)})));
  EXPECT_NE(interval.find("qwen3next.full_attention_interval: is 0"), std::string::npos) << interval;
  // An array of more than 2^30 entries (ggml GGUF_MAX_ARRAY_ELEMENTS) is refused from its count.
  const std::string huge =
      refusal(write("huge.gguf", with("llama", {kv_array("llama.x", 0, (1ull << 30) + 1, "")})));
  EXPECT_NE(huge.find("GGUF_MAX_ARRAY_ELEMENTS"), std::string::npos) << huge;
}

TEST(Gguf, ArraysThePlannerDoesNotNeedAreSkippedAndPerLayerArraysKept) {
  // 70,000 layers, head_count one u32 per layer (4 each): a legal file, kept whole. Per layer
  // KV 4 heads x 16 dims x (K + V) = 128 values.
  const std::uint64_t layers = 70000;
  std::string heads;
  for (std::uint64_t i = 0; i < layers; ++i) heads += le(4, 4);
  std::vector<std::string> kvs = {kv_str("general.architecture", "llama"),
                                  kv_u32("llama.block_count", layers), kv_u32("llama.embedding_length", 64),
                                  kv_array("llama.attention.head_count", 4, layers, heads)};
  // Three tokens (skipped unread, counted), 300 KB of u8 scores (skipped: more than one per layer),
  // a 100 KB chat template (skipped: longer than any name kvsight reads).
  kvs.push_back(kv_array("tokenizer.ggml.tokens", 8, 3, gstr("a") + gstr("bc") + gstr("")));
  kvs.push_back(kv_array("llama.scores", 0, 300000, std::string(300000, '\x01')));
  kvs.push_back(kv_str("tokenizer.chat_template", std::string(100000, 'x')));
  const std::string path = write("layers.gguf", gguf_of(kvs));
  const ModelSpec m = read_gguf_model(path);
  EXPECT_EQ(m.num_layers(), layers);
  EXPECT_EQ(m.layers[layers - 1].kv_heads, 4u);
  EXPECT_EQ(m.vocab_size, 3u);
  const GgufFile file = read_gguf(path);
  EXPECT_EQ(file.metadata.at("tokenizer.ggml.tokens").value("skipped", ""), "string");
  EXPECT_EQ(file.metadata.at("llama.scores").value("count", std::uint64_t{0}), 300000u);
  EXPECT_EQ(file.metadata.at("tokenizer.chat_template").value("bytes", std::uint64_t{0}), 100000u);
  // A per-layer array past one entry a layer is named, not read as something else.
  kvs[3] = kv_array("llama.attention.head_count", 4, 100001, heads + std::string(4 * 30001, '\x04'));
  const std::string e = refusal(write("long.gguf", gguf_of(kvs)));
  EXPECT_NE(e.find("llama.attention.head_count: is an array of 100001 u32 entries"), std::string::npos) << e;
}

TEST(Gguf, ASplitThatIsALinkToAnotherIsRefusedNamingBoth) {
  const std::string dir = test::temp_dir("gguf-split-link");
  std::vector<std::string> kvs = model_kvs("llama");
  kvs.push_back(gstr("split.count") + le(2, 4) + le(2, 2));  // u16, as gguf-split writes it
  const std::string first = dir + "/m-00001-of-00002.gguf", second = dir + "/m-00002-of-00002.gguf";
  test::write_file(first, gguf_of(kvs));
  fs::create_symlink(first, second);
  std::string e = refusal(first);
  EXPECT_NE(e.find(second), std::string::npos) << e;
  EXPECT_NE(e.find("is the same file as '" + first + "'"), std::string::npos) << e;
  // A hard link is the same inode: refused the same way.
  fs::remove(second);
  fs::create_hard_link(first, second);
  e = refusal(second);
  EXPECT_NE(e.find("is the same file as"), std::string::npos) << e;
}

TEST(Gguf, HfCacheRepositoryOfGgufFilesOnly) {
  // A -GGUF repository in the HF cache has no config.json: `--model ORG/NAME` reads its
  // one GGUF; a second, different GGUF makes it ambiguous (exit 2, both named).
  const std::string path = make_gguf("tinyllama.gguf", "tinyllama");
  ASSERT_FALSE(path.empty());
  const std::string hub = test::temp_dir("gguf-hub");
  const std::string snapshot = hub + "/models--acme--tiny-GGUF/snapshots/rev1";
  fs::create_directories(snapshot);
  fs::create_symlink(path, snapshot + "/tinyllama.Q8_0.gguf");  // the cache links to blobs
  ::setenv("HF_HUB_CACHE", hub.c_str(), 1);
  const ModelSpec m = resolve_model("acme/tiny-GGUF");
  EXPECT_EQ(m.num_layers(), 22u);
  ASSERT_TRUE(m.exact_weights);
  EXPECT_EQ(m.exact_weights->bytes, tinyllama_bytes(34, 32));
  fs::create_symlink(path, snapshot + "/tinyllama.F16.gguf");
  const auto run = test::run_kvsight({"plan", "--model", "acme/tiny-GGUF"});
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("tinyllama.F16.gguf"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("tinyllama.Q8_0.gguf"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("pass the path"), std::string::npos) << run.err;
  // Quantizations in folders only (Q8_0/...): named with their folder, exit 2.
  const std::string folders = hub + "/models--acme--big-GGUF/snapshots/rev1/Q8_0";
  fs::create_directories(folders);
  fs::create_symlink(path, folders + "/big-Q8_0.gguf");
  ::setenv("HF_HUB_CACHE", hub.c_str(), 1);
  const auto nested = test::run_kvsight({"plan", "--model", "acme/big-GGUF"});
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_NE(nested.err.find("Q8_0/big-Q8_0.gguf"), std::string::npos) << nested.err;
}

}  // namespace
}  // namespace kvsight
