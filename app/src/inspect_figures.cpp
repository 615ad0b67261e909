// The figures of `kvsight inspect` (issue #26): a model's derived shape, positions and KV
// footprint at its own dtype. A figure that JSON and the readable report share is written
// once (key and label side by side); the rest are the report's prose or JSON's detail.
#include "kvsight/app/inspect.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/model.hpp"
#include "kvsight/number_text.hpp"
#include "kvsight/weights.hpp"

namespace kvsight::app {

namespace {

constexpr LayerKind kAllKinds[] = {LayerKind::full_attention, LayerKind::sliding_window, LayerKind::chunked_local,
                                   LayerKind::mla,            LayerKind::recurrent,      LayerKind::shared_kv,
                                   LayerKind::none};

char kind_letter(const LayerSpec& layer) {
  switch (layer.kind) {
    case LayerKind::full_attention: return 'F';
    case LayerKind::sliding_window: return 'S';
    case LayerKind::chunked_local: return 'C';
    case LayerKind::mla: return 'M';
    case LayerKind::recurrent: return 'R';
    case LayerKind::shared_kv: return 'X';
    case LayerKind::none: return '-';
  }
  return '?';
}

std::string layer_summary(const ModelSpec& m) {
  std::string out;
  for (LayerKind kind : kAllKinds)
    if (auto n = m.count(kind)) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(to_string(kind));
  return out;
}

// A row of the readable report with no JSON figure of its own (JSON has the parts).
Figure prose(std::string label, std::string text, std::string note = "") {
  return Figure{"", nullptr, "", std::move(label), std::move(text), std::move(note)};
}

nlohmann::json layers_json(const ModelSpec& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    nlohmann::json layer = {{"index", i}, {"kind", std::string(to_string(l.kind))}};
    if (l.is_attention() || l.kind == LayerKind::shared_kv) {
      layer["rope"] = l.rope;
      layer["kv_heads"] = l.kv_heads;
      layer["head_dim_k"] = l.head_dim_k;
      layer["head_dim_v"] = l.head_dim_v;
    } else {
      layer["rope"] = nullptr;
    }
    layer["window"] = l.window ? nlohmann::json(l.window) : nlohmann::json(nullptr);
    if (l.kind == LayerKind::shared_kv) layer["kv_source_layer"] = l.kv_source_layer;
    layers.push_back(layer);
  }
  return layers;
}

FigureSection shape_figures(const ModelSpec& m) {
  FigureSection s{"Shape", {}};
  auto& f = s.figures;
  f.push_back(json_figure("id", m.id));
  f.push_back(json_figure("name", m.display_name));
  f.push_back(json_figure("source", m.source));
  f.push_back({"architecture", m.architecture, "", "architecture", m.architecture.empty() ? "-" : m.architecture,
               m.model_type});
  f.push_back(json_figure("model_type", m.model_type));
  f.push_back({"dtype", m.dtype, "", "dtype", m.dtype,
               m.quantization.method.empty() ? "" : "quantized: " + m.quantization.method});
  f.push_back(json_figure("quantization",
                        {{"method", m.quantization.method}, {"bits_per_weight", m.quantization.bits_per_weight}}));
  const std::uint64_t params = count_params(m);
  f.push_back({"params", params, "", "parameters", commas_text(params), "from shapes"});
  f.push_back({"hidden_size", m.hidden_size, "", "hidden size", commas_text(m.hidden_size)});
  f.push_back({"num_layers", m.num_layers(), "", "layers", std::to_string(m.num_layers()), layer_summary(m)});
  f.push_back(json_figure("num_attention_heads", m.num_attention_heads));
  f.push_back(json_figure("num_kv_heads", m.num_kv_heads));
  f.push_back(json_figure("gqa_ratio", m.num_kv_heads ? m.num_attention_heads / m.num_kv_heads : 0));
  if (m.num_attention_heads)
    f.push_back(prose("query heads / KV heads",
                      std::to_string(m.num_attention_heads) + " / " + std::to_string(m.num_kv_heads),
                      m.num_kv_heads == 1                       ? "MQA"
                      : m.num_kv_heads == m.num_attention_heads ? "MHA"
                                                                : "GQA " + std::to_string(m.num_attention_heads / m.num_kv_heads)));
  f.push_back({"head_dim", m.head_dim, "", m.num_attention_heads ? "head_dim" : "", std::to_string(m.head_dim)});
  f.push_back(json_figure("vocab_size", m.vocab_size));
  f.push_back(json_figure("intermediate_size", m.intermediate_size));
  f.push_back(json_figure("tie_word_embeddings", m.tie_word_embeddings));
  nlohmann::json counts = nlohmann::json::object();
  for (LayerKind kind : kAllKinds) counts[std::string(to_string(kind))] = m.count(kind);
  f.push_back(json_figure("layer_counts", counts));
  f.push_back(json_figure("attention_layers", m.attention_layer_count()));
  f.push_back(json_figure("layers", layers_json(m)));
  if (m.mla) {
    f.push_back(prose("MLA latent", std::to_string(m.mla->kv_lora_rank) + " + " + std::to_string(m.mla->qk_rope_head_dim),
                      "kv_lora_rank + qk_rope_head_dim, one per token"));
    f.push_back(json_figure("mla", {{"kv_lora_rank", m.mla->kv_lora_rank},
                                  {"q_lora_rank", m.mla->q_lora_rank},
                                  {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                                  {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                                  {"v_head_dim", m.mla->v_head_dim}}));
  }
  if (m.moe.is_moe()) {
    f.push_back(prose("experts",
                      std::to_string(m.moe.num_experts) + " (top " + std::to_string(m.moe.experts_per_token) + ")",
                      m.moe.num_shared_experts ? std::to_string(m.moe.num_shared_experts) + " shared" : ""));
    f.push_back(json_figure("moe", {{"experts", m.moe.num_experts},
                                  {"experts_per_token", m.moe.experts_per_token},
                                  {"shared_experts", m.moe.num_shared_experts},
                                  {"moe_intermediate_size", m.moe.moe_intermediate_size}}));
  }
  if (m.recurrent) {
    const RecurrentSpec& r = *m.recurrent;
    const auto state = recurrent_state_bytes(r, 1);
    f.push_back(prose("recurrent layers", std::string(to_string(r.kind)),
                      "state per layer " + commas_text(state.total()) + " B (conv " + r.conv_dtype + ", ssm " +
                          r.ssm_dtype + ")"));
    f.push_back(json_figure("recurrent", {{"kind", std::string(to_string(r.kind))},
                                        {"conv_dtype", r.conv_dtype},
                                        {"ssm_dtype", r.ssm_dtype},
                                        {"conv_state_bytes_per_layer", state.conv},
                                        {"ssm_state_bytes_per_layer", state.ssm}}));
  }
  return s;
}

FigureSection position_figures(const ModelSpec& m) {
  FigureSection s{"Positions", {}};
  auto& f = s.figures;
  const RopeScaling& scaling = m.rope_scaling;
  f.push_back(json_figure("rope_layers", m.rope_layer_count()));
  f.push_back(json_figure("nope_layers", m.nope_layer_count()));
  f.push_back(prose("RoPE / NoPE attention layers",
                    std::to_string(m.rope_layer_count()) + " / " + std::to_string(m.nope_layer_count())));
  f.push_back({"rope.theta", m.rope_theta, "", "rope_theta", m.rope_theta > 0 ? fixed_text(m.rope_theta, 0) : "-"});
  f.push_back(json_figure("rope.scaling_type", scaling.type.empty() ? nlohmann::json(nullptr) : nlohmann::json(scaling.type)));
  f.push_back(json_figure("rope.factor", scaling.factor));
  f.push_back(json_figure("rope.original_max_position_embeddings", scaling.original_max_position_embeddings));
  f.push_back(prose("rope scaling", scaling.present() ? scaling.type + " x" + fixed_text(scaling.factor, 2) : "none",
                    scaling.original_max_position_embeddings
                        ? "trained at " + commas_text(scaling.original_max_position_embeddings)
                        : ""));
  const std::uint64_t derived = derived_max_model_len(m);
  const bool extended = scaling.present() && scaling.original_max_position_embeddings &&
                        scaling.original_max_position_embeddings < derived;
  f.push_back({"context.max_position_embeddings", m.max_position_embeddings, "", "max_position_embeddings",
               commas_text(m.max_position_embeddings)});
  f.push_back(json_figure("context.native", scaling.present() && scaling.original_max_position_embeddings
                                              ? scaling.original_max_position_embeddings
                                              : m.max_position_embeddings));
  f.push_back({"context.derived_max_model_len", derived, "", "context (vLLM derived max)", commas_text(derived),
               extended ? "EXTENDED by rope scaling, not native" : "native"});
  return s;
}

FigureSection kv_figures(const TokenFootprint& fp) {
  FigureSection s{"KV at the model dtype, one rank", {}};
  s.figures.push_back({"kv_at_model_dtype.bytes_per_token", fp.bytes_per_token, "B", "bytes per token",
                       commas_text(fp.bytes_per_token) + " B", "full-attention + MLA layers"});
  s.figures.push_back({"kv_at_model_dtype.bytes_per_token_all_layers", fp.bytes_per_token_all_layers, "B",
                       fp.bytes_per_token_all_layers != fp.bytes_per_token ? "bytes per token, all layers" : "",
                       commas_text(fp.bytes_per_token_all_layers) + " B", "until windows fill"});
  s.figures.push_back({"kv_at_model_dtype.state_bytes_per_sequence", fp.state_bytes_per_sequence, "B",
                       fp.state_bytes_per_sequence ? "recurrent state per sequence" : "",
                       commas_text(fp.state_bytes_per_sequence) + " B"});
  return s;
}

}  // namespace

FigureDoc inspect_model(const std::string& model_name) {
  const ModelSpec m = resolve_model(model_name);
  const TokenFootprint fp = token_footprint(m, resolve_kv_types(m, "auto"), 1);
  FigureDoc doc;
  doc.title = "kvsight inspect: " + (m.display_name.empty() ? m.id : m.display_name);
  doc.csv_readable = true;
  Figure notes = json_figure("notes", m.notes);
  doc.sections = {shape_figures(m), position_figures(m), kv_figures(fp), {"", {notes}}};
  std::string kinds, rope;
  for (const auto& l : m.layers) {
    kinds += kind_letter(l);
    rope += (l.is_attention() || l.kind == LayerKind::shared_kv) ? (l.rope ? 'r' : 'n') : '.';
  }
  doc.footer.push_back("layers: " + kinds + "   (F full, S sliding, C chunked, M MLA, R recurrent, X shared KV, - none)");
  doc.footer.push_back("rope:   " + rope + "   (r RoPE, n NoPE, . no attention)");
  for (const auto& note : m.notes) doc.footer.push_back("note: " + note);
  doc.footer.push_back("source: " + m.source);
  return doc;
}

}  // namespace kvsight::app
