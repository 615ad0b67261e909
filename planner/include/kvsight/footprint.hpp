#pragma once
// Per-layer KV and state sizes: the arithmetic every engine's rules build on.
// Source: docs/reference/formulas.md ("Per token, per layer", "KV dtypes").
#include <cstdint>
#include <vector>

#include "kvsight/dtype.hpp"
#include "kvsight/model_spec.hpp"

namespace kvsight {

// The KV element types in use: one for K, one for V (llama.cpp can differ).
struct KvTypes {
  KvDtype k;
  KvDtype v;
  bool fp8_ds_mla = false;  // vLLM "fp8_ds_mla": 656 B per MLA latent (formulas.md)
};

// Resolves --kv-cache-dtype ("auto" = the model dtype, also for an fp8 checkpoint:
// vllm/config/cache.py) into KvTypes.
KvTypes resolve_kv_types(const ModelSpec& model, const std::string& kv_cache_dtype);

// KV heads one rank holds under tensor parallelism: max(1, kv_heads / tp), i.e.
// replicated when tp > kv_heads (vLLM QKVParallelLinear; gates.md "Engine constraints").
// MLA latents are replicated on every rank.
std::uint32_t kv_heads_per_rank(const LayerSpec& layer, std::uint32_t tp);

// Bytes one token adds to one layer's KV on one rank (0 for recurrent, shared, none).
std::uint64_t layer_kv_bytes_per_token(const LayerSpec& layer, const KvTypes& types, std::uint32_t tp);

// Constant per-sequence state of one recurrent layer on one rank, vLLM shapes:
// conv state in conv_dtype plus ssm state in ssm_dtype.
struct RecurrentStateBytes {
  std::uint64_t conv = 0;
  std::uint64_t ssm = 0;
  std::uint64_t total() const { return conv + ssm; }
};
RecurrentStateBytes recurrent_state_bytes(const RecurrentSpec& spec, std::uint32_t tp);

// Which layers pipeline stage `stage` of `pp` holds: vLLM's get_pp_indices
// (vllm/distributed/utils.py) splits layers evenly, the remainder going to the
// last stages... see footprint.cpp for the rule followed.
std::vector<std::uint32_t> pp_stage_layers(std::uint32_t num_layers, std::uint32_t pp, std::uint32_t stage);

// Context-independent summary for one rank (tp, pp stage).
struct TokenFootprint {
  // Bytes each further token adds once every window is full: full-attention and
  // MLA layers (the part that grows with context).
  std::uint64_t bytes_per_token = 0;
  // Bytes a token adds while every layer still holds it (windows not yet full).
  std::uint64_t bytes_per_token_all_layers = 0;
  // Constant recurrent state per sequence.
  std::uint64_t state_bytes_per_sequence = 0;
};
TokenFootprint token_footprint(const ModelSpec& model, const KvTypes& types, std::uint32_t tp,
                               std::uint32_t pp = 1, std::uint32_t stage = 0);

}  // namespace kvsight
