// ModelSpec queries (kvsight/model_spec.hpp): names of the layer and state kinds, layer
// counts, the length vLLM derives, and the bounds of a recurrent state.
#include "kvsight/model_spec.hpp"

#include <algorithm>
#include <cmath>

#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::full_attention:
      return "full";
    case LayerKind::sliding_window:
      return "sliding";
    case LayerKind::chunked_local:
      return "chunked";
    case LayerKind::mla:
      return "mla";
    case LayerKind::recurrent:
      return "recurrent";
    case LayerKind::shared_kv:
      return "shared_kv";
    case LayerKind::none:
      return "none";
  }
  return "?";
}

std::string_view to_string(RecurrentKind kind) {
  switch (kind) {
    case RecurrentKind::mamba1:
      return "mamba1";
    case RecurrentKind::mamba2:
      return "mamba2";
    case RecurrentKind::gated_delta_net:
      return "gated_delta_net";
    case RecurrentKind::short_conv:
      return "short_conv";
    case RecurrentKind::lightning:
      return "lightning";
  }
  return "?";
}

std::uint32_t ModelSpec::count(LayerKind kind) const {
  return static_cast<std::uint32_t>(
      std::count_if(layers.begin(), layers.end(), [kind](const LayerSpec& l) { return l.kind == kind; }));
}

std::uint32_t ModelSpec::attention_layer_count() const {
  return static_cast<std::uint32_t>(
      std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.allocates_kv(); }));
}

std::uint32_t ModelSpec::rope_layer_count() const {
  return static_cast<std::uint32_t>(std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) {
    return (l.is_attention() || l.kind == LayerKind::shared_kv) && l.rope;
  }));
}

std::uint32_t ModelSpec::nope_layer_count() const {
  return static_cast<std::uint32_t>(std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) {
    return (l.is_attention() || l.kind == LayerKind::shared_kv) && !l.rope;
  }));
}

bool ModelSpec::is_hybrid() const { return count(LayerKind::recurrent) > 0 && attention_layer_count() > 0; }

std::uint64_t derived_max_model_len(const ModelSpec& model) {
  std::uint64_t length = model.config_max_len != 0 ? model.config_max_len : model.max_position_embeddings;
  const RopeScaling& rs = model.rope_scaling;
  if (!rs.type.empty() && !model.traits.length_includes_rope_scaling && rs.type != "su" &&
      rs.type != "longrope" && rs.type != "llama3") {
    if (rs.type == "yarn" && rs.original_max_position_embeddings > 0)
      length = rs.original_max_position_embeddings;
    const double scaled = static_cast<double>(length) * rs.factor;
    // llround beyond 2^63 gives an unspecified value: a confident wrong length.
    if (!(scaled < 9.2e18))
      throw OverflowError("rope_scaling.factor", "max length " + std::to_string(length) + " x " +
                                                     std::to_string(rs.factor) + " exceeds 2^63 tokens");
    length = static_cast<std::uint64_t>(std::llround(scaled));
  }
  return length;
}

void validate_recurrent(const RecurrentSpec& rec, const std::string& field) {
  // The largest element is 8 bytes (fp64 state); the conv width multiplies the
  // conv state and its weights. Every product of footprint.cpp
  // recurrent_state_bytes and of the weight counts is bounded by these.
  const std::uint64_t conv = std::max<std::uint64_t>(rec.d_conv, 1);
  const std::uint64_t groups_state =
      checked_mul(checked_mul(2, std::max<std::uint64_t>(rec.n_groups, 1), field),
                  std::max<std::uint64_t>(rec.d_state, 1), field);
  const std::uint64_t conv_dim = checked_add(rec.d_inner, groups_state, field);
  checked_mul(checked_mul(checked_add(conv_dim, rec.d_inner, field), conv + 1, field), 8, field);
  checked_mul(
      checked_mul(std::max<std::uint64_t>(rec.d_inner, 1), std::max<std::uint64_t>(rec.d_state, 1), field), 8,
      field);
  checked_mul(checked_mul(checked_mul(std::max<std::uint64_t>(rec.n_heads, 1),
                                      std::max<std::uint64_t>(rec.head_dim, 1), field),
                          std::max<std::uint64_t>(rec.d_state, 1), field),
              8, field);
  const std::uint64_t key_dim = checked_mul(rec.key_head_dim, rec.num_key_heads, field);
  const std::uint64_t value_dim = checked_mul(rec.value_head_dim, rec.num_value_heads, field);
  const std::uint64_t gdn_conv =
      checked_add(checked_mul(key_dim, 2, field), checked_mul(value_dim, 2, field), field);
  checked_mul(checked_mul(gdn_conv, conv + 1, field), 8, field);
  checked_mul(checked_mul(checked_mul(std::max<std::uint64_t>(rec.num_value_heads, 1),
                                      std::max<std::uint64_t>(rec.value_head_dim, 1), field),
                          std::max<std::uint64_t>(rec.key_head_dim, 1), field),
              8, field);
}

}  // namespace kvsight
