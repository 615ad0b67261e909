// Weights from shapes, safetensors headers, and the KV dtype table.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kvsight/dtype.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

const char* kLlama31_8B = R"({"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,
  "num_attention_heads":32,"num_key_value_heads":8,"vocab_size":128256,"intermediate_size":14336,
  "max_position_embeddings":131072,"torch_dtype":"bfloat16","tie_word_embeddings":false})";

TEST(Weights, Llama31_8BParamsMatchThePublishedCount) {
  const ModelSpec m = parse_hf_config(kLlama31_8B, "llama");
  // Embedding + untied lm_head: 2 x 128,256 x 4,096 = 1,050,673,152.
  // Per layer: q 4096x4096 + k,v 2 x 4096 x 8 x 128 + o 4096x4096 = 41,943,040;
  // MLP 3 x 4096 x 14336 = 176,160,768; norms 2 x 4096 = 8,192: 218,112,000.
  // 32 layers = 6,979,584,000; + final norm 4,096.
  const std::uint64_t expected = 2ull * 128256 * 4096 + 32ull * (2ull * 4096 * 4096 + 2ull * 4096 * 8 * 128 +
                                                                 3ull * 4096 * 14336 + 2 * 4096) + 4096;
  EXPECT_EQ(expected, 8030261248ull);  // formulas.md published vector
  EXPECT_EQ(count_params(m), expected);
  const WeightsEstimate w = estimate_weights(m);
  EXPECT_EQ(w.bytes, expected * 2);  // bf16
  EXPECT_FALSE(w.exact);
  // TP 2 halves the per-rank share.
  EXPECT_EQ(estimate_weights(m, 2).bytes_per_rank, expected);
}

TEST(Weights, GptqInt4BitsPerWeight) {
  std::string text = kLlama31_8B;
  text.insert(text.size() - 1, R"(,"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128})");
  const ModelSpec m = parse_hf_config(text, "gptq");
  // 4 bits + (16-bit scale + 4-bit zero) / 128 = 4.15625 bits on the linears.
  EXPECT_DOUBLE_EQ(m.quantization.bits_per_weight, 4.0 + 20.0 / 128.0);
  const std::uint64_t embedding = 2ull * 128256 * 4096, norms = 32ull * 2 * 4096 + 4096;
  const std::uint64_t linears = 8030261248ull - embedding - norms;
  const double expected = static_cast<double>(embedding + norms) * 2 + static_cast<double>(linears) * 4.15625 / 8;
  EXPECT_NEAR(static_cast<double>(estimate_weights(m).bytes), expected, 1.0);
}

std::string safetensors_bytes(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x01');
}

TEST(Safetensors, SumsTensorSizesFromTheHeaderOnly) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[12,28]}})";
  const std::string file = safetensors_bytes(header, 28);
  const auto parsed = parse_safetensors_header(file, file.size(), "mem");
  ASSERT_EQ(parsed.tensors.size(), 2u);
  EXPECT_EQ(parsed.total_bytes, 12u + 16u);  // 2x3 bf16 = 12 B, 4 f32 = 16 B
}

TEST(Safetensors, RefusesHeaderLargerThanFileAndBadOffsets) {
  std::string file = safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16);
  EXPECT_THROW(parse_safetensors_header(file.substr(0, 20), 20, "short"), InputError);
  const std::string beyond = safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,64]}})", 16);
  EXPECT_THROW(parse_safetensors_header(beyond, beyond.size(), "beyond"), InputError);
  EXPECT_THROW(parse_safetensors_header("abc", 3, "tiny"), InputError);
}

TEST(Safetensors, DirectoryModelUsesExactBytes) {
  const std::string dir = test::temp_dir("st-model");
  test::write_file(dir + "/config.json", kLlama31_8B);
  const std::string file = safetensors_bytes(R"({"w":{"dtype":"BF16","shape":[500],"data_offsets":[0,1000]}})", 1000);
  test::write_file(dir + "/model-00001.safetensors", file);
  const ModelSpec m = resolve_model(dir);
  const WeightsEstimate w = estimate_weights(m);
  EXPECT_TRUE(w.exact);
  EXPECT_EQ(w.bytes, 1000u);
}

TEST(KvDtype, RowBytesOfEveryFamily) {
  // head_dim 128 row:
  EXPECT_EQ(find_kv_dtype("bf16").row_bytes(128), 256u);
  EXPECT_EQ(find_kv_dtype("fp8").row_bytes(128), 128u);
  EXPECT_EQ(find_kv_dtype("fp32").row_bytes(128), 512u);
  // q8_0: 34 B per 32 -> 4 x 34 = 136; q4_0 18 per 32 -> 72; q4_1 20 -> 80; q5_0 22 -> 88; q5_1 24 -> 96.
  EXPECT_EQ(find_kv_dtype("q8_0").row_bytes(128), 4u * 34);
  EXPECT_EQ(find_kv_dtype("q4_0").row_bytes(128), 4u * 18);
  EXPECT_EQ(find_kv_dtype("q4_1").row_bytes(128), 4u * 20);
  EXPECT_EQ(find_kv_dtype("q5_0").row_bytes(128), 4u * 22);
  EXPECT_EQ(find_kv_dtype("q5_1").row_bytes(128), 4u * 24);
  // nvfp4: 128/2 + 128/16 = 72.
  EXPECT_EQ(find_kv_dtype("nvfp4").row_bytes(128), 64u + 8u);
  // fp8 per-token-head: 128 + a 4 B fp32 scale.
  EXPECT_EQ(find_kv_dtype("fp8_per_token_head").row_bytes(128), 132u);
  // int4 per-token-head (vLLM triton_attn.py customize_spec, 0.33): 128 // 2 + a 4 B scale.
  EXPECT_EQ(find_kv_dtype("int4_per_token_head").row_bytes(128), 64u + 4u);
  // int4 group 32: 4 bits + 32/32 bits per element = 5 bits x 128 / 8 = 80.
  EXPECT_EQ(find_kv_dtype("int4_g32").row_bytes(128), 80u);
  EXPECT_EQ(find_kv_dtype("int2_g128").row_bytes(128), (2u * 128 + 32) / 8);
}

TEST(KvDtype, UnknownNamesTheFlagAndListsTheAllowed) {
  try {
    find_kv_dtype("fp6", "--kv-cache-dtype");
    FAIL();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--kv-cache-dtype"), std::string::npos);
    EXPECT_NE(what.find("q8_0"), std::string::npos);
  }
}

TEST(Footprint, TpReplicatesKvHeadsBeyondTheirCount) {
  LayerSpec layer;
  layer.kind = LayerKind::full_attention;
  layer.kv_heads = 8;
  layer.head_dim_k = layer.head_dim_v = 128;
  KvTypes bf16{find_kv_dtype("bf16"), find_kv_dtype("bf16")};
  // TP 4: 8 / 4 = 2 heads x (256 + 256) B = 1,024 B.
  EXPECT_EQ(layer_kv_bytes_per_token(layer, bf16, 4), 2u * 512);
  // TP 16 > 8 heads: max(1, 8 / 16) = 1 head per rank (replicated), 512 B.
  EXPECT_EQ(layer_kv_bytes_per_token(layer, bf16, 16), 512u);
  // Different K and V dtypes (llama.cpp): K q8_0 136 + V f16 256 = 392 B per head.
  KvTypes mixed{find_kv_dtype("q8_0"), find_kv_dtype("f16")};
  EXPECT_EQ(layer_kv_bytes_per_token(layer, mixed, 1), 8u * (136 + 256));
}

TEST(Footprint, PipelineStagesFollowVllm) {
  // 30 layers over 4 stages: 30 // 4 = 7 each, remainder 2 to the stages before
  // the last, counting back: sizes 7, 8, 8, 7.
  EXPECT_EQ(pp_stage_layers(30, 4, 0).size(), 7u);
  EXPECT_EQ(pp_stage_layers(30, 4, 1).size(), 8u);
  EXPECT_EQ(pp_stage_layers(30, 4, 2).size(), 8u);
  EXPECT_EQ(pp_stage_layers(30, 4, 3).size(), 7u);
  EXPECT_EQ(pp_stage_layers(30, 4, 1).front(), 7u);
  EXPECT_THROW(pp_stage_layers(4, 8, 0), InputError);
}

}  // namespace
}  // namespace kvsight
