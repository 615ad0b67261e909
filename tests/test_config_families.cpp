// Config families read right: each test gives the family's own config.json fields
// and derives the expected layers, KV and recurrent state by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "config_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/catalog.hpp"
#include "kvsight/dtype.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"
#include "test_support.hpp"

namespace kvsight {
namespace {

KvTypes bf16() { return {find_kv_dtype("bf16"), find_kv_dtype("bf16")}; }

// tiiuae/Falcon-H1-0.5B-Instruct: test::kFalconH1Config (config_fixtures.hpp).
const char* const kFalconH1 = test::kFalconH1Config;

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

// zai-org/GLM-4.7-Flash (Glm4MoeLiteForCausalLM; the config as vLLM's tests/config/test_glm4_moe_lite
// writes it): MLA with no head_dim and hidden_size 2048 not a multiple of its 20 heads. The MLA head
// dim is qk_nope + qk_rope (192 + 64 = 256), so hidden / heads is never needed (issue #28: kvsight
// refused it); the cache is one latent of 512 + 64 per token per layer.
const char* kGlm47Flash = R"({"architectures":["Glm4MoeLiteForCausalLM"],"model_type":"glm4_moe_lite",
  "vocab_size":154880,"hidden_size":2048,"intermediate_size":10240,"moe_intermediate_size":1536,
  "num_hidden_layers":47,"num_attention_heads":20,"num_key_value_heads":20,"max_position_embeddings":202752,
  "q_lora_rank":768,"kv_lora_rank":512,"qk_nope_head_dim":192,"qk_rope_head_dim":64,"v_head_dim":256,
  "n_routed_experts":64,"n_shared_experts":1,"num_experts_per_tok":4,"first_k_dense_replace":1,
  "num_nextn_predict_layers":1,"torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, Glm47FlashIsMlaWithoutHeadDim) {
  const ModelSpec m = parse_hf_config(kGlm47Flash, "glm-4.7-flash");
  EXPECT_EQ(m.head_dim, 192u + 64u);
  EXPECT_EQ(m.count(LayerKind::mla), 47u);
  EXPECT_EQ(token_footprint(m, bf16(), 1).bytes_per_token, 47u * (512 + 64) * 2);
  // Without MLA the same shape still needs head_dim (2048 / 20 is not whole): refused naming it.
  std::string dense = kGlm47Flash;
  dense.replace(dense.find("\"kv_lora_rank\":512,"), std::string("\"kv_lora_rank\":512,").size(), "");
  try {
    (void)parse_hf_config(dense, "glm-4.7-flash-without-mla");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
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

// MiniMaxAI/MiniMax-M1 config.json (published fields; attn_type_list is seven 0s
// then a 1, ten times). No torch_dtype: bf16 assumed.
std::string minimax_m1_config() {
  std::string types;
  for (int i = 0; i < 80; ++i) types += std::string(i ? "," : "") + ((i + 1) % 8 == 0 ? "1" : "0");
  return R"({"architectures":["MiniMaxM1ForCausalLM"],"model_type":"minimax_m1","attn_type_list":[)" + types +
         R"(],"head_dim":128,"hidden_act":"silu","hidden_size":6144,"intermediate_size":9216,
  "layernorm_full_attention_alpha":3.5565588200778455,"layernorm_full_attention_beta":1.0,
  "layernorm_linear_attention_alpha":3.5565588200778455,"layernorm_linear_attention_beta":1.0,
  "layernorm_mlp_alpha":3.5565588200778455,"layernorm_mlp_beta":1.0,"max_position_embeddings":10240000,
  "num_attention_heads":64,"num_experts_per_tok":2,"num_hidden_layers":80,"num_key_value_heads":8,
  "num_local_experts":32,"postnorm":true,"rms_norm_eps":1e-05,"rope_theta":10000000,"rotary_dim":64,
  "shared_intermediate_size":0,"shared_moe_mode":"sigmoid","sliding_window":null,
  "tie_word_embeddings":false,"vocab_size":200064})";
}

TEST(ConfigFamilies, MiniMaxM1LightningStateAndSoftmaxKv) {
  const ModelSpec m = parse_hf_config(minimax_m1_config(), "minimax-m1");
  // attn_type_list: 70 lightning (0) layers, 10 softmax (1) layers, every 8th.
  EXPECT_EQ(m.count(LayerKind::recurrent), 70u);
  EXPECT_EQ(m.count(LayerKind::full_attention), 10u);
  EXPECT_EQ(m.layers[7].kind, LayerKind::full_attention);
  EXPECT_EQ(m.layers[0].kind, LayerKind::recurrent);
  ASSERT_TRUE(m.recurrent);
  EXPECT_EQ(m.recurrent->kind, RecurrentKind::lightning);
  const TokenFootprint f = token_footprint(m, bf16(), 1);
  // Softmax layers: 10 x 8 KV heads x 128 x (K + V) x 2 B = 40,960 B per token.
  EXPECT_EQ(f.bytes_per_token, 10u * 8 * 128 * 2 * 2);
  // Lightning state (vLLM linear_attention_state_shape): (64 heads, 128, 128) x 2 B
  // = 2,097,152 B per layer; x 70 = 146,800,640 B per sequence.
  EXPECT_EQ(f.state_bytes_per_sequence, 70ull * 64 * 128 * 128 * 2);
  // TP 8: 64 / 8 = 8 heads of state (262,144 B a layer); KV 8 / 8 = 1 head.
  const TokenFootprint f8 = token_footprint(m, bf16(), 8);
  EXPECT_EQ(f8.state_bytes_per_sequence, 70ull * 8 * 128 * 128 * 2);
  EXPECT_EQ(f8.bytes_per_token, 10u * 1 * 128 * 2 * 2);
  // Parameters. Inner width 64 x 128 = 8192. Lightning layer: qkv 6144 x 3 x 8192,
  // output_gate 6144 x 8192, out_proj 8192 x 6144, norm 8192. Softmax layer: q 6144 x
  // 8192, k + v 6144 x 2 x 1024, o 8192 x 6144. Every layer: 2 norms of 6144, 32
  // experts x 3 x 6144 x 9216, router 6144 x 32. Untied embeddings 2 x 200064 x 6144,
  // final norm 6144.
  const std::uint64_t H = 6144, inner = 8192;
  const std::uint64_t lightning = H * 3 * inner + H * inner + inner * H + inner;
  const std::uint64_t softmax = H * inner + H * 2 * 1024 + inner * H;
  const std::uint64_t common = 2 * H + 32 * 3 * H * 9216 + H * 32;
  EXPECT_EQ(count_params(m), 70 * lightning + 10 * softmax + 80 * common + 2 * 200064 * H + H);
  // vLLM 0.23 (the last to serve it) pads the hybrid pages: state page 2,097,152 B, a
  // softmax layer's page 4,096 B per token, so block = 16 x ceil(2,097,152 / (16 x
  // 4,096)) = 16 x 32 = 512 tokens (HybridAttentionMambaModelConfig, formulas.md).
  EngineOptions o;
  o.engine_version = "0.23.0";
  EXPECT_EQ(vllm_block_size(m, o), 512u);
}

TEST(ConfigFamilies, MiniMaxLayerTypesListIsLightningNotDeltaNet) {
  // transformers' "minimax" writes layer_types; "linear_attention" there is lightning.
  const ModelSpec m = parse_hf_config(
      R"({"model_type":"minimax","hidden_size":512,"num_hidden_layers":4,"num_attention_heads":8,
      "num_key_value_heads":2,"head_dim":64,"intermediate_size":1024,"vocab_size":1000,"torch_dtype":"bfloat16",
      "layer_types":["linear_attention","linear_attention","linear_attention","full_attention"]})",
      "minimax");
  ASSERT_TRUE(m.recurrent);
  EXPECT_EQ(m.recurrent->kind, RecurrentKind::lightning);
  // 3 layers x (8 heads, 64, 64) x 2 B = 3 x 65,536 B.
  EXPECT_EQ(token_footprint(m, bf16(), 1).state_bytes_per_sequence, 3u * 8 * 64 * 64 * 2);
  // attn_type_list entries other than 0 / 1 are refused, naming the entry.
  try {
    parse_hf_config(
        R"({"model_type":"minimax_m1","hidden_size":512,"num_hidden_layers":2,"num_attention_heads":8,
        "num_key_value_heads":2,"head_dim":64,"vocab_size":1000,"attn_type_list":[0,2]})",
        "bad");
    ADD_FAILURE() << "attn_type_list [0, 2] accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("attn_type_list[1]"), std::string::npos) << e.what();
  }
}

// MiniMaxAI/MiniMax-M2: plain GQA with QK norm over all heads, 256 experts.
const char* kMiniMaxM2 = R"({"architectures":["MiniMaxM2ForCausalLM"],"model_type":"minimax_m2",
  "vocab_size":200064,"hidden_size":3072,"intermediate_size":1536,"num_hidden_layers":62,
  "num_attention_heads":48,"num_key_value_heads":8,"head_dim":128,"max_position_embeddings":196608,
  "num_local_experts":256,"num_experts_per_tok":8,"scoring_func":"sigmoid","use_routing_bias":true,
  "use_mtp":true,"num_mtp_modules":3,"mtp_transformer_layers":1,"use_qk_norm":true,"qk_norm_type":"per_layer",
  "rotary_dim":64,"rope_theta":5000000,"shared_intermediate_size":0,"tie_word_embeddings":false,
  "torch_dtype":"bfloat16"})";

TEST(ConfigFamilies, MiniMaxM2IsPlainGqaMoe) {
  const ModelSpec m = parse_hf_config(kMiniMaxM2, "minimax-m2");
  EXPECT_EQ(m.count(LayerKind::full_attention), 62u);
  EXPECT_FALSE(m.recurrent);
  EXPECT_EQ(m.moe.num_experts, 256u);
  EXPECT_EQ(m.moe.experts_per_token, 8u);
  // 62 x 8 x 128 x 2 x 2 B = 253,952 B per token.
  EXPECT_EQ(token_footprint(m, bf16(), 1).bytes_per_token, 62u * 8 * 128 * 2 * 2);
  // Per layer: q 3072 x 6144, k + v 3072 x 2048, o 6144 x 3072, q_norm 6144 + k_norm
  // 1024, 2 norms, 256 experts x 3 x 3072 x 1536, router 3072 x 256.
  const std::uint64_t H = 3072;
  const std::uint64_t layer =
      H * 6144 + H * 2048 + 6144 * H + (6144 + 1024) + 2 * H + 256ull * 3 * H * 1536 + H * 256;
  EXPECT_EQ(count_params(m), 62 * layer + 2ull * 200064 * H + H);
}

// deepseek-ai/DeepSeek-V3.2 config.json fields (DeepseekV32ForCausalLM).
std::string deepseek_v32_config(const std::string& extra = "") {
  return R"({"architectures":["DeepseekV32ForCausalLM"],"model_type":"deepseek_v32","first_k_dense_replace":3,
  "hidden_size":7168,"index_head_dim":128,"index_n_heads":64,"index_topk":2048,"intermediate_size":18432,
  "kv_lora_rank":512,"max_position_embeddings":163840,"moe_intermediate_size":2048,"moe_layer_freq":1,
  "n_routed_experts":256,"n_shared_experts":1,"num_attention_heads":128,"num_experts_per_tok":8,
  "num_hidden_layers":61,"num_key_value_heads":128,"q_lora_rank":1536,"qk_nope_head_dim":128,
  "qk_rope_head_dim":64,"v_head_dim":128,"vocab_size":129280,"torch_dtype":"bfloat16",
  "quantization_config":{"activation_scheme":"dynamic","fmt":"e4m3","quant_method":"fp8",
    "weight_block_size":[128,128]},
  "rope_scaling":{"beta_fast":32,"beta_slow":1,"factor":40,"mscale":1.0,"mscale_all_dim":1.0,
    "original_max_position_embeddings":4096,"type":"yarn"})" +
         extra + "}";
}

TEST(ConfigFamilies, DeepSeekV32IndexerKCacheUnderVllm) {
  const ModelSpec m = parse_hf_config(deepseek_v32_config(), "deepseek-v3.2");
  ASSERT_TRUE(m.indexer);
  EXPECT_EQ(m.indexer->head_dim, 128u);
  EXPECT_EQ(m.indexer->n_heads, 64u);
  EXPECT_EQ(m.indexer->topk, 2048u);
  // index_topk_freq absent (1): every one of the 61 MLA layers has an indexer.
  std::uint32_t with = 0;
  for (const LayerSpec& l : m.layers) with += l.indexer ? 1 : 0;
  EXPECT_EQ(with, 61u);
  // The latent alone (engine-neutral footprint): 61 x (512 + 64) x 2 B = 70,272 B.
  EXPECT_EQ(token_footprint(m, bf16(), 1).bytes_per_token, 61u * 576 * 2);
  // vLLM adds each layer's indexer K cache: uint8, 128 fp8 key bytes + 128 / 128 x 4
  // scale bytes = 132 B; 61 x 132 = 8,052 -> 70,272 + 8,052 = 78,324 B per token.
  EngineOptions o;
  o.context = 4096;
  o.overheads.weights_gib = 1.0;
  const PlanResult r = make_engine("vllm")->plan(m, nullptr, o);
  EXPECT_EQ(r.kv.bytes_per_token, 61u * 576 * 2 + 61u * (128 + 4));
  // Sparse MLA backends take blocks in multiples of 64: 4096 / 64 = 64 blocks, each
  // 64 tokens x 78,324 B = 5,012,736 B (latent and indexer pages of one group).
  EXPECT_EQ(r.kv.block_size, 64u);
  EXPECT_EQ(r.kv.bytes_per_sequence, 64ull * 64 * (61 * 576 * 2 + 61 * 132));
  // Weights count the indexer too: per layer wq_b 1536 x 64 x 128, wk 7168 x 128,
  // weights_proj 7168 x 64, k_norm 2 x 128, over 61 layers.
  std::string without = deepseek_v32_config();
  without.erase(without.find(R"("index_topk":2048,)"), std::string(R"("index_topk":2048,)").size());
  const ModelSpec v3 = parse_hf_config(without, "deepseek-v3.2-without-indexer");
  EXPECT_FALSE(v3.indexer);
  EXPECT_EQ(count_params(m) - count_params(v3), 61ull * (1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128));
}

TEST(ConfigFamilies, DeepSeekV32IndexTopkFreqSkipsLayers) {
  // index_topk_freq 2, offset 2 (default): layer i skips when max(i - 1, 0) % 2 != 0,
  // i.e. i = 2, 4, ..., 60: 30 of 61 skip, 31 keep an indexer (0, 1, 3, 5, ..., 59).
  const ModelSpec m = parse_hf_config(deepseek_v32_config(R"(,"index_topk_freq":2)"), "freq2");
  std::uint32_t with = 0;
  for (const LayerSpec& l : m.layers) with += l.indexer ? 1 : 0;
  EXPECT_EQ(with, 31u);
  EXPECT_TRUE(m.layers[1].indexer);
  EXPECT_FALSE(m.layers[2].indexer);
  EXPECT_TRUE(m.layers[3].indexer);
  EngineOptions o;
  o.context = 64;
  o.overheads.weights_gib = 1.0;
  // 61 x 1,152 + 31 x 132 = 70,272 + 4,092 = 74,364 B per token.
  EXPECT_EQ(make_engine("vllm")->plan(m, nullptr, o).kv.bytes_per_token, 61u * 1152 + 31u * 132);
}

TEST(ConfigFamilies, VisionTowerOfGemma3CountedFromVisionConfig) {
  // The catalog's google/gemma-3-27b-it config: SigLIP hidden 1152, intermediate 4304,
  // 27 layers, patch 14, image 896 (64 x 64 = 4,096 patches), vision_use_head false;
  // text hidden 5376.
  const CatalogModel* entry = find_catalog_model("gemma-3-27b");
  ASSERT_NE(entry, nullptr);
  const ModelSpec m = parse_hf_config(entry->config_text, "gemma-3-27b");
  // Patch conv 3 x 14 x 14 x 1152 + 1152 bias = 678,528; positions 4,096 x 1152 =
  // 4,718,592; per layer 4 x 1152^2 (q k v o) + 4 x 1152 (their biases) + 2 x 1152 x
  // 4304 (fc1, fc2) + 4304 + 1152 (biases) + 4 x 1152 (two LayerNorms) = 15,239,504, x 27
  // = 411,466,608; post LayerNorm 2,304; projector 1152 x 5376 + 1152 = 6,194,304.
  const std::uint64_t h = 1152, i = 4304;
  const std::uint64_t expected =
      (3 * 14 * 14 * h + h) + 4096 * h + 27 * (4 * h * h + 2 * h * i + 9 * h + i) + 2 * h + (h * 5376 + h);
  EXPECT_EQ(expected, 423060336u);
  EXPECT_EQ(m.vision_params, expected);
  // The parameter count grows by exactly that over the same config without vision_config.
  nlohmann::json text_only = nlohmann::json::parse(entry->config_text);
  text_only.erase("vision_config");
  EXPECT_EQ(count_params(m) - count_params(parse_hf_config(text_only.dump(), "text-only")), expected);
  // Bytes at bf16: 2 B each, in the estimate.
  EXPECT_EQ(estimate_weights(m).vision_params, expected);
}

TEST(ConfigFamilies, VisionTowerOfMistral3Pixtral) {
  // mistralai/Mistral-Small-3.1-24B-Instruct-2503: Pixtral hidden 1024, intermediate
  // 4096, 24 layers, patch 14; spatial_merge_size 2, no projector bias; text hidden 5120.
  const std::string config = R"({"architectures":["Mistral3ForConditionalGeneration"],"model_type":"mistral3",
    "image_token_index":10,"multimodal_projector_bias":false,"projector_hidden_act":"gelu","spatial_merge_size":2,
    "text_config":{"model_type":"mistral","hidden_size":5120,"num_hidden_layers":40,"num_attention_heads":32,
      "num_key_value_heads":8,"head_dim":128,"intermediate_size":32768,"vocab_size":131072,
      "max_position_embeddings":131072,"rope_theta":1000000000.0,"sliding_window":null},
    "vision_config":{"model_type":"pixtral","hidden_size":1024,"head_dim":64,"image_size":1540,
      "intermediate_size":4096,"num_attention_heads":16,"num_channels":3,"num_hidden_layers":24,"patch_size":14,
      "rope_theta":10000.0},"vision_feature_layer":-1,"torch_dtype":"bfloat16"})";
  const ModelSpec m = parse_hf_config(config, "mistral3");
  // patch_conv 3 x 14 x 14 x 1024 (no bias) = 602,112; ln_pre 1024; per layer
  // 4 x 1024^2 + 3 x 1024 x 4096 + 2 x 1024 = 16,779,264, x 24 = 402,702,336; projector
  // norm 1024 + merger 4 x 1024 x 1024 + linear_1 1024 x 5120 + linear_2 5120 x 5120.
  const std::uint64_t h = 1024, i = 4096, H = 5120;
  const std::uint64_t expected =
      3 * 14 * 14 * h + h + 24 * (4 * h * h + 3 * h * i + 2 * h) + (h + 4 * h * h + h * H + H * H);
  EXPECT_EQ(expected, 438958080u);
  EXPECT_EQ(m.vision_params, expected);
}

TEST(ConfigFamilies, VisionTowerOfLlama4AndQwen36) {
  // Catalog meta-llama/Llama-4-Scout: vision hidden 1408, intermediate 5632, 34 layers,
  // patch 14, image 336 (24 x 24 + 1 class = 577 positions), projector_input/output_dim
  // 4096, vision_output_dim 4096; text hidden 5120.
  const ModelSpec scout = parse_hf_config(find_catalog_model("llama-4-scout")->config_text, "scout");
  const std::uint64_t h = 1408, i = 5632;
  const std::uint64_t scout_expected = 3 * 14 * 14 * h  // unfold-conv linear, no bias
                                       + h + 577 * h    // class embedding, positions
                                       + 4 * h          // pre / post LayerNorms
                                       + 34 * (4 * h * h + 2 * h * i + 9 * h + i)  // layers
                                       + (i * 4096 + 4096 * 4096)                  // pixel-shuffle MLP
                                       + 4096 * 5120;                              // projector
  EXPECT_EQ(scout.vision_params, scout_expected);
  // Catalog Qwen/Qwen3.6-27B: Qwen3-VL tower, hidden 1152, intermediate 4304, depth 27,
  // patch 16, temporal 2, 2,304 positions, merge 2 (merged width 4 x 1152 = 4,608),
  // out_hidden_size 5120, no deepstack mergers.
  const ModelSpec qwen = parse_hf_config(find_catalog_model("qwen3.6-27b")->config_text, "qwen3.6");
  const std::uint64_t q = 1152, qi = 4304, merged = 4 * 1152;
  const std::uint64_t qwen_expected = (3 * 2 * 16 * 16 * q + q) + 2304 * q +
                                      27 * (4 * q * q + 2 * q * qi + 9 * q + qi) + 2 * q +
                                      (merged * merged + merged + merged * 5120 + 5120);
  EXPECT_EQ(qwen.vision_params, qwen_expected);
}

TEST(ConfigFamilies, VisionConfigWithoutItsSizesIsNotCountedAndSaysSo) {
  // kMistral3's vision_config has no intermediate_size / patch_size: no count, a note.
  const ModelSpec m = parse_hf_config(kMistral3, "mistral3");
  EXPECT_EQ(m.vision_params, 0u);
  bool said = false;
  for (const auto& n : m.notes)
    said = said || n.find("vision_config.intermediate_size is missing") != std::string::npos;
  EXPECT_TRUE(said);
  // A value of the wrong kind is an error naming the field.
  try {
    parse_hf_config(R"({"model_type":"gemma3","text_config":{"model_type":"gemma3_text","hidden_size":256,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"head_dim":64,"vocab_size":100},
      "vision_config":{"model_type":"siglip_vision_model","hidden_size":"big"}})",
                    "bad-vision");
    ADD_FAILURE() << "vision_config.hidden_size \"big\" accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("vision_config.hidden_size"), std::string::npos) << e.what();
  }
}

TEST(ConfigFamilies, SafetensorsVisionTensorsAreCountedAndLabelled) {
  // A Gemma 3 directory: the config (with vision_config) and one safetensors file of two
  // BF16 tensors, the vision tower's 100 elements (200 B) and a decoder tensor's 50 (100 B).
  const std::string dir = test::temp_dir("vision-safetensors");
  test::write_file(dir + "/config.json", find_catalog_model("gemma-3-27b")->config_text);
  const std::string header =
      R"({"model.vision_tower.vision_model.embeddings.patch_embedding.weight":{"dtype":"BF16","shape":[100],)"
      R"("data_offsets":[0,200]},"model.language_model.norm.weight":{"dtype":"BF16","shape":[50],)"
      R"("data_offsets":[200,300]}})";
  std::string file(8, '\0');
  for (int b = 0; b < 8; ++b)
    file[static_cast<std::size_t>(b)] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
  test::write_file(dir + "/model.safetensors", file + header + std::string(300, '\x01'));
  const ModelSpec m = resolve_model(dir);
  ASSERT_TRUE(m.exact_weights);
  EXPECT_EQ(m.exact_weights->bytes, 200u + 100u);  // both tensors count: the file is the checkpoint
  EXPECT_NE(m.exact_weights->method.find("of which 200 B in 1 vision/audio encoder"), std::string::npos)
      << m.exact_weights->method;
  EXPECT_TRUE(is_multimodal_encoder_tensor("visual.blocks.0.attn.qkv.weight"));        // Qwen-VL
  EXPECT_TRUE(is_multimodal_encoder_tensor("multi_modal_projector.linear_1.weight"));  // Mistral 3
  EXPECT_FALSE(is_multimodal_encoder_tensor("model.layers.0.self_attn.q_proj.weight"));
}

TEST(ConfigFamilies, UnknownVisionTowerIsSaidNotGuessed) {
  const ModelSpec m = parse_hf_config(
      R"({"model_type":"llava","text_config":{"model_type":"llama","hidden_size":256,"num_hidden_layers":2,
      "num_attention_heads":4,"num_key_value_heads":4,"intermediate_size":512,"vocab_size":100},
      "vision_config":{"model_type":"clip_vision_model","hidden_size":64}})",
      "llava");
  EXPECT_EQ(m.vision_params, 0u);
  bool said = false;
  for (const auto& n : m.notes) said = said || n.find("clip_vision_model") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace kvsight
