// Config reading: layer kinds for every family, derived fields, and refusals.
// Configs here are written inline so each test shows the fields it relies on.
#include <gtest/gtest.h>

#include <string>

#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/model.hpp"

namespace kvsight {
namespace {

ModelSpec parse(const std::string& text) { return parse_hf_config(text, "test-config"); }

// SmolLM3-3B's shape (HuggingFaceTB/SmolLM3-3B config.json): no_rope_layers has
// a 0 at every 4th layer; 1 means RoPE.
std::string smollm3_config() {
  std::string flags;
  for (int i = 0; i < 36; ++i) flags += std::string(i ? "," : "") + ((i + 1) % 4 == 0 ? "0" : "1");
  return R"({"architectures":["SmolLM3ForCausalLM"],"model_type":"smollm3","hidden_size":2048,
    "num_hidden_layers":36,"num_attention_heads":16,"num_key_value_heads":4,"intermediate_size":11008,
    "vocab_size":128256,"tie_word_embeddings":true,"torch_dtype":"bfloat16","max_position_embeddings":65536,
    "rope_theta":5000000.0,"rope_scaling":null,"no_rope_layers":[)" +
         flags + "]}";
}

TEST(ModelConfig, SmolLM3NoPELayersAreTheZeros) {
  const ModelSpec m = parse(smollm3_config());
  ASSERT_EQ(m.num_layers(), 36u);
  // head_dim absent: 2048 / 16 = 128.
  EXPECT_EQ(m.head_dim, 128u);
  EXPECT_EQ(m.num_kv_heads, 4u);
  // Every 4th layer is NoPE: 36 / 4 = 9 NoPE, 36 - 9 = 27 RoPE.
  EXPECT_EQ(m.nope_layer_count(), 9u);
  EXPECT_EQ(m.rope_layer_count(), 27u);
  EXPECT_FALSE(m.layers[3].rope);
  EXPECT_TRUE(m.layers[0].rope);
  EXPECT_EQ(m.count(LayerKind::full_attention), 36u);
}

TEST(ModelConfig, SmolLM3KvBytesPerToken) {
  const ModelSpec m = parse(smollm3_config());
  const auto fp = token_footprint(m, resolve_kv_types(m, "auto"), 1);
  // 36 layers x 4 KV heads x 128 head_dim x 2 (K and V) x 2 B (bf16) = 73,728.
  EXPECT_EQ(fp.bytes_per_token, 36ull * 4 * 128 * 2 * 2);
  EXPECT_EQ(fp.bytes_per_token, 73728ull);
}

TEST(ModelConfig, ExplicitHeadDimWinsOverHiddenOverHeads) {
  // Qwen3-8B: hidden 4096 / 32 heads = 128 happens to match; Gemma 2 9B does not:
  // hidden 3584 / 16 heads = 224, but head_dim is 256.
  const ModelSpec m = parse(R"({"model_type":"gemma2","hidden_size":3584,"num_hidden_layers":42,
    "num_attention_heads":16,"num_key_value_heads":8,"head_dim":256,"vocab_size":256000,
    "intermediate_size":14336,"sliding_window":4096,"torch_dtype":"bfloat16","max_position_embeddings":8192})");
  EXPECT_EQ(m.head_dim, 256u);
  // Gemma 2 alternates: even layers slide, odd layers are global: 21 + 21.
  EXPECT_EQ(m.count(LayerKind::sliding_window), 21u);
  EXPECT_EQ(m.count(LayerKind::full_attention), 21u);
  EXPECT_EQ(m.layers[0].kind, LayerKind::sliding_window);
  EXPECT_EQ(m.layers[0].window, 4096u);
  EXPECT_EQ(m.layers[1].kind, LayerKind::full_attention);
  // tie_word_embeddings absent: Gemma ties by default, and the note says so.
  EXPECT_TRUE(m.tie_word_embeddings);
  bool noted = false;
  for (const auto& n : m.notes) noted |= n.find("tie_word_embeddings absent") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(ModelConfig, Gemma3NestedTextConfigAndPattern) {
  const ModelSpec m = parse(R"({"architectures":["Gemma3ForConditionalGeneration"],"model_type":"gemma3",
    "torch_dtype":"bfloat16","text_config":{"model_type":"gemma3_text","hidden_size":5376,"num_hidden_layers":62,
    "num_attention_heads":32,"num_key_value_heads":16,"head_dim":128,"vocab_size":262208,"intermediate_size":21504,
    "sliding_window":1024,"sliding_window_pattern":6,"max_position_embeddings":131072,
    "rope_scaling":{"rope_type":"linear","factor":8.0}}})");
  // Layers 6, 12, ..., 60 (1-based multiples of 6) are global: floor(62 / 6) = 10.
  EXPECT_EQ(m.count(LayerKind::full_attention), 10u);
  EXPECT_EQ(m.count(LayerKind::sliding_window), 52u);
  EXPECT_EQ(m.layers[5].kind, LayerKind::full_attention);
  EXPECT_EQ(m.rope_scaling.type, "linear");
  // vLLM does not multiply Gemma 3's length by the rope factor.
  EXPECT_EQ(derived_max_model_len(m), 131072u);
}

TEST(ModelConfig, MistralSlidesOnEveryLayer) {
  const ModelSpec m = parse(R"({"model_type":"mistral","hidden_size":4096,"num_hidden_layers":32,
    "num_attention_heads":32,"num_key_value_heads":8,"vocab_size":32000,"intermediate_size":14336,
    "sliding_window":4096,"max_position_embeddings":32768,"torch_dtype":"bfloat16"})");
  EXPECT_EQ(m.count(LayerKind::sliding_window), 32u);
  const auto fp = token_footprint(m, resolve_kv_types(m, "auto"), 1);
  // Once windows are full no layer grows: 0 B per further token; while they
  // fill every layer adds 32 x 8 x 128 x 2 x 2 = 131,072 B.
  EXPECT_EQ(fp.bytes_per_token, 0u);
  EXPECT_EQ(fp.bytes_per_token_all_layers, 32ull * 8 * 128 * 2 * 2);
}

TEST(ModelConfig, Qwen2SlidingWindowOffUnlessAsked) {
  const ModelSpec m = parse(R"({"model_type":"qwen2","hidden_size":3584,"num_hidden_layers":28,
    "num_attention_heads":28,"num_key_value_heads":4,"vocab_size":152064,"intermediate_size":18944,
    "sliding_window":131072,"use_sliding_window":false,"max_window_layers":28,"torch_dtype":"bfloat16",
    "max_position_embeddings":32768})");
  EXPECT_EQ(m.count(LayerKind::full_attention), 28u);
  // 28 layers x 4 KV heads x 128 (3584 / 28) x 2 x 2 = 57,344 B (formulas.md vector).
  EXPECT_EQ(token_footprint(m, resolve_kv_types(m, "auto"), 1).bytes_per_token, 57344u);
}

TEST(ModelConfig, LayerTypesListForGptOss) {
  std::string types;
  for (int i = 0; i < 24; ++i) types += std::string(i ? "," : "") + (i % 2 == 0 ? "\"sliding_attention\"" : "\"full_attention\"");
  const ModelSpec m = parse(R"({"model_type":"gpt_oss","hidden_size":2880,"num_hidden_layers":24,
    "num_attention_heads":64,"num_key_value_heads":8,"head_dim":64,"vocab_size":201088,"intermediate_size":2880,
    "num_local_experts":32,"num_experts_per_tok":4,"sliding_window":128,"torch_dtype":"bfloat16",
    "max_position_embeddings":131072,"quantization_config":{"quant_method":"mxfp4"},"layer_types":[)" + types + "]}");
  EXPECT_EQ(m.count(LayerKind::sliding_window), 12u);
  EXPECT_EQ(m.count(LayerKind::full_attention), 12u);
  EXPECT_EQ(m.layers[0].window, 128u);
  EXPECT_EQ(m.moe.num_experts, 32u);
  EXPECT_DOUBLE_EQ(m.quantization.bits_per_weight, 4.25);
  // Grows per token: 12 full layers x 8 x 64 x 2 x 2 = 24,576 B.
  EXPECT_EQ(token_footprint(m, resolve_kv_types(m, "auto"), 1).bytes_per_token, 12ull * 8 * 64 * 2 * 2);
}

TEST(ModelConfig, DeepSeekMlaLatent) {
  const ModelSpec m = parse(R"({"model_type":"deepseek_v3","hidden_size":7168,"num_hidden_layers":61,
    "num_attention_heads":128,"num_key_value_heads":128,"vocab_size":129280,"intermediate_size":18432,
    "kv_lora_rank":512,"q_lora_rank":1536,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,
    "n_routed_experts":256,"num_experts_per_tok":8,"n_shared_experts":1,"moe_intermediate_size":2048,
    "first_k_dense_replace":3,"torch_dtype":"bfloat16","max_position_embeddings":163840,
    "rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":4096}})");
  EXPECT_EQ(m.count(LayerKind::mla), 61u);
  EXPECT_EQ(m.layers[0].head_dim_k, 512u + 64u);
  const auto fp = token_footprint(m, resolve_kv_types(m, "auto"), 1);
  // 61 layers x (512 + 64) x 2 B = 70,272 B per token.
  EXPECT_EQ(fp.bytes_per_token, 61ull * 576 * 2);
  // The latent is replicated under TP: TP 8 holds the same bytes per rank.
  EXPECT_EQ(token_footprint(m, resolve_kv_types(m, "auto"), 8).bytes_per_token, 61ull * 576 * 2);
  // fp8_ds_mla: 656 B per layer.
  EXPECT_EQ(token_footprint(m, resolve_kv_types(m, "fp8_ds_mla"), 1).bytes_per_token, 61ull * 656);
  // yarn: original 4096 x 40 = 163,840.
  EXPECT_EQ(derived_max_model_len(m), 4096ull * 40);
}

TEST(ModelConfig, JambaAttentionPeriodAndMambaState) {
  const ModelSpec m = parse(R"({"model_type":"jamba","hidden_size":4096,"num_hidden_layers":32,
    "num_attention_heads":32,"num_key_value_heads":8,"vocab_size":65536,"intermediate_size":14336,
    "attn_layer_period":8,"attn_layer_offset":4,"mamba_d_state":16,"mamba_d_conv":4,"mamba_expand":2,
    "num_experts":16,"num_experts_per_tok":2,"expert_layer_period":2,"expert_layer_offset":1,
    "torch_dtype":"bfloat16","max_position_embeddings":262144})");
  // Layers 4, 12, 20, 28 are attention: 32 / 8 = 4.
  EXPECT_EQ(m.count(LayerKind::full_attention), 4u);
  EXPECT_EQ(m.count(LayerKind::recurrent), 28u);
  ASSERT_TRUE(m.recurrent.has_value());
  EXPECT_EQ(m.recurrent->kind, RecurrentKind::mamba1);
  // Mamba1 state, d_inner = 2 x 4096 = 8192: conv (4 - 1) x 8192 x 2 B = 49,152;
  // ssm 8192 x 16 x 2 B (bf16: no mamba_ssm_dtype) = 262,144.
  const auto state = recurrent_state_bytes(*m.recurrent, 1);
  EXPECT_EQ(state.conv, 3ull * 8192 * 2);
  EXPECT_EQ(state.ssm, 8192ull * 16 * 2);
  EXPECT_TRUE(m.is_hybrid());
}

TEST(ModelConfig, GatedDeltaNetStateQwen36Shape) {
  // The hybrid of docs/reference/cliff.md: 64 layers, every 4th full attention,
  // head_dim 256, 24 Q / 4 KV heads; gated delta-net 16 key heads x 128,
  // 48 value heads x 128, conv kernel 4, ssm state in float32.
  const ModelSpec m = parse(R"({"model_type":"qwen3_next","hidden_size":5120,"num_hidden_layers":64,
    "num_attention_heads":24,"num_key_value_heads":4,"head_dim":256,"vocab_size":248320,"intermediate_size":17408,
    "full_attention_interval":4,"linear_key_head_dim":128,"linear_num_key_heads":16,"linear_value_head_dim":128,
    "linear_num_value_heads":48,"linear_conv_kernel_dim":4,"mamba_ssm_dtype":"float32","torch_dtype":"bfloat16",
    "max_position_embeddings":262144})");
  EXPECT_EQ(m.count(LayerKind::full_attention), 16u);
  EXPECT_EQ(m.count(LayerKind::recurrent), 48u);
  // TP 2: conv_dim = 128 x 16 x 2 + 128 x 48 = 10,240; per rank 5,120 x (4 - 1) x 2 B = 30,720.
  // ssm (48 / 2) x 128 x 128 x 4 B = 1,572,864.
  const auto state = recurrent_state_bytes(*m.recurrent, 2);
  EXPECT_EQ(state.conv, 5120ull * 3 * 2);
  EXPECT_EQ(state.ssm, 24ull * 128 * 128 * 4);
  // KV per rank: 16 layers x (4 / 2) heads x 256 x 2 x 2 B = 32,768 B per token.
  EXPECT_EQ(token_footprint(m, resolve_kv_types(m, "auto"), 2).bytes_per_token, 16ull * 2 * 256 * 2 * 2);
}

TEST(ModelConfig, NemotronHybridPattern) {
  const ModelSpec m = parse(R"({"model_type":"nemotron_h","hidden_size":4096,"num_hidden_layers":8,
    "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"vocab_size":131072,"intermediate_size":21504,
    "hybrid_override_pattern":"M-M*-M-M","mamba_num_heads":128,"mamba_head_dim":64,"ssm_state_size":128,
    "n_groups":8,"conv_kernel":4,"torch_dtype":"bfloat16","max_position_embeddings":8192})");
  EXPECT_EQ(m.count(LayerKind::recurrent), 4u);
  EXPECT_EQ(m.count(LayerKind::full_attention), 1u);
  EXPECT_EQ(m.count(LayerKind::none), 3u);
  // Mamba2: d_inner 128 x 64 = 8192; conv_dim 8192 + 2 x 8 x 128 = 10,240;
  // conv 10,240 x 3 x 2 B = 61,440; ssm 128 x 64 x 128 x 2 B = 2,097,152.
  const auto state = recurrent_state_bytes(*m.recurrent, 1);
  EXPECT_EQ(state.conv, 10240ull * 3 * 2);
  EXPECT_EQ(state.ssm, 128ull * 64 * 128 * 2);
}

TEST(ModelConfig, Gemma3nSharedKvLayersAllocateNothing) {
  std::string types;
  for (int i = 0; i < 10; ++i) types += std::string(i ? "," : "") + ((i + 1) % 5 == 0 ? "\"full_attention\"" : "\"sliding_attention\"");
  const ModelSpec m = parse(R"({"model_type":"gemma3n","text_config":{"model_type":"gemma3n_text","hidden_size":2048,
    "num_hidden_layers":10,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":256,"vocab_size":262400,
    "intermediate_size":8192,"sliding_window":512,"num_kv_shared_layers":4,"max_position_embeddings":32768,
    "layer_types":[)" + types + R"(]},"torch_dtype":"bfloat16"})");
  // Full layers are 4 and 9 ((i + 1) % 5 == 0). first shared = 10 - 4 = 6.
  // Layers 6, 7, 8 are sliding -> source 5 (the last sliding layer before 6);
  // 9 is full -> source 4 (transformers gemma3n kv_shared_layer_index).
  EXPECT_EQ(m.count(LayerKind::shared_kv), 4u);
  EXPECT_EQ(m.layers[6].kv_source_layer, 5);
  EXPECT_EQ(m.layers[9].kv_source_layer, 4);
  const auto fp = token_footprint(m, resolve_kv_types(m, "auto"), 1);
  // Only layers 0..5 allocate: 6 x 2 x 256 x 2 x 2 B = 12,288 B while windows fill;
  // the one full layer (4) grows: 2 x 256 x 2 x 2 = 2,048 B.
  EXPECT_EQ(fp.bytes_per_token_all_layers, 6ull * 2 * 256 * 2 * 2);
  EXPECT_EQ(fp.bytes_per_token, 2ull * 256 * 2 * 2);
}

TEST(ModelConfig, Llama4ChunkedRopeLayersGlobalNopeLayers) {
  const ModelSpec m = parse(R"({"model_type":"llama4","text_config":{"model_type":"llama4_text","hidden_size":5120,
    "num_hidden_layers":8,"num_attention_heads":40,"num_key_value_heads":8,"head_dim":128,"vocab_size":202048,
    "intermediate_size":8192,"attention_chunk_size":8192,"no_rope_layers":[1,1,1,0,1,1,1,0],
    "max_position_embeddings":10485760,"num_local_experts":16,"num_experts_per_tok":1,"interleave_moe_layer_step":1},
    "torch_dtype":"bfloat16"})");
  EXPECT_EQ(m.count(LayerKind::chunked_local), 6u);
  EXPECT_EQ(m.count(LayerKind::full_attention), 2u);
  EXPECT_EQ(m.layers[0].window, 8192u);
  EXPECT_EQ(m.nope_layer_count(), 2u);
}

TEST(ModelConfig, RopeScalingLlama3IsNotMultiplied) {
  const ModelSpec m = parse(R"({"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,
    "num_attention_heads":32,"num_key_value_heads":8,"vocab_size":128256,"intermediate_size":14336,
    "max_position_embeddings":131072,"rope_theta":500000.0,"torch_dtype":"bfloat16","tie_word_embeddings":false,
    "rope_scaling":{"rope_type":"llama3","factor":8.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
    "original_max_position_embeddings":8192}})");
  EXPECT_EQ(m.rope_scaling.type, "llama3");
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, 8192u);
  // llama3 keeps max_position_embeddings (already the extended 131,072 = 16 x 8192).
  EXPECT_EQ(derived_max_model_len(m), 131072u);
}

// --- Refusals: each names the field. ---

void expect_input_error(const std::string& text, const std::string& field_fragment) {
  try {
    parse(text);
    FAIL() << "no error for " << text;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(field_fragment), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, RefusesContradictionsAndNonsense) {
  const std::string base = R"("hidden_size":4096,"num_hidden_layers":32,"vocab_size":32000,)";
  expect_input_error("{" + base + R"("num_attention_heads":32,"num_key_value_heads":5})", "num_key_value_heads");
  expect_input_error("{" + base + R"("num_attention_heads":0})", "num_attention_heads");
  expect_input_error("{" + base + R"("num_attention_heads":-4})", "num_attention_heads");
  expect_input_error("{" + base + R"("num_attention_heads":32.5})", "num_attention_heads");
  expect_input_error("{" + base + R"("num_attention_heads":"32"})", "num_attention_heads");
  expect_input_error(R"({"num_hidden_layers":32,"num_attention_heads":32,"vocab_size":32000})", "hidden_size");
  expect_input_error(R"({"hidden_size":4000,"num_hidden_layers":2,"num_attention_heads":3,"vocab_size":10})", "head_dim");
  expect_input_error("{" + base + R"("num_attention_heads":32,"layer_types":["full_attention"]})", "layer_types");
  expect_input_error(R"({"hidden_size":64,"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":10,"layer_types":["warp_attention"]})",
                     "layer_types[0]");
  expect_input_error("{" + base + R"("num_attention_heads":32,"rope_scaling":{"rope_type":"magic","factor":2}})",
                     "rope_scaling.rope_type");
  expect_input_error("{" + base + R"("num_attention_heads":32,"torch_dtype":"float7"})", "torch_dtype");
  expect_input_error("[1,2,3]", "not an object");
  expect_input_error("{\"hidden_size\": 4096,", "not valid JSON");
  expect_input_error("{" + base + R"("num_attention_heads":32,"quantization_config":{"quant_method":"mystery"}})",
                     "quantization_config.quant_method");
}

}  // namespace
}  // namespace kvsight
