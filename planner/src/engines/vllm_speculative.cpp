// vLLM speculative decoding: the draft's KV layers and weights (vllm_speculative.hpp;
// sources in docs/reference/speculative.md, read in the vllm 0.33.0 wheel).
#include "vllm_speculative.hpp"

#include <algorithm>

#include "kvsight/checked.hpp"
#include "kvsight/error.hpp"
#include "kvsight/speculative.hpp"

namespace kvsight::vllm {

namespace {

// The target's non-embedding weight bytes per decoder layer, per rank: the MTP layers are
// decoder layers of the target's own shape, loaded by the drafter from the same checkpoint.
std::uint64_t per_layer_weight_bytes(const ModelSpec& target, std::uint32_t tp, std::uint32_t pp) {
  const WeightsEstimate w = estimate_weights(target, tp, pp);
  if (w.params == 0 || target.num_layers() == 0) return 0;
  const double non_embedding =
      static_cast<double>(w.params - std::min(w.params, w.embedding_params)) / static_cast<double>(w.params);
  return static_cast<std::uint64_t>(static_cast<double>(w.bytes) * non_embedding /
                                    static_cast<double>(target.num_layers()) / tp);
}

}  // namespace

ModelSpec with_draft_layers(const ModelSpec& target, const EngineOptions& options, DraftPlan& plan) {
  if (!options.vllm.speculative) return target;
  const SpeculativeConfig& spec = *options.vllm.speculative;
  ModelSpec out = target;
  const std::string tokens = std::to_string(spec.num_speculative_tokens) + " speculative tokens";
  if (spec.kind == DraftKind::none) {
    plan.notes.push_back("speculative decoding '" + spec.method + "' (" + tokens +
                         "): proposals come from the prompt, no draft model, no draft KV cache");
    return out;
  }
  if (options.pp > 1)
    throw InputError("speculative_config",
                     "with --pipeline-parallel-size > 1 is not modelled (vLLM runs the drafter on the last "
                     "stage only); plan with --pp 1");
  if (spec.kind == DraftKind::mtp) {
    if (target.mtp_layers == 0)
      throw InputError(
          "speculative_config.method",
          "is '" + spec.method + "' but " + target.id +
              " has no MTP layers (num_nextn_predict_layers / mtp_num_hidden_layers absent or 0); "
              "allowed here: ngram, suffix, eagle, eagle3, draft_model");
    // hf_config_override (config/speculative.py) builds the drafter from the target's config
    // with n_predict = its MTP layer count: each MTP layer is one decoder layer of the
    // target's full-attention kind (MLA for DeepSeek, full attention for Qwen3-Next / 3.5).
    const auto first = std::find_if(target.layers.begin(), target.layers.end(), [](const LayerSpec& l) {
      return l.kind == LayerKind::full_attention || l.kind == LayerKind::mla;
    });
    if (first == target.layers.end())
      throw InputError("speculative_config.method", "'" + spec.method +
                                                        "': the model has no full-attention layer "
                                                        "for its MTP layers to copy");
    for (std::uint32_t i = 0; i < target.mtp_layers; ++i) out.layers.push_back(*first);
    plan.kv_layers = target.mtp_layers;
    const std::uint64_t per_layer = per_layer_weight_bytes(target, options.tp, 1);
    plan.weight_bytes_per_rank = checked_mul(per_layer, target.mtp_layers, "MTP weights");
    plan.weight_bytes = checked_mul(plan.weight_bytes_per_rank, options.tp, "MTP weights");
    plan.weights_why = std::to_string(target.mtp_layers) +
                       " MTP layer(s) at the target's mean non-embedding bytes per layer (embeddings and "
                       "lm_head shared with the target: llm_base_proposer.py _maybe_share_embeddings)";
    plan.notes.push_back("speculative decoding '" + spec.method + "' (" + tokens +
                         "): " + std::to_string(target.mtp_layers) +
                         " MTP layer(s) get a KV cache beside the target's (vLLM registers the drafter's "
                         "attention layers with the target's; gpu_model_runner.py get_kv_cache_spec)");
    return out;
  }
  // A separate draft model (eagle, eagle3, dflash, draft_model).
  if (!spec.draft)
    throw InputError("speculative_config.model", "'" + spec.model + "' was not resolved to a model");
  const ModelSpec& draft = *spec.draft;
  if (draft.recurrent && draft.count(LayerKind::recurrent) > 0)
    throw InputError("speculative_config.model", "'" + spec.model +
                                                     "' has recurrent layers; a recurrent draft is "
                                                     "not modelled");
  for (const LayerSpec& l : draft.layers) {
    if (!l.allocates_kv()) continue;
    out.layers.push_back(l);
    ++plan.kv_layers;
  }
  // EAGLE-style drafters share the target's embeddings and lm_head (llm_base_proposer.py
  // _maybe_share_embeddings / _maybe_share_lm_head); a plain draft model keeps its own
  // (draft_model.py overrides both with no-ops).
  const WeightsEstimate w = estimate_weights(draft, options.tp, 1);
  const bool shares = spec.method != "draft_model";
  const std::uint64_t counted = shares ? w.params - std::min(w.params, w.embedding_params) : w.params;
  const double fraction = w.params ? static_cast<double>(counted) / static_cast<double>(w.params) : 0.0;
  plan.weight_bytes = static_cast<std::uint64_t>(static_cast<double>(w.bytes) * fraction);
  plan.weight_bytes_per_rank = static_cast<std::uint64_t>(static_cast<double>(w.bytes_per_rank) * fraction);
  // The EAGLE head's input projection, not a layer of the config: fc = Linear(2h, h) for
  // EAGLE (llama_eagle.py), Linear(3h, h) for EAGLE-3 (llama_eagle3.py, its three target
  // hidden states), at 2 bytes, replicated on every rank.
  const std::uint64_t fc_inputs = spec.method == "eagle" ? 2 : spec.method == "eagle3" ? 3 : 0;
  if (fc_inputs > 0) {
    const std::uint64_t fc = checked_mul(checked_mul(fc_inputs, draft.hidden_size, "EAGLE fc"),
                                         checked_mul(draft.hidden_size, 2, "EAGLE fc"), "EAGLE fc");
    plan.weight_bytes = checked_add(plan.weight_bytes, fc, "draft weights");
    plan.weight_bytes_per_rank = checked_add(plan.weight_bytes_per_rank, fc, "draft weights");
  }
  plan.weights_why = "draft " + draft.id +
                     (shares ? " without its embeddings and lm_head (shared with the target)"
                             : " whole (a draft_model keeps its own embeddings)");
  plan.notes.push_back("speculative decoding '" + spec.method + "' (" + tokens + ") with draft " + draft.id +
                       ": " + std::to_string(plan.kv_layers) +
                       " draft attention layer(s) get a KV cache beside the target's "
                       "(gpu_model_runner.py get_kv_cache_spec, is_draft specs)");
  return out;
}

}  // namespace kvsight::vllm
