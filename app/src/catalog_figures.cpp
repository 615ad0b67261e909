// The built-in catalogs (planner/data/models, planner/data/gpus.json) as figures: a table
// a reader scans (its CSV keeps the same readable cells) and the full entries in JSON.
#include "kvsight/app/catalogs.hpp"
#include "kvsight/catalog.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"
#include "kvsight/number_text.hpp"
#include "kvsight/weights.hpp"

namespace kvsight::app {

namespace {

std::string kinds_summary(const ModelSpec& m) {
  std::string out;
  for (LayerKind kind : {LayerKind::full_attention, LayerKind::sliding_window, LayerKind::chunked_local, LayerKind::mla,
                         LayerKind::recurrent, LayerKind::shared_kv})
    if (auto n = m.count(kind)) out += (out.empty() ? "" : " + ") + std::to_string(n) + " " + std::string(to_string(kind));
  return out;
}

// A catalog table: the CSV has the readable columns and cells, as the table shows them.
FigureTable catalog_table(std::string title, const std::vector<std::pair<std::string, bool>>& columns) {
  FigureTable table;
  table.title = std::move(title);
  for (const auto& [label, right] : columns) table.columns.emplace_back(label, label, right);
  return table;
}

void add_row(FigureTable& table, const std::vector<std::string>& cells) {
  std::vector<FigureCell> row;
  for (const std::string& cell : cells) row.push_back({cell, cell});
  table.rows.push_back(std::move(row));
}

FigureDoc catalog_doc(FigureTable table, const std::string& key, nlohmann::json rows) {
  FigureDoc doc;
  doc.sections.push_back(json_section({{key, std::move(rows)}}));
  doc.tables.push_back(std::move(table));
  return doc;
}

}  // namespace

FigureDoc model_catalog_figures() {
  FigureTable table = catalog_table("Built-in models (planner/data/models; KV at the model dtype, one rank)",
                                    {{"id", false},
                                     {"name", false},
                                     {"layers", true},
                                     {"kinds", false},
                                     {"heads/kv", true},
                                     {"head_dim", true},
                                     {"KV B/token", true},
                                     {"max ctx", true},
                                     {"params B", true}});
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& entry : model_catalog()) {
    const ModelSpec m = resolve_model(entry.id);
    const TokenFootprint fp = token_footprint(m, resolve_kv_types(m, "auto"), 1);
    const std::uint64_t params = count_params(m);
    rows.push_back({{"id", entry.id},
                    {"name", entry.name},
                    {"source", entry.source},
                    {"layers", m.num_layers()},
                    {"attention_layers", m.attention_layer_count()},
                    {"num_attention_heads", m.num_attention_heads},
                    {"num_kv_heads", m.num_kv_heads},
                    {"head_dim", m.head_dim},
                    {"kv_bytes_per_token", fp.bytes_per_token},
                    {"kv_bytes_per_token_all_layers", fp.bytes_per_token_all_layers},
                    {"state_bytes_per_sequence", fp.state_bytes_per_sequence},
                    {"max_model_len", derived_max_model_len(m)},
                    {"params", params}});
    add_row(table, {entry.id, entry.name, std::to_string(m.num_layers()), kinds_summary(m),
                    std::to_string(m.num_attention_heads) + "/" + std::to_string(m.num_kv_heads),
                    std::to_string(m.head_dim), commas_text(fp.bytes_per_token), commas_text(derived_max_model_len(m)),
                    fixed_text(static_cast<double>(params) / 1e9, 2)});
  }
  return catalog_doc(std::move(table), "models", std::move(rows));
}

FigureDoc gpu_catalog_figures() {
  FigureTable table = catalog_table("Built-in GPUs (planner/data/gpus.json; memory as the runtime reports it)",
                                    {{"id", false},
                                     {"name", false},
                                     {"arch", false},
                                     {"memory GiB", true},
                                     {"GB/s", true},
                                     {"SMs/CUs", true},
                                     {"L2 MiB", true},
                                     {"LLC MiB", true}});
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& g : gpu_catalog()) {
    rows.push_back({{"id", g.id}, {"name", g.name}, {"vendor", g.vendor}, {"arch", g.arch}, {"family", g.family},
                    {"memory_bytes", g.memory_bytes}, {"bandwidth_gbps", g.bandwidth_gbps},
                    {"multiprocessors", g.multiprocessors}, {"runtime_multiprocessors", g.runtime_multiprocessors},
                    {"l2_bytes", g.l2_bytes}, {"last_level_cache_bytes", g.last_level_cache_bytes},
                    // null where the vendor publishes no dense FP16 figure (GB10)
                    {"fp16_tflops", g.fp16_tflops > 0.0 ? nlohmann::json(g.fp16_tflops) : nlohmann::json(nullptr)},
                    {"unified_memory", g.unified_memory}, {"source", g.source}});
    add_row(table, {g.id, g.name, g.arch, fixed_text(static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024), 2),
                    fixed_text(g.bandwidth_gbps, 0), std::to_string(g.multiprocessors),
                    fixed_text(static_cast<double>(g.l2_bytes) / (1024.0 * 1024), 0),
                    fixed_text(static_cast<double>(g.last_level_cache_bytes) / (1024.0 * 1024), 0)});
  }
  return catalog_doc(std::move(table), "gpus", std::move(rows));
}

}  // namespace kvsight::app
