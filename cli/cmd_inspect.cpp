// kvsight inspect: the derived shape of a model: layer kinds, KV heads and head
// dims, RoPE/NoPE per layer, rope scaling, native vs extended context, and the
// defaults the reader had to assume.
#include <memory>

#include "commands.hpp"
#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"

namespace kvsight::cli {

namespace {

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
  for (LayerKind kind : {LayerKind::full_attention, LayerKind::sliding_window, LayerKind::chunked_local, LayerKind::mla,
                         LayerKind::recurrent, LayerKind::shared_kv, LayerKind::none}) {
    if (auto n = m.count(kind)) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(to_string(kind));
  }
  return out;
}

nlohmann::json to_json(const ModelSpec& m, const TokenFootprint& fp) {
  nlohmann::json j;
  j["id"] = m.id;
  j["name"] = m.display_name;
  j["source"] = m.source;
  j["architecture"] = m.architecture;
  j["model_type"] = m.model_type;
  j["dtype"] = m.dtype;
  j["quantization"] = {{"method", m.quantization.method}, {"bits_per_weight", m.quantization.bits_per_weight}};
  j["hidden_size"] = m.hidden_size;
  j["num_attention_heads"] = m.num_attention_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["gqa_ratio"] = m.num_kv_heads ? m.num_attention_heads / m.num_kv_heads : 0;
  j["num_layers"] = m.num_layers();
  j["vocab_size"] = m.vocab_size;
  j["intermediate_size"] = m.intermediate_size;
  j["tie_word_embeddings"] = m.tie_word_embeddings;
  j["layer_counts"] = nlohmann::json::object();
  for (LayerKind kind : {LayerKind::full_attention, LayerKind::sliding_window, LayerKind::chunked_local, LayerKind::mla,
                         LayerKind::recurrent, LayerKind::shared_kv, LayerKind::none})
    j["layer_counts"][std::string(to_string(kind))] = m.count(kind);
  j["attention_layers"] = m.attention_layer_count();
  j["rope_layers"] = m.rope_layer_count();
  j["nope_layers"] = m.nope_layer_count();
  auto& layers = j["layers"] = nlohmann::json::array();
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
  j["rope"] = {{"theta", m.rope_theta},
               {"scaling_type", m.rope_scaling.type.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.rope_scaling.type)},
               {"factor", m.rope_scaling.factor},
               {"original_max_position_embeddings", m.rope_scaling.original_max_position_embeddings}};
  const std::uint64_t native = m.rope_scaling.present() && m.rope_scaling.original_max_position_embeddings
                                   ? m.rope_scaling.original_max_position_embeddings
                                   : m.max_position_embeddings;
  j["context"] = {{"max_position_embeddings", m.max_position_embeddings},
                  {"native", native},
                  {"derived_max_model_len", derived_max_model_len(m)}};
  if (m.mla)
    j["mla"] = {{"kv_lora_rank", m.mla->kv_lora_rank}, {"q_lora_rank", m.mla->q_lora_rank},
                {"qk_rope_head_dim", m.mla->qk_rope_head_dim}, {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                {"v_head_dim", m.mla->v_head_dim}};
  if (m.recurrent) {
    const RecurrentSpec& r = *m.recurrent;
    const auto state = recurrent_state_bytes(r, 1);
    j["recurrent"] = {{"kind", std::string(to_string(r.kind))}, {"conv_dtype", r.conv_dtype}, {"ssm_dtype", r.ssm_dtype},
                      {"conv_state_bytes_per_layer", state.conv}, {"ssm_state_bytes_per_layer", state.ssm}};
  }
  if (m.moe.is_moe())
    j["moe"] = {{"experts", m.moe.num_experts}, {"experts_per_token", m.moe.experts_per_token},
                {"shared_experts", m.moe.num_shared_experts}, {"moe_intermediate_size", m.moe.moe_intermediate_size}};
  j["kv_at_model_dtype"] = {{"bytes_per_token", fp.bytes_per_token},
                            {"bytes_per_token_all_layers", fp.bytes_per_token_all_layers},
                            {"state_bytes_per_sequence", fp.state_bytes_per_sequence}};
  j["params"] = count_params(m);
  j["notes"] = m.notes;
  return j;
}

Report to_report(const ModelSpec& m, const TokenFootprint& fp) {
  Report rep;
  rep.title = "kvsight inspect: " + (m.display_name.empty() ? m.id : m.display_name);
  ReportSection shape{"Shape", {}};
  shape.rows.push_back({"architecture", m.architecture.empty() ? "-" : m.architecture, m.model_type});
  shape.rows.push_back({"dtype", m.dtype, m.quantization.method.empty() ? "" : "quantized: " + m.quantization.method});
  shape.rows.push_back({"parameters", commas_text(count_params(m)), "from shapes"});
  shape.rows.push_back({"hidden size", commas_text(m.hidden_size), ""});
  shape.rows.push_back({"layers", std::to_string(m.num_layers()), layer_summary(m)});
  if (m.num_attention_heads) {
    shape.rows.push_back({"query heads / KV heads", std::to_string(m.num_attention_heads) + " / " + std::to_string(m.num_kv_heads),
                          m.num_kv_heads == 1 ? "MQA" : m.num_kv_heads == m.num_attention_heads ? "MHA"
                                                                                                 : "GQA " + std::to_string(m.num_attention_heads / m.num_kv_heads)});
    shape.rows.push_back({"head_dim", std::to_string(m.head_dim), ""});
  }
  if (m.mla)
    shape.rows.push_back({"MLA latent", std::to_string(m.mla->kv_lora_rank) + " + " + std::to_string(m.mla->qk_rope_head_dim),
                          "kv_lora_rank + qk_rope_head_dim, one per token"});
  if (m.moe.is_moe())
    shape.rows.push_back({"experts", std::to_string(m.moe.num_experts) + " (top " + std::to_string(m.moe.experts_per_token) + ")",
                          m.moe.num_shared_experts ? std::to_string(m.moe.num_shared_experts) + " shared" : ""});
  if (m.recurrent) {
    const auto state = recurrent_state_bytes(*m.recurrent, 1);
    shape.rows.push_back({"recurrent layers", std::string(to_string(m.recurrent->kind)),
                          "state per layer " + commas_text(state.total()) + " B (conv " + m.recurrent->conv_dtype + ", ssm " +
                              m.recurrent->ssm_dtype + ")"});
  }
  rep.sections.push_back(shape);

  ReportSection pos{"Positions", {}};
  pos.rows.push_back({"RoPE / NoPE attention layers", std::to_string(m.rope_layer_count()) + " / " + std::to_string(m.nope_layer_count()), ""});
  pos.rows.push_back({"rope_theta", m.rope_theta > 0 ? fixed_text(m.rope_theta, 0) : "-", ""});
  pos.rows.push_back(
      {"rope scaling",
       m.rope_scaling.present() ? m.rope_scaling.type + " x" + fixed_text(m.rope_scaling.factor, 2) : "none",
       m.rope_scaling.original_max_position_embeddings
           ? "trained at " + commas_text(m.rope_scaling.original_max_position_embeddings)
           : ""});
  const bool extended = m.rope_scaling.present() && m.rope_scaling.original_max_position_embeddings &&
                        m.rope_scaling.original_max_position_embeddings < derived_max_model_len(m);
  pos.rows.push_back({"max_position_embeddings", commas_text(m.max_position_embeddings), ""});
  pos.rows.push_back({"context (vLLM derived max)", commas_text(derived_max_model_len(m)),
                      extended ? "EXTENDED by rope scaling, not native" : "native"});
  rep.sections.push_back(pos);

  ReportSection kv{"KV at the model dtype, one rank", {}};
  kv.rows.push_back({"bytes per token", commas_text(fp.bytes_per_token) + " B", "full-attention + MLA layers"});
  if (fp.bytes_per_token_all_layers != fp.bytes_per_token)
    kv.rows.push_back({"bytes per token, all layers", commas_text(fp.bytes_per_token_all_layers) + " B", "until windows fill"});
  if (fp.state_bytes_per_sequence)
    kv.rows.push_back({"recurrent state per sequence", commas_text(fp.state_bytes_per_sequence) + " B", ""});
  rep.sections.push_back(kv);

  std::string kinds, rope;
  for (const auto& l : m.layers) {
    kinds += kind_letter(l);
    rope += (l.is_attention() || l.kind == LayerKind::shared_kv) ? (l.rope ? 'r' : 'n') : '.';
  }
  rep.footer.push_back("layers: " + kinds + "   (F full, S sliding, C chunked, M MLA, R recurrent, X shared KV, - none)");
  rep.footer.push_back("rope:   " + rope + "   (r RoPE, n NoPE, . no attention)");
  for (const auto& note : m.notes) rep.footer.push_back("note: " + note);
  rep.footer.push_back("source: " + m.source);
  return rep;
}

}  // namespace

void add_inspect_command(CLI::App& app, CliState& state) {
  auto model_arg = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("inspect", "A model's derived shape: layer kinds, KV heads, RoPE/NoPE, rope scaling, notes");
  cmd->description(
      "Reads the model's config (catalog id, config.json, directory, or org/name in the local HF cache) and shows\n"
      "what kvsight derived from it: per-layer attention kinds, KV heads and head dims, RoPE/NoPE layers, rope\n"
      "scaling and whether the context is native or extended, and every default it had to assume.\n"
      "Example: kvsight inspect --model smollm3-3b --format json");
  cmd->add_option("--model,-m", *model_arg, "Catalog id, config.json path, directory, or org/name in the local HF cache")
      ->required();
  add_output_options(*cmd, state);
  cmd->callback([model_arg, &state] {
    const Format format = state.format();
    const ModelSpec model = resolve_model(*model_arg);
    const TokenFootprint fp = token_footprint(model, resolve_kv_types(model, "auto"), 1);
    if (format == Format::json) emit(state, render_json(to_json(model, fp)));
    else emit(state, render_report(to_report(model, fp), format));
  });
}

}  // namespace kvsight::cli
