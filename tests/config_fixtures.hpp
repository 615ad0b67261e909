#pragma once
// Real config.json texts shared by several test files (each cites its source).

namespace kvsight::test {

// tiiuae/Falcon-H1-0.5B-Instruct (transformers FalconH1Config docs table: 36 layers, dim
// 1024, 8 attention heads, 2 KV, 24 Mamba heads, head dims 64 / 64, d_state 128).
inline constexpr const char* kFalconH1Config =
    R"({"architectures":["FalconH1ForCausalLM"],"model_type":"falcon_h1",
  "hidden_size":1024,"num_hidden_layers":36,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":64,
  "intermediate_size":2048,"vocab_size":32784,"max_position_embeddings":16384,"rope_theta":100000000000.0,
  "mamba_d_ssm":1536,"mamba_n_heads":24,"mamba_d_head":64,"mamba_n_groups":1,"mamba_d_state":128,
  "mamba_d_conv":4,"mamba_expand":2,"mamba_chunk_size":128,"mamba_conv_bias":true,"mamba_proj_bias":false,
  "mamba_rms_norm":false,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})";

}  // namespace kvsight::test
