// kvsight models / kvsight gpus: the built-in catalogs.
#include "commands.hpp"
#include "kvsight/catalog.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"
#include "kvsight/weights.hpp"

namespace kvsight::cli {

namespace {

std::string kinds_summary(const ModelSpec& m) {
  std::string out;
  for (LayerKind kind : {LayerKind::full_attention, LayerKind::sliding_window, LayerKind::chunked_local, LayerKind::mla,
                         LayerKind::recurrent, LayerKind::shared_kv})
    if (auto n = m.count(kind)) out += (out.empty() ? "" : " + ") + std::to_string(n) + " " + std::string(to_string(kind));
  return out;
}

void run_models(CliState& state) {
  const Format format = state.format();
  Table table;
  table.title = "Built-in models (planner/data/models; KV at the model dtype, one rank)";
  table.columns = {"id", "name", "layers", "kinds", "heads/kv", "head_dim", "KV B/token", "max ctx", "params B"};
  table.right_align = {false, false, true, false, true, true, true, true, true};
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
    table.rows.push_back({entry.id, entry.name, std::to_string(m.num_layers()), kinds_summary(m),
                          std::to_string(m.num_attention_heads) + "/" + std::to_string(m.num_kv_heads),
                          std::to_string(m.head_dim), commas_text(fp.bytes_per_token),
                          commas_text(derived_max_model_len(m)),
                          fixed_text(static_cast<double>(params) / 1e9, 2)});
  }
  if (format == Format::json) emit(state, render_json({{"models", rows}}));
  else emit(state, render_table(table, format));
}

void run_gpus(CliState& state) {
  const Format format = state.format();
  Table table;
  table.title = "Built-in GPUs (planner/data/gpus.json; memory as the runtime reports it)";
  table.columns = {"id", "name", "arch", "memory GiB", "GB/s", "SMs/CUs", "L2 MiB", "LLC MiB"};
  table.right_align = {false, false, false, true, true, true, true, true};
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& g : gpu_catalog()) {
    rows.push_back({{"id", g.id}, {"name", g.name}, {"vendor", g.vendor}, {"arch", g.arch}, {"family", g.family},
                    {"memory_bytes", g.memory_bytes}, {"bandwidth_gbps", g.bandwidth_gbps},
                    {"multiprocessors", g.multiprocessors}, {"runtime_multiprocessors", g.runtime_multiprocessors},
                    {"l2_bytes", g.l2_bytes}, {"last_level_cache_bytes", g.last_level_cache_bytes},
                    {"fp16_tflops", g.fp16_tflops}, {"source", g.source}});
    table.rows.push_back({g.id, g.name, g.arch,
                          fixed_text(static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024), 2),
                          fixed_text(g.bandwidth_gbps, 0), std::to_string(g.multiprocessors),
                          fixed_text(static_cast<double>(g.l2_bytes) / (1024.0 * 1024), 0),
                          fixed_text(static_cast<double>(g.last_level_cache_bytes) / (1024.0 * 1024), 0)});
  }
  if (format == Format::json) emit(state, render_json({{"gpus", rows}}));
  else emit(state, render_table(table, format));
}

}  // namespace

void add_models_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("models", "The built-in model catalog (ids for --model)");
  add_output_options(*cmd, state);
  cmd->callback([&state] { run_models(state); });
}

void add_gpus_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("gpus", "The built-in GPU catalog (ids for --gpu)");
  add_output_options(*cmd, state);
  cmd->callback([&state] { run_gpus(state); });
}

}  // namespace kvsight::cli
