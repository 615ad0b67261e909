// Config families read right: each test gives the family's own config.json fields
// and derives the expected layers, KV and recurrent state by hand.
#include <gtest/gtest.h>

#include <string>

#include "kvsight/dtype.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"

namespace kvsight {
namespace {

KvTypes bf16() { return {find_kv_dtype("bf16"), find_kv_dtype("bf16")}; }

// tiiuae/Falcon-H1-0.5B-Instruct (transformers FalconH1Config docs table: 36 layers,
// dim 1024, 8 attention heads, 2 KV, 24 Mamba heads, head dims 64 / 64, d_state 128).
const char* kFalconH1 = R"({"architectures":["FalconH1ForCausalLM"],"model_type":"falcon_h1",
  "hidden_size":1024,"num_hidden_layers":36,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":64,
  "intermediate_size":2048,"vocab_size":32784,"max_position_embeddings":16384,"rope_theta":100000000000.0,
  "mamba_d_ssm":1536,"mamba_n_heads":24,"mamba_d_head":64,"mamba_n_groups":1,"mamba_d_state":128,
  "mamba_d_conv":4,"mamba_expand":2,"mamba_chunk_size":128,"mamba_conv_bias":true,"mamba_proj_bias":false,
  "mamba_rms_norm":false,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, FalconH1HasAttentionAndMamba2InEveryLayer) {
  const ModelSpec m = parse_hf_config(kFalconH1, "falcon-h1");
  // 36 decoder layers, each an attention entry and its parallel Mamba2 entry.
  EXPECT_EQ(m.count(LayerKind::full_attention), 36u);
  EXPECT_EQ(m.count(LayerKind::recurrent), 36u);
  ASSERT_TRUE(m.recurrent);
  EXPECT_EQ(m.recurrent->kind, RecurrentKind::mamba2);
  EXPECT_EQ(m.recurrent->d_inner, 1536u);  // mamba_d_ssm = 24 heads x 64
  const TokenFootprint f = token_footprint(m, bf16(), 1);
  // KV: 36 layers x 2 KV heads x 64 x (K + V) x 2 B = 36 x 512 = 18,432 B per token.
  EXPECT_EQ(f.bytes_per_token, 36u * 2 * 64 * 2 * 2);
  // State per layer (vLLM mamba2 shapes, bf16): conv (1536 + 2 x 1 x 128) x (4 - 1)
  // x 2 B = 10,752; ssm 24 x 64 x 128 x 2 B = 393,216; 403,968 x 36 = 14,542,848 B.
  EXPECT_EQ(f.state_bytes_per_sequence, 36u * ((1536u + 2 * 128) * 3 * 2 + 24u * 64 * 128 * 2));
  // Parameters count the Mamba half too: per layer attention q 1024x512, k,v 2 x 1024 x 128,
  // o 512x1024; Mamba2 in_proj 1024 x (2 x 1536 + 2 x 128 + 24), conv (1536 + 256) x 5,
  // 3 x 24 + 1536 small vectors, out_proj 1536 x 1024; MLP 3 x 1024 x 2048; 2 norms.
  const std::uint64_t attention = 1024ull * 512 + 2ull * 1024 * 128 + 512ull * 1024;
  const std::uint64_t mamba =
      1024ull * (2 * 1536 + 2 * 128 + 24) + (1536ull + 256) * 5 + 3 * 24 + 1536 + 1536ull * 1024;
  const std::uint64_t layer = attention + mamba + 3ull * 1024 * 2048 + 2 * 1024;
  EXPECT_EQ(count_params(m), 36 * layer + 2ull * 32784 * 1024 + 1024);
}

// ibm-granite/granite-4.0-micro: a dense Granite 4 (GraniteMoeHybrid with
// num_local_experts 0 and only attention layers).
const char* kGranite4Micro =
    R"({"architectures":["GraniteMoeHybridForCausalLM"],"model_type":"granitemoehybrid",
  "hidden_size":2560,"num_hidden_layers":4,"num_attention_heads":40,"num_key_value_heads":8,
  "intermediate_size":8192,"shared_intermediate_size":8192,"num_local_experts":0,"num_experts_per_tok":0,
  "layer_types":["attention","attention","attention","attention"],"vocab_size":100352,
  "max_position_embeddings":131072,"position_embedding_type":"rope","rope_theta":10000000,
  "mamba_d_conv":4,"mamba_d_head":64,"mamba_d_state":256,"mamba_expand":2,"mamba_n_groups":1,"mamba_n_heads":128,
  "tie_word_embeddings":true,"torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, Granite4DenseWithZeroExpertsIsDense) {
  const ModelSpec m = parse_hf_config(kGranite4Micro, "granite-4.0-micro");
  EXPECT_FALSE(m.moe.is_moe());
  EXPECT_FALSE(m.recurrent);  // the mamba_* fields describe no layer
  // 4 layers x 8 KV heads x (2560 / 40 = 64) x 2 x 2 B = 8,192 B per token.
  EXPECT_EQ(token_footprint(m, bf16(), 1).bytes_per_token, 4u * 8 * 64 * 2 * 2);
}

// ibm-granite/granite-4.0-h-tiny shape, 10 of its layers: Mamba2 with one
// attention layer, MoE with 64 experts.
const char* kGranite4HTiny =
    R"({"architectures":["GraniteMoeHybridForCausalLM"],"model_type":"granitemoehybrid",
  "hidden_size":1536,"num_hidden_layers":10,"num_attention_heads":12,"num_key_value_heads":4,
  "intermediate_size":512,"shared_intermediate_size":1024,"num_local_experts":64,"num_experts_per_tok":6,
  "layer_types":["mamba","mamba","mamba","mamba","mamba","attention","mamba","mamba","mamba","mamba"],
  "mamba_d_conv":4,"mamba_d_head":64,"mamba_d_state":128,"mamba_expand":2,"mamba_n_groups":1,"mamba_n_heads":48,
  "vocab_size":100352,"max_position_embeddings":131072,"tie_word_embeddings":true,"torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, Granite4HybridMambaStateAndMoe) {
  const ModelSpec m = parse_hf_config(kGranite4HTiny, "granite-4.0-h-tiny");
  EXPECT_EQ(m.count(LayerKind::recurrent), 9u);
  EXPECT_EQ(m.layers[5].kind, LayerKind::full_attention);
  EXPECT_EQ(m.moe.num_experts, 64u);
  const TokenFootprint f = token_footprint(m, bf16(), 1);
  // One attention layer: 4 x (1536 / 12 = 128) x 2 x 2 B = 2,048 B per token.
  EXPECT_EQ(f.bytes_per_token, 4u * 128 * 2 * 2);
  // Mamba2, d_inner 48 x 64 = 3,072: conv (3072 + 2 x 128) x 3 x 2 B = 19,968; ssm
  // 48 x 64 x 128 x 2 B = 786,432; x 9 layers.
  EXPECT_EQ(f.state_bytes_per_sequence, 9u * ((3072u + 256) * 3 * 2 + 48u * 64 * 128 * 2));
}

// LiquidAI/LFM2-1.2B: 16 layers, 10 short-convolution blocks and 6 attention.
const char* kLfm2 = R"({"architectures":["Lfm2ForCausalLM"],"model_type":"lfm2","hidden_size":2048,
  "num_hidden_layers":16,"num_attention_heads":32,"num_key_value_heads":8,"conv_L_cache":3,"conv_bias":false,
  "layer_types":["conv","conv","full_attention","conv","conv","full_attention","conv","conv","full_attention",
                 "conv","full_attention","conv","full_attention","conv","full_attention","conv"],
  "vocab_size":65536,"intermediate_size":12288,"max_position_embeddings":128000,"torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, Lfm2ShortConvState) {
  const ModelSpec m = parse_hf_config(kLfm2, "lfm2");
  EXPECT_EQ(m.count(LayerKind::recurrent), 10u);
  EXPECT_EQ(m.recurrent->kind, RecurrentKind::short_conv);
  const TokenFootprint f = token_footprint(m, bf16(), 1);
  // 6 attention layers x 8 x (2048 / 32 = 64) x 2 x 2 B = 12,288 B per token.
  EXPECT_EQ(f.bytes_per_token, 6u * 8 * 64 * 2 * 2);
  // Short conv (vLLM short_conv_state_shape): hidden x (L_cache - 1) x 2 B = 8,192 per layer.
  EXPECT_EQ(f.state_bytes_per_sequence, 10u * 2048 * 2 * 2);
}

// moonshotai/Kimi-K2-Instruct (DeepSeek V3 architecture): MLA latent 512 + 64.
const char* kKimiK2 = R"({"architectures":["DeepseekV3ForCausalLM"],"model_type":"kimi_k2","hidden_size":7168,
  "num_hidden_layers":61,"num_attention_heads":64,"num_key_value_heads":64,"kv_lora_rank":512,"q_lora_rank":1536,
  "qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,"n_routed_experts":384,"num_experts_per_tok":8,
  "n_shared_experts":1,"moe_intermediate_size":2048,"intermediate_size":18432,"first_k_dense_replace":1,
  "vocab_size":163840,"max_position_embeddings":131072,"torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, KimiK2IsMla) {
  const ModelSpec m = parse_hf_config(kKimiK2, "kimi-k2");
  EXPECT_EQ(m.count(LayerKind::mla), 61u);
  // One latent per token per layer: (512 + 64) x 2 B = 1,152; 61 layers = 70,272 B.
  EXPECT_EQ(token_footprint(m, bf16(), 1).bytes_per_token, 61u * 576 * 2);
  EXPECT_EQ(m.moe.num_experts, 384u);
}

// mistralai/Mistral-Small-3.1-24B: Mistral3ForConditionalGeneration with the
// decoder in text_config (head_dim 128 given, not 5120 / 32 = 160).
const char* kMistral3 = R"({"architectures":["Mistral3ForConditionalGeneration"],"model_type":"mistral3",
  "text_config":{"model_type":"mistral","hidden_size":5120,"num_hidden_layers":40,"num_attention_heads":32,
    "num_key_value_heads":8,"head_dim":128,"intermediate_size":32768,"vocab_size":131072,
    "max_position_embeddings":131072,"rope_theta":1000000000.0,"sliding_window":null},
  "vision_config":{"model_type":"pixtral","hidden_size":1024,"num_hidden_layers":24},
  "torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, Mistral3TextPartFromTextConfig) {
  const ModelSpec m = parse_hf_config(kMistral3, "mistral3");
  EXPECT_EQ(m.num_layers(), 40u);
  EXPECT_EQ(m.head_dim, 128u);
  EXPECT_EQ(m.count(LayerKind::sliding_window), 0u);  // sliding_window null: full attention
  // 40 x 8 x 128 x 2 x 2 B = 163,840 B per token.
  EXPECT_EQ(token_footprint(m, bf16(), 1).bytes_per_token, 40u * 8 * 128 * 2 * 2);
}

}  // namespace
}  // namespace kvsight
