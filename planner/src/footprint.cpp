// Per-layer KV and recurrent-state sizes on one rank. Sources:
// docs/reference/formulas.md; vllm/model_executor/layers/mamba/mamba_utils.py
// (MambaStateShapeCalculator), vllm/distributed/utils.py (get_pp_indices).
#include "kvsight/footprint.hpp"

#include <algorithm>

#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

KvTypes resolve_kv_types(const ModelSpec& model, const std::string& kv_cache_dtype) {
  KvTypes types;
  if (kv_cache_dtype.empty() || kv_cache_dtype == "auto") {
    // vllm/config/cache.py: "auto" uses the model dtype, even for an fp8 checkpoint.
    types.k = types.v = find_kv_dtype(model.dtype, "--kv-cache-dtype");
    return types;
  }
  if (kv_cache_dtype == "fp8_ds_mla") {
    if (!model.mla) throw InputError("--kv-cache-dtype", "fp8_ds_mla applies only to MLA models (DeepSeek-V3 family)");
    types.k = types.v = find_kv_dtype("fp8_e4m3");
    types.fp8_ds_mla = true;
    return types;
  }
  types.k = types.v = find_kv_dtype(kv_cache_dtype, "--kv-cache-dtype");
  return types;
}

std::uint32_t kv_heads_per_rank(const LayerSpec& layer, std::uint32_t tp) {
  if (tp == 0) throw InputError("--tensor-parallel-size", "is 0; a positive integer is required");
  if (layer.kind == LayerKind::mla) return 1;  // the latent is replicated on every rank
  // max(1, kv_heads / tp): KV heads are replicated when tp > kv_heads
  // (vllm/model_executor/layers/linear.py QKVParallelLinear num_kv_head_replicas).
  return std::max<std::uint32_t>(1, layer.kv_heads / tp);
}

std::uint64_t layer_kv_bytes_per_token(const LayerSpec& layer, const KvTypes& types, std::uint32_t tp) {
  if (!layer.allocates_kv()) return 0;
  if (layer.kind == LayerKind::mla) {
    // fp8_ds_mla: 512 fp8 latent + 4 fp32 scales + 64 bf16 rope = 656 B
    // (vllm/v1/attention/backends/mla/flashmla_sparse.py; formulas.md).
    if (types.fp8_ds_mla) return 656;
    return types.k.row_bytes(layer.head_dim_k);
  }
  const std::uint64_t heads = kv_heads_per_rank(layer, tp);
  const std::uint64_t per_head = checked_add(types.k.row_bytes(layer.head_dim_k), types.v.row_bytes(layer.head_dim_v),
                                             "kv bytes per head");
  return checked_mul(heads, per_head, "kv bytes per token per layer");
}

RecurrentStateBytes recurrent_state_bytes(const RecurrentSpec& spec, std::uint32_t tp) {
  if (tp == 0) throw InputError("--tensor-parallel-size", "is 0; a positive integer is required");
  const std::uint64_t conv_b = torch_dtype_bytes(spec.conv_dtype, "conv state dtype");
  const std::uint64_t ssm_b = torch_dtype_bytes(spec.ssm_dtype, "mamba_ssm_dtype");
  const std::uint64_t conv_cols = spec.d_conv > 0 ? spec.d_conv - 1 : 0;
  RecurrentStateBytes out;
  switch (spec.kind) {
    case RecurrentKind::mamba1:
      // conv (d_conv - 1, I / tp), ssm (I / tp, d_state).
      out.conv = checked_mul(checked_mul(conv_cols, ceil_div(spec.d_inner, tp), "conv state"), conv_b, "conv state");
      out.ssm = checked_mul(checked_mul(ceil_div(spec.d_inner, tp), spec.d_state, "ssm state"), ssm_b, "ssm state");
      break;
    case RecurrentKind::mamba2: {
      // Groups not divisible by tp are replicated up to tp
      // (mamba_utils.py extra_groups_for_head_shards).
      const std::uint64_t groups = spec.n_groups % tp == 0 ? spec.n_groups : tp;
      const std::uint64_t conv_dim = spec.d_inner + 2 * groups * spec.d_state;
      out.conv = checked_mul(checked_mul(ceil_div(conv_dim, tp), conv_cols, "conv state"), conv_b, "conv state");
      out.ssm = checked_mul(
          checked_mul(checked_mul(ceil_div(spec.n_heads, tp), spec.head_dim, "ssm state"), spec.d_state, "ssm state"),
          ssm_b, "ssm state");
      break;
    }
    case RecurrentKind::gated_delta_net: {
      // conv_dim = dk nk 2 + dv nv; conv (conv_dim / tp, k - 1); ssm (nv / tp, dv, dk)
      // (mamba_utils.py gated_delta_net_state_shape).
      const std::uint64_t conv_dim =
          spec.key_head_dim * spec.num_key_heads * 2 + spec.value_head_dim * spec.num_value_heads;
      out.conv = checked_mul(checked_mul(ceil_div(conv_dim, tp), conv_cols, "conv state"), conv_b, "conv state");
      out.ssm = checked_mul(checked_mul(checked_mul(ceil_div(spec.num_value_heads, tp), spec.value_head_dim, "ssm state"),
                                        spec.key_head_dim, "ssm state"),
                            ssm_b, "ssm state");
      break;
    }
    case RecurrentKind::short_conv:
      // LFM2 short convolution: (hidden / tp, L_cache - 1) (mamba_utils.py short_conv_state_shape).
      out.conv = checked_mul(checked_mul(ceil_div(spec.d_inner, tp), conv_cols, "conv state"), conv_b, "conv state");
      break;
    case RecurrentKind::lightning:
      // MiniMax lightning attention: one (heads / tp, head_dim, head_dim) state, no conv
      // (mamba_utils.py linear_attention_state_shape, vLLM 0.23 and 0.33; model-inputs.md).
      out.ssm = checked_mul(checked_mul(checked_mul(ceil_div(spec.n_heads, tp), spec.head_dim, "ssm state"),
                                        spec.head_dim, "ssm state"),
                            ssm_b, "ssm state");
      break;
  }
  return out;
}

std::vector<std::uint32_t> pp_stage_layers(std::uint32_t num_layers, std::uint32_t pp, std::uint32_t stage) {
  if (pp == 0) throw InputError("--pipeline-parallel-size", "is 0; a positive integer is required");
  if (pp > num_layers)
    throw InputError("--pipeline-parallel-size", std::to_string(pp) + " exceeds the model's " + std::to_string(num_layers) +
                                                     " layers");
  if (stage >= pp) throw InputError("pipeline stage", std::to_string(stage) + " is not below pp " + std::to_string(pp));
  // vllm/distributed/utils.py get_pp_indices: num_layers // pp each; the remainder
  // goes one layer each to the stages before the last, counting back from the
  // second-to-last (the last stage also holds the LM head).
  std::vector<std::uint32_t> sizes(pp, num_layers / pp);
  const std::uint32_t remaining = num_layers % pp;
  for (std::uint32_t i = 2; i < remaining + 2; ++i) sizes[pp - i] += 1;
  std::uint32_t start = 0;
  for (std::uint32_t s = 0; s < stage; ++s) start += sizes[s];
  std::vector<std::uint32_t> layers(sizes[stage]);
  for (std::uint32_t i = 0; i < sizes[stage]; ++i) layers[i] = start + i;
  return layers;
}

TokenFootprint token_footprint(const ModelSpec& model, const KvTypes& types, std::uint32_t tp, std::uint32_t pp,
                               std::uint32_t stage) {
  TokenFootprint out;
  for (std::uint32_t index : pp_stage_layers(model.num_layers(), pp, stage)) {
    const LayerSpec& layer = model.layers[index];
    const std::uint64_t per_token = layer_kv_bytes_per_token(layer, types, tp);
    out.bytes_per_token_all_layers = checked_add(out.bytes_per_token_all_layers, per_token, "kv bytes per token");
    if (layer.kind == LayerKind::full_attention || layer.kind == LayerKind::mla)
      out.bytes_per_token = checked_add(out.bytes_per_token, per_token, "kv bytes per token");
    if (layer.kind == LayerKind::recurrent && model.recurrent)
      out.state_bytes_per_sequence = checked_add(out.state_bytes_per_sequence,
                                                 recurrent_state_bytes(*model.recurrent, tp).total(), "state bytes");
  }
  return out;
}

}  // namespace kvsight
