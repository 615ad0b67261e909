#pragma once
// Model shapes built by hand for the engine-budget tests, shared so each test
// file states only the arithmetic it checks. The shapes are the published ones
// (formulas.md "Published vectors"); nothing here comes from a config reader.
#include <string>
#include <vector>

#include "kvsight/model.hpp"

namespace kvsight {

inline LayerSpec attn(LayerKind kind, std::uint32_t kv_heads, std::uint32_t head_dim, std::uint64_t window = 0) {
  LayerSpec l;
  l.kind = kind;
  l.kv_heads = kv_heads;
  l.head_dim_k = head_dim;
  l.head_dim_v = head_dim;
  l.window = window;
  return l;
}

// Llama-3.1-8B: 32 layers, 8 KV heads, head_dim 128, bf16, 131072 positions.
inline ModelSpec llama31_8b() {
  ModelSpec m;
  m.id = "llama-3.1-8b-test";
  m.architecture = "LlamaForCausalLM";
  m.model_type = "llama";
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.intermediate_size = 14336;
  m.vocab_size = 128256;
  m.dtype = "bf16";
  m.max_position_embeddings = 131072;
  m.layers.assign(32, attn(LayerKind::full_attention, 8, 128));
  return m;
}

// DeepSeek-V3: 61 MLA layers caching one latent of kv_lora_rank 512 +
// qk_rope_head_dim 64 per token (K only).
inline ModelSpec deepseek_v3_shape() {
  ModelSpec m;
  m.id = "deepseek-v3-test";
  m.model_type = "deepseek_v3";
  m.hidden_size = 7168;
  m.num_attention_heads = 128;
  m.vocab_size = 129280;
  m.intermediate_size = 18432;
  m.dtype = "bf16";
  m.max_position_embeddings = 163840;
  m.mla = MlaSpec{512, 1536, 64, 128, 128};  // kv_lora_rank, q_lora_rank, rope, nope, v_head_dim
  LayerSpec l;
  l.kind = LayerKind::mla;
  l.kv_heads = 1;
  l.head_dim_k = 512 + 64;  // kv_lora_rank + qk_rope_head_dim
  l.head_dim_v = 0;
  m.layers.assign(61, l);
  return m;
}

// Engine log lines, one per line, for substring checks.
inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Qwen3.6-27B shape (docs/reference/cliff.md): 64 layers, every 4th full attention
// (16), 48 gated delta-net layers; attention head_dim 256, 4 KV heads, 24 Q heads;
// linear_key_head_dim 128 x 16 key heads, linear_value_head_dim 128 x 48 value heads,
// conv kernel 4, conv state bf16, mamba_ssm_dtype float32 (Qwen3.5/3.6 configs).
inline ModelSpec qwen36_27b_shape(const std::string& ssm_dtype = "fp32") {
  ModelSpec m;
  m.id = "qwen3.6-27b-test";
  m.model_type = "qwen3_5";
  m.hidden_size = 5120;
  m.num_attention_heads = 24;
  m.num_kv_heads = 4;
  m.head_dim = 256;
  m.intermediate_size = 17408;
  m.vocab_size = 248320;
  m.dtype = "bf16";
  m.max_position_embeddings = 262144;
  RecurrentSpec r;
  r.kind = RecurrentKind::gated_delta_net;
  r.d_conv = 4;
  r.key_head_dim = 128;
  r.num_key_heads = 16;
  r.value_head_dim = 128;
  r.num_value_heads = 48;
  r.conv_dtype = "bf16";
  r.ssm_dtype = ssm_dtype;
  m.recurrent = r;
  for (int i = 0; i < 64; ++i) {
    if (i % 4 == 3) {
      m.layers.push_back(attn(LayerKind::full_attention, 4, 256));
    } else {
      LayerSpec l;
      l.kind = LayerKind::recurrent;
      m.layers.push_back(l);
    }
  }
  return m;
}

}  // namespace kvsight
