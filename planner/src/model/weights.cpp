// Weights footprint: parameter counts from config shapes and bytes from the
// dtype and quantization. Source: docs/reference/formulas.md "Weights";
// layer parameter shapes from transformers models/<type>/modeling_<type>.py.
#include "kvsight/weights.hpp"

#include <algorithm>
#include <cmath>

#include "kvsight/checked.hpp"
#include "kvsight/dtype.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/join.hpp"
#include "module_pattern.hpp"

namespace kvsight {

namespace {

struct ParamGroups {
  std::uint64_t embedding = 0;  // input embedding (+ untied lm_head)
  std::uint64_t dense_linear = 0;   // attention, dense MLP, shared experts, recurrent projections
  // Parts of dense_linear, for a compressed-tensors ignore list (apply_ignore_list).
  std::uint64_t attention_linear = 0;  // q/k/v/o, MLA and indexer projections
  std::uint64_t shared_linear = 0;     // shared experts
  std::uint64_t recurrent_linear = 0;  // Mamba / gated delta-net / short-conv / lightning projections
  std::uint64_t expert_linear = 0;  // routed experts
  std::uint64_t other = 0;          // norms, biases, routers, convs, small vectors
  std::uint64_t vision = 0;         // vision encoder + projector (config_vision.cpp read_vision)
  std::vector<std::uint64_t> per_layer;  // all parameters of each decoder layer
  std::uint64_t total() const {
    return checked_add(embedding + dense_linear + expert_linear + other, vision, "parameters");
  }
};

struct Adder {
  ParamGroups& g;
  std::uint64_t layer = 0;
  void dense(std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) { add(g.dense_linear, a, b, c); }
  // A part of dense_linear counted in its own group too (apply_ignore_list).
  void attention(std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) { part(g.attention_linear, a, b, c); }
  void shared(std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) { part(g.shared_linear, a, b, c); }
  void recurrent(std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) { part(g.recurrent_linear, a, b, c); }
  void part(std::uint64_t& group, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
    group = checked_add(group, add(g.dense_linear, a, b, c), "parameters");
  }
  void expert(std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) { add(g.expert_linear, a, b, c); }
  void other(std::uint64_t a, std::uint64_t b = 1, std::uint64_t c = 1) { add(g.other, a, b, c); }
  // Adds a x b x c parameters to `into` and to the layer; returns the count.
  std::uint64_t add(std::uint64_t& into, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
    const std::uint64_t n = checked_mul(checked_mul(a, b, "parameters"), c, "parameters");
    into = checked_add(into, n, "parameters");
    layer = checked_add(layer, n, "parameters");
    return n;
  }
};

bool is_moe_layer(const ModelSpec& m, std::uint32_t i) {
  if (!m.moe.is_moe()) return false;
  if (i < m.moe.first_k_dense_layers) return false;
  const std::uint32_t freq = std::max<std::uint32_t>(1, m.moe.moe_layer_frequency);
  return (i + 1) % freq == 0 || freq == 1;
}

// An MLA layer's projections (and its DeepSeek V3.2 indexer's).
void add_mla_params(Adder& a, const ModelSpec& m, const LayerSpec& layer) {
  const std::uint64_t H = m.hidden_size, nh = m.num_attention_heads;
  const MlaSpec& mla = *m.mla;
  const std::uint64_t qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
  if (mla.q_lora_rank > 0) {
    a.attention(H, mla.q_lora_rank);
    a.other(mla.q_lora_rank);  // q_a_layernorm
    a.attention(mla.q_lora_rank, nh, qk);
  } else {
    a.attention(H, nh, qk);
  }
  a.attention(H, mla.kv_lora_rank + mla.qk_rope_head_dim);                   // kv_a_proj_with_mqa
  a.other(mla.kv_lora_rank);                                             // kv_a_layernorm
  a.attention(mla.kv_lora_rank, nh, mla.qk_nope_head_dim + mla.v_head_dim);  // kv_b_proj
  a.attention(nh, mla.v_head_dim, H);                                        // o_proj
  if (layer.indexer && m.indexer) {
    // DeepSeek V3.2 lightning indexer (vLLM 0.33 deepseek_v2.py Indexer): wq_b
    // q_lora_rank x n_heads x head_dim, wk H x head_dim, weights_proj H x n_heads,
    // k_norm a LayerNorm (weight + bias) of head_dim.
    const IndexerSpec& ix = *m.indexer;
    a.attention(mla.q_lora_rank > 0 ? mla.q_lora_rank : H, ix.n_heads, ix.head_dim);  // wq_b
    a.attention(H, ix.head_dim);                                                      // wk
    a.other(H, ix.n_heads);                                                       // weights_proj
    a.other(2, ix.head_dim);                                                      // k_norm
  }
}

// An attention (or shared-KV) layer's q, k, v, o projections, biases and q/k norms.
void add_attention_params(Adder& a, const ModelSpec& m, const LayerSpec& layer) {
  const std::uint64_t H = m.hidden_size, nh = m.num_attention_heads;
  const std::uint64_t kv = layer.kv_heads ? layer.kv_heads : m.num_kv_heads;
  const std::uint64_t hd = layer.head_dim_k ? layer.head_dim_k : m.head_dim;
  const std::uint64_t hdv = layer.head_dim_v ? layer.head_dim_v : hd;
  a.attention(H, nh, hd);        // q_proj
  a.attention(H, kv, hd + hdv);  // k_proj + v_proj
  a.attention(nh, hdv, H);       // o_proj
  if (m.attention_bias) a.other(nh * hd + kv * (hd + hdv));
  if (m.qk_norm) a.other(2 * hd);
  // q_norm of heads x head_dim, k_norm of kv heads x head_dim (FamilyTraits::full_width_qk_norm).
  if (m.traits.full_width_qk_norm) a.other(nh * hd + kv * hd);
}

// A recurrent layer's projections, conv and state parameters.
void add_recurrent_params(Adder& a, const ModelSpec& m) {
  const std::uint64_t H = m.hidden_size;
  const RecurrentSpec& r = *m.recurrent;
  switch (r.kind) {
    case RecurrentKind::mamba1: {
      const std::uint64_t I = r.d_inner, dt_rank = ceil_div(H, 16);
      a.recurrent(H, 2 * I);                    // in_proj
      a.other(I, r.d_conv + 1);             // conv1d weight + bias
      a.recurrent(I, dt_rank + 2 * r.d_state);  // x_proj
      a.recurrent(dt_rank, I);                  // dt_proj
      a.other(I, r.d_state + 2);            // A_log, D, dt bias
      a.recurrent(I, H);                        // out_proj
      break;
    }
    case RecurrentKind::mamba2: {
      // Products bounded by validate_recurrent (model_spec.cpp).
      const std::uint64_t I = r.d_inner, conv_dim = I + 2 * r.n_groups * r.d_state;
      a.recurrent(H, checked_add(checked_add(I, conv_dim, "mamba in_proj"), r.n_heads,
                             "mamba in_proj"));  // in_proj
      a.other(conv_dim, r.d_conv + 1);           // conv1d
      a.other(3 * r.n_heads + I);                // dt_bias, A_log, D, norm
      a.recurrent(I, H);                             // out_proj
      break;
    }
    case RecurrentKind::gated_delta_net: {
      const std::uint64_t key_dim = r.key_head_dim * r.num_key_heads;
      const std::uint64_t value_dim = r.value_head_dim * r.num_value_heads;
      a.recurrent(H, 2 * key_dim + 2 * value_dim);            // in_proj_qkvz
      a.recurrent(H, 2 * r.num_value_heads);                  // in_proj_ba
      a.other(2 * key_dim + value_dim, r.d_conv);         // conv1d
      a.other(2 * r.num_value_heads + r.value_head_dim);  // dt_bias, A_log, norm
      a.recurrent(value_dim, H);                              // out_proj
      break;
    }
    case RecurrentKind::short_conv:
      a.recurrent(H, 3 * H);
      a.other(H, r.d_conv);
      a.recurrent(H, H);
      break;
    case RecurrentKind::lightning: {
      // MiniMax lightning attention (vLLM minimax_linear_attn.py
      // MiniMaxText01LinearAttention): qkv_proj H x 3 heads x head_dim,
      // output_gate H x heads x head_dim, out_proj back to H, an RMSNorm over
      // heads x head_dim. Products bounded by validate_recurrent.
      const std::uint64_t inner = r.n_heads * r.head_dim;
      a.recurrent(H, 3 * inner);  // qkv_proj
      a.recurrent(H, inner);      // output_gate
      a.recurrent(inner, H);      // out_proj
      a.other(inner);         // norm
      break;
    }
  }
}

// Layer i's feed-forward: routed and shared experts with their router, or a dense MLP.
// A plain MLP is up + down (2 x H x I), a gated one gate + up + down (3 x H x I).
void add_mlp_params(Adder& a, const ModelSpec& m, std::uint32_t i) {
  const std::uint64_t H = m.hidden_size;
  const std::uint64_t mlp_mats = m.traits.plain_mlp ? 2 : 3;
  if (is_moe_layer(m, i)) {
    const MoeSpec& moe = m.moe;
    a.expert(moe.num_experts, mlp_mats * H, moe.moe_intermediate_size);
    a.other(H, moe.num_experts);  // router
    if (moe.shared_expert_intermediate_size > 0) {
      a.shared(mlp_mats * H, moe.shared_expert_intermediate_size);
      a.other(H);  // shared expert gate (Qwen2-MoE)
    } else if (moe.num_shared_experts > 0) {
      a.shared(moe.num_shared_experts, mlp_mats * H, moe.moe_intermediate_size);
    }
  } else if (m.intermediate_size > 0) {
    a.dense(mlp_mats * H, m.intermediate_size);
  }
}

ParamGroups count_groups(const ModelSpec& m) {
  ParamGroups g;
  const std::uint64_t H = m.hidden_size, V = m.vocab_size;
  g.embedding = checked_mul(V, H, "embedding parameters");
  if (!m.tie_word_embeddings) g.embedding = checked_mul(g.embedding, 2, "embedding parameters");
  g.embedding = checked_add(g.embedding, m.per_layer_embedding_params, "embedding parameters");
  g.other = H;  // final norm
  g.vision = m.vision_params;
  for (std::uint32_t i = 0; i < m.num_layers(); ++i) {
    const LayerSpec& layer = m.layers[i];
    Adder a{g};
    // A parallel hybrid (Falcon-H1) lists each decoder layer as attention + its Mamba2
    // entry: the norms and the MLP belong to the attention entry.
    const bool parallel_state = m.traits.parallel_hybrid && layer.kind == LayerKind::recurrent;
    // Norms: input + post-attention (and pre/post feed-forward: FamilyTraits::sandwich_norms).
    if (!parallel_state) a.other(m.traits.sandwich_norms ? 4 * H : 2 * H);
    if (layer.kind == LayerKind::mla && m.mla)
      add_mla_params(a, m, layer);
    else if (layer.is_attention() || layer.kind == LayerKind::shared_kv)
      add_attention_params(a, m, layer);
    else if (layer.kind == LayerKind::recurrent && m.recurrent)
      add_recurrent_params(a, m);
    // Feed-forward, in layers of their own where the family keeps them so (Nemotron-H).
    const bool has_mlp = m.traits.mlp_layers ? layer.kind == LayerKind::none : !parallel_state;
    if (has_mlp) add_mlp_params(a, m, i);
    g.per_layer.push_back(a.layer);
  }
  return g;
}

// quantization_config.ignore of a compressed-tensors checkpoint (Quantization::ignore): which
// groups of linears stay at the model dtype. compressed-tensors matches each entry against every
// module's name (utils/match.py is_match: the name, or "re:" and re.match); kvsight holds no module
// list, so each group is tried with the names its first and its last layer's modules take in
// the HF checkpoint (with and without a multimodal model's language_model prefix). A group is
// kept at the dtype when every one of its names matches an entry; an entry that matches part of
// a group, or one layer of it and not another, is reported and not applied.
struct IgnoredLinears {
  std::uint64_t dense = 0;  // params of dense_linear kept at the dtype
  bool experts = false;
  std::vector<std::string> kept;     // "attention projections", ...
  std::vector<std::string> partial;  // groups an entry covers in part
  std::size_t unread = 0;            // entries outside the regex subset
};

IgnoredLinears apply_ignore_list(const ModelSpec& m, const ParamGroups& g) {
  IgnoredLinears out;
  if (m.quantization.ignore.empty()) return out;
  std::vector<hf_config::ModulePattern> patterns;
  for (const std::string& entry : m.quantization.ignore) {
    if (auto p = hf_config::ModulePattern::parse(entry)) patterns.push_back(std::move(*p));
    else ++out.unread;
  }
  const auto matched = [&](const std::string& name) {
    for (const char* prefix : {"model.layers.", "model.language_model.layers.", "language_model.model.layers."})
      for (const auto& p : patterns)
        if (p.matches(prefix + name)) return true;
    return false;
  };
  // The first and the last layer holding the group's modules.
  const auto layers_where = [&](auto&& holds) {
    std::vector<std::uint32_t> found;
    for (std::uint32_t i = 0; i < m.num_layers(); ++i)
      if (holds(i)) found.push_back(i);
    if (found.size() > 1) found.erase(found.begin() + 1, found.end() - 1);
    return found;
  };
  // Whether the group's modules at those layers all match (true), none do (false); a mix is partial.
  const auto group_ignored = [&](const std::string& what, const std::vector<std::uint32_t>& layers,
                                 const std::vector<std::string>& modules) {
    std::size_t hits = 0, total = 0;
    for (std::uint32_t i : layers)
      for (const std::string& module : modules) {
        ++total;
        if (matched(std::to_string(i) + "." + module)) ++hits;
      }
    if (hits > 0 && hits < total) out.partial.push_back(what);
    const bool all = total > 0 && hits == total;
    if (all) out.kept.push_back(what);
    return all;
  };
  const auto is_attn = [&](std::uint32_t i) { return m.layers[i].is_attention(); };
  const std::vector<std::string> attn_modules =
      m.mla ? std::vector<std::string>{m.mla->q_lora_rank > 0 ? "self_attn.q_a_proj" : "self_attn.q_proj",
                                       "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj", "self_attn.o_proj"}
            : std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"};
  if (group_ignored("attention projections", layers_where(is_attn), attn_modules))
    out.dense = checked_add(out.dense, g.attention_linear, "parameters");
  const std::vector<std::string> mats = m.traits.plain_mlp ? std::vector<std::string>{"up_proj", "down_proj"}
                                                           : std::vector<std::string>{"gate_proj", "up_proj", "down_proj"};
  const auto with = [&](const std::string& prefix) {
    std::vector<std::string> names;
    for (const std::string& mat : mats) names.push_back(prefix + mat);
    return names;
  };
  const auto moe_layer = [&](std::uint32_t i) { return is_moe_layer(m, i); };
  if (m.moe.is_moe()) {
    out.experts = group_ignored("routed experts", layers_where(moe_layer), with("mlp.experts.0."));
    if (g.shared_linear > 0 &&
        group_ignored("shared experts", layers_where(moe_layer),
                      with(m.moe.shared_expert_intermediate_size > 0 ? "mlp.shared_expert." : "mlp.shared_experts.")))
      out.dense = checked_add(out.dense, g.shared_linear, "parameters");
  }
  const std::uint64_t mlp = g.dense_linear - g.attention_linear - g.shared_linear - g.recurrent_linear;
  const auto dense_mlp_layer = [&](std::uint32_t i) {
    return !is_moe_layer(m, i) && m.intermediate_size > 0 && m.layers[i].kind != LayerKind::recurrent;
  };
  if (mlp > 0 && group_ignored("dense MLPs", layers_where(dense_mlp_layer), with("mlp.")))
    out.dense = checked_add(out.dense, mlp, "parameters");
  return out;
}

}  // namespace

std::uint64_t count_params(const ModelSpec& model) { return count_groups(model).total(); }
std::uint64_t count_embedding_params(const ModelSpec& model) { return count_groups(model).embedding; }

WeightsEstimate estimate_weights(const ModelSpec& model, std::uint32_t tp, std::uint32_t pp) {
  if (tp == 0) throw InputError("--tensor-parallel-size", "is 0; a positive integer is required");
  if (pp == 0) throw InputError("--pipeline-parallel-size", "is 0; a positive integer is required");
  const ParamGroups g = count_groups(model);
  WeightsEstimate w;
  w.params = g.total();
  w.embedding_params = g.embedding;
  const double dtype_bytes = torch_dtype_bytes(model.dtype, "torch_dtype");
  const Quantization& q = model.quantization;
  double dense_bpw = dtype_bytes * 8, expert_bpw = dtype_bytes * 8;
  if (q.bits_per_weight > 0) {
    expert_bpw = q.bits_per_weight;
    // MXFP4 checkpoints (gpt-oss) quantize only the MoE experts; attention stays
    // 16-bit (openai/gpt-oss config: modules_to_not_convert).
    if (q.method != "mxfp4") dense_bpw = q.bits_per_weight;
  }
  w.bits_per_weight = q.bits_per_weight > 0 ? q.bits_per_weight : dtype_bytes * 8;
  // The vision tower stays at the model dtype: quantized checkpoints leave it out
  // (modules_to_not_convert / ignore lists name vision_tower, visual, ...); so do the linears a
  // compressed-tensors ignore list names (apply_ignore_list).
  const IgnoredLinears ig = q.bits_per_weight > 0 ? apply_ignore_list(model, g) : IgnoredLinears{};
  const std::uint64_t expert_kept = ig.experts ? g.expert_linear : 0;
  const double bytes =
      static_cast<double>(g.embedding + g.other + g.vision + ig.dense + expert_kept) * dtype_bytes +
      static_cast<double>(g.dense_linear - ig.dense) * dense_bpw / 8.0 +
      static_cast<double>(g.expert_linear - expert_kept) * expert_bpw / 8.0;
  if (!(bytes < 1.8e19)) throw OverflowError("weights", "byte count exceeds 64 bits");
  w.bytes = static_cast<std::uint64_t>(std::llround(bytes));
  w.method = q.bits_per_weight > 0
                 ? "estimate from shapes: linears at " + std::to_string(q.bits_per_weight).substr(0, 5) + " bits (" +
                       q.method + "), embeddings and norms at " + model.dtype
                 : "estimate from shapes at " + model.dtype;
  if (!ig.kept.empty())
    w.method += "; quantization_config.ignore keeps " + join_strings(ig.kept) + " at " + model.dtype;
  if (!ig.partial.empty() || ig.unread > 0) {
    const std::string part = join_strings(ig.partial);
    w.method += "; ignore entries not applied (" +
                (part.empty() ? "" : "cover part of: " + part + (ig.unread ? "; " : "")) +
                (ig.unread ? std::to_string(ig.unread) + " outside the regex subset kvsight reads" : "") + ")";
  }
  w.vision_params = g.vision;
  if (g.vision > 0)
    w.method += "; includes the vision tower (" + model.vision_tower + ", " + std::to_string(g.vision) +
                " parameters at " + model.dtype + ")";

  if (model.exact_weights) {
    w.bytes = model.exact_weights->bytes;
    if (model.exact_weights->params > 0) w.params = model.exact_weights->params;
    w.exact = true;
    w.method = model.exact_weights->method;
  }

  // Per rank: the largest pipeline stage's share (stage 0 holds the embedding,
  // the last stage the LM head), sharded over tp. Norms and routers are in fact
  // replicated; they are small and counted as sharded here.
  const double scale = w.params > 0 ? static_cast<double>(w.bytes) / static_cast<double>(w.params) : 0.0;
  const std::uint64_t input_embedding = checked_mul(model.vocab_size, model.hidden_size, "embedding parameters");
  const std::uint64_t lm_head = g.embedding - (model.tie_word_embeddings ? 0 : input_embedding);
  double largest = 0.0;
  for (std::uint32_t stage = 0; stage < pp; ++stage) {
    double params = 0.0;
    for (std::uint32_t index : pp_stage_layers(model.num_layers(), pp, stage))
      params += static_cast<double>(g.per_layer[index]);
    if (stage == 0) params += static_cast<double>(input_embedding);
    // Every stage holds the vision tower: vLLM's gemma3_mm.py, mistral3.py and
    // mllama4.py build it whatever the PP rank (0.33); its linears shard over TP.
    params += static_cast<double>(g.vision);
    // With pp > 1 a tied LM head is a second copy on the last stage.
    if (stage == pp - 1 && (pp > 1 || !model.tie_word_embeddings))
      params += static_cast<double>(model.tie_word_embeddings ? input_embedding : lm_head);
    if (stage == pp - 1) params += static_cast<double>(model.hidden_size);
    largest = std::max(largest, params);
  }
  w.bytes_per_rank = static_cast<std::uint64_t>(std::llround(largest * scale / tp));
  return w;
}

LayerWeights weights_by_layer(const ModelSpec& model, std::uint32_t decoder_blocks) {
  LayerWeights out;
  if (model.exact_weights && model.exact_weights->gguf_layers) {
    const GgufTensorLayers& g = *model.exact_weights->gguf_layers;
    out.exact = true;
    out.input = g.input;
    out.output = checked_add(g.output, g.tied_output, "GGUF output bytes");
    out.tied_copy = g.tied_output;
    out.shared = g.repeating_shared;
    out.blocks = g.blocks;
    if (out.blocks.size() < decoder_blocks) out.blocks.resize(decoder_blocks, 0);
    return out;
  }
  const ParamGroups g = count_groups(model);
  const WeightsEstimate w = estimate_weights(model);
  const double dtype_bytes = torch_dtype_bytes(model.dtype, "torch_dtype");
  const std::uint64_t H = model.hidden_size;
  const std::uint64_t vh = checked_mul(model.vocab_size, H, "embedding parameters");
  const auto bytes_of = [&](std::uint64_t params) {
    return static_cast<std::uint64_t>(std::llround(static_cast<double>(params) * dtype_bytes));
  };
  out.input = bytes_of(checked_add(vh, model.per_layer_embedding_params, "embedding parameters"));
  const std::uint64_t norm = bytes_of(H);
  out.output = checked_add(bytes_of(vh), norm, "output layer bytes");  // the head (or the tied copy) + norm
  // What the blocks hold: the estimate less the input layer and the output layer as counted in
  // it (a tied head is not counted there: its copy is llama.cpp's).
  const std::uint64_t counted_output = model.tie_word_embeddings ? norm : out.output;
  if (model.tie_word_embeddings) out.tied_copy = bytes_of(vh);
  const std::uint64_t outside = checked_add(out.input, counted_output, "weights outside the blocks");
  const std::uint64_t rest = w.bytes > outside ? w.bytes - outside : 0;
  out.blocks.assign(std::max<std::size_t>(decoder_blocks, 1), 0);
  std::uint64_t layer_params = 0;
  for (std::uint64_t p : g.per_layer) layer_params = checked_add(layer_params, p, "parameters");
  if (g.per_layer.empty() || layer_params == 0) {
    out.blocks.front() = rest;
    return out;
  }
  // model.layers may list a decoder block as two entries (Falcon-H1): entry i is block
  // i x blocks / entries. Shares are rounded down and the remainder goes to the last block, so
  // the blocks sum to `rest` exactly.
  std::uint64_t given = 0;
  for (std::size_t i = 0; i < g.per_layer.size(); ++i) {
    const std::size_t block = i * out.blocks.size() / g.per_layer.size();
    const auto share = static_cast<std::uint64_t>(static_cast<long double>(rest) * g.per_layer[i] / layer_params);
    out.blocks[block] += share;
    given += share;
  }
  out.blocks.back() += rest - std::min(rest, given);
  return out;
}

}  // namespace kvsight
