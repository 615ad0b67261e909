// The figures of `kvsight plan` (issue #26): one model on one GPU as sections of figures,
// a fleet as one row per (model, GPU) pair. Each figure is written once here; the
// renderers (cli/figure_output.cpp) draw it as a table, markdown, CSV or JSON.
#include <algorithm>

#include "kvsight/app/plan.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

// Exact bytes, then a readable binary unit (GiB for anything from 1 GiB up).
std::string bytes_text(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  std::string unit;
  if (bytes >= (1ull << 30))
    unit = gib_text(bytes, 3);
  else if (bytes >= (1ull << 20))
    unit = fixed_text(b / (1 << 20), 2) + " MiB";
  else if (bytes >= 1024)
    unit = fixed_text(b / 1024, 2) + " KiB";
  else
    return commas_text(bytes) + " B";
  return commas_text(bytes) + " B (" + unit + ")";
}

std::string verdict_text(Verdict verdict) { return verdict == Verdict::ok ? "ok" : "check_failed"; }

// What the plan is of: model, GPU, engine, parallelism (JSON only; the title says it).
FigureSection identity(const PlanItem& item, const EngineOptions& o) {
  const ModelSpec& model = item.model;
  const PlanResult& r = item.result;
  nlohmann::json gpu = nullptr;
  if (item.gpu)
    gpu = {{"id", item.gpu->id}, {"name", item.gpu->name}, {"memory_bytes", item.gpu->memory_bytes}};
  else if (o.gpu_memory_bytes)
    gpu = {{"id", "custom"}, {"name", "--gpu-mem-gib"}, {"memory_bytes", *o.gpu_memory_bytes}};
  return {"",
          {json_figure("model", {{"id", model.id}, {"name", model.display_name}, {"source", model.source}}),
           json_figure("gpu", gpu), json_figure("engine", {{"name", r.engine}, {"version", r.engine_version}}),
           json_figure("parallel", {{"tensor_parallel_size", o.tp}, {"pipeline_parallel_size", o.pp}})}};
}

FigureSection kv_figures(const ModelSpec& model, const PlanResult& r, const EngineOptions& o, bool per_rank) {
  const KvFigures& kv = r.kv;
  const std::string rank_note = per_rank ? "per GPU rank" : "";
  const bool windows = kv.bytes_per_token != kv.bytes_per_token_all_layers;
  FigureSection s{"KV cache (" + (o.kv_cache_dtype == "auto" ? model.dtype + ", auto" : o.kv_cache_dtype) + ")", {}};
  s.figures.push_back({"kv.bytes_per_token", kv.bytes_per_token, "B", "per token (grows with context)",
                       bytes_text(kv.bytes_per_token), windows ? "full-attention layers; " + rank_note : rank_note,
                       ""});
  s.figures.push_back({"kv.bytes_per_token_all_layers", kv.bytes_per_token_all_layers, "B",
                       windows ? "per token, all layers" : "", bytes_text(kv.bytes_per_token_all_layers),
                       "until windows fill", ""});
  s.figures.push_back({"kv.state_bytes_per_sequence", kv.state_bytes_per_sequence, "B",
                       kv.state_bytes_per_sequence > 0 ? "recurrent state per sequence" : "",
                       bytes_text(kv.state_bytes_per_sequence), "constant", ""});
  s.figures.push_back({"kv.block_size", kv.block_size, "tokens", "block size",
                       std::to_string(kv.block_size) + " tokens", "", ""});
  s.figures.push_back({"kv.context", kv.context, "tokens"});
  s.figures.push_back({"kv.bytes_per_sequence", kv.bytes_per_sequence, "B",
                       "per sequence at " + commas_text(kv.context) + " tokens", bytes_text(kv.bytes_per_sequence),
                       commas_text(kv.blocks_per_sequence) + " blocks", ""});
  s.figures.push_back({"kv.blocks_per_sequence", kv.blocks_per_sequence, "blocks"});
  s.figures.push_back({"kv.batch", kv.batch, "sequences"});
  s.figures.push_back({"kv.bytes_per_batch", kv.bytes_per_batch, "B", "per batch of " + commas_text(kv.batch),
                       bytes_text(kv.bytes_per_batch), "", ""});
  s.figures.push_back(json_figure("kv.kv_cache_dtype", o.kv_cache_dtype));
  s.figures.push_back(json_figure("kv.per_rank", true));
  return s;
}

FigureSection weight_figures(const PlanResult& r, bool per_rank) {
  const WeightsEstimate& w = r.weights;
  const std::string exact_note =
      w.exact ? (w.method.find("GGUF") != std::string::npos ? "exact (GGUF)" : "exact (safetensors)") : "estimate";
  FigureSection s{"Weights", {}};
  s.figures.push_back({"weights.params", w.params, "parameters", "parameters", commas_text(w.params),
                       fixed_text(static_cast<double>(w.params) / 1e9, 2) + " B", ""});
  s.figures.push_back({"weights.bytes", w.bytes, "B", "bytes", bytes_text(w.bytes), exact_note,
                       w.exact ? "exact" : "estimate"});
  s.figures.push_back({"weights.bytes_per_rank", w.bytes_per_rank, "B", per_rank ? "bytes per rank" : "",
                       bytes_text(w.bytes_per_rank), "largest rank", ""});
  for (auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"weights.bits_per_weight", w.bits_per_weight}, {"weights.exact", w.exact}, {"weights.method", w.method}})
    s.figures.push_back(json_figure(key, value));
  return s;
}

// What stays in host memory under a layer-splitting engine (llama.cpp -ngl, --no-kv-offload;
// issue #22 item 5); the capacity figures count only the GPU's share.
FigureSection placement_figures(const Placement& p) {
  const std::string exact_note = p.weights_exact ? "exact (GGUF)" : "estimate";
  FigureSection s{"Placement (GPU and host memory)", {}};
  s.figures.push_back({"placement.layers_on_device", p.layers_on_device, "layers", "layers on the GPU",
                       commas_text(p.layers_on_device) + " of " + commas_text(p.layers),
                       std::string("output layer ") + (p.output_on_device ? "on the GPU" : "in host memory"), ""});
  s.figures.push_back(json_figure("placement.layers", p.layers));
  s.figures.push_back(json_figure("placement.output_on_device", p.output_on_device));
  s.figures.push_back(json_figure("placement.kv_on_device", p.kv_on_device));
  s.figures.push_back({"placement.weights_device_bytes", p.weights_device_bytes, "B", "weights on the GPU",
                       bytes_text(p.weights_device_bytes), exact_note, ""});
  s.figures.push_back({"placement.weights_host_bytes", p.weights_host_bytes, "B", "weights in host memory",
                       bytes_text(p.weights_host_bytes), "token embeddings and the layers not offloaded", ""});
  s.figures.push_back({"placement.kv_device_bytes", p.kv_device_bytes, "B", "KV on the GPU",
                       bytes_text(p.kv_device_bytes), p.kv_on_device ? "the offloaded layers' cache" : "", ""});
  s.figures.push_back({"placement.kv_host_bytes", p.kv_host_bytes, "B", "KV in host memory",
                       bytes_text(p.kv_host_bytes), p.kv_on_device ? "" : "--no-kv-offload", ""});
  s.figures.push_back(json_figure("placement.weights_exact", p.weights_exact));
  s.figures.push_back(json_figure("placement.rule", p.rule));
  return s;
}

FigureSection capacity_figures(const PlanItem& item, bool per_rank) {
  const PlanResult& r = item.result;
  FigureSection s{"Capacity" + std::string(per_rank ? " (per rank; minimum over ranks)" : ""), {}};
  if (!r.capacity) {
    s.figures.push_back(json_figure("capacity", nullptr));
  } else {
    const Capacity& c = *r.capacity;
    s.figures.push_back({"capacity.gpu_memory_bytes", c.gpu_memory_bytes, "B", "GPU memory (runtime total)",
                         gib_text(c.gpu_memory_bytes), "", ""});
    s.figures.push_back({"capacity.requested_bytes", c.requested_bytes, "B",
                         c.requested_bytes ? "engine budget" : "", gib_text(c.requested_bytes), "", ""});
    s.figures.push_back({"capacity.overhead_bytes", c.overhead_bytes, "B",
                         c.overhead_bytes ? "runtime overheads" : "", gib_text(c.overhead_bytes),
                         "estimate, see assumptions", "estimate"});
    s.figures.push_back({"capacity.available_kv_bytes", c.available_kv_bytes, "B", "available for KV",
                         gib_text(c.available_kv_bytes), "", ""});
    s.figures.push_back({"capacity.page_bytes", c.page_bytes, "B"});
    s.figures.push_back({"capacity.num_blocks", c.num_blocks, "blocks", "blocks", commas_text(c.num_blocks),
                         "page " + commas_text(c.page_bytes) + " B", ""});
    s.figures.push_back({"capacity.kv_tokens", c.kv_tokens, "tokens", "KV tokens", commas_text(c.kv_tokens), "", ""});
    s.figures.push_back({"capacity.max_model_len", c.max_model_len, "tokens"});
    s.figures.push_back({"capacity.max_concurrency", c.max_concurrency, "sequences",
                         "max concurrency at " + commas_text(c.max_model_len), fixed_text(c.max_concurrency, 2) + "x",
                         c.fits ? "fits" : "DOES NOT FIT (exit 1)", ""});
    // Issue #22 item 4: what KV holds is not what runs; the engine's scheduler caps it.
    if (c.max_running > 0) {
      const bool cap_binds = static_cast<double>(c.max_running) < c.max_concurrency;
      s.figures.push_back({"capacity.max_running", c.max_running, "sequences", "runs at most",
                           commas_text(c.max_running) + " at once",
                           c.max_running_source + (cap_binds ? "; below what KV holds: the cap limits concurrency"
                                                             : "")});
    } else {
      s.figures.push_back(json_figure("capacity.max_running", nullptr));
    }
    s.figures.push_back(json_figure("capacity.max_running_source",
                                    c.max_running > 0 ? nlohmann::json(c.max_running_source) : nlohmann::json(nullptr)));
    s.figures.push_back({"capacity.fits", c.fits, ""});
    s.figures.push_back({"capacity.largest_max_model_len", c.largest_max_model_len, "tokens",
                         "largest max_model_len that fits", commas_text(c.largest_max_model_len), "", ""});
    s.figures.push_back(json_figure("capacity.limiting_rank", c.limiting_rank));
  }
  // The start-up checks: CSV rows here (after capacity, before the assumptions), one
  // JSON array; the readable views show refusals in the footer's warnings.
  nlohmann::json checks = nlohmann::json::array();
  for (const StartupCheck& c : item.decision.checks) {
    checks.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}, {"source", c.source}});
    s.figures.push_back(csv_figure("constraint." + c.name, c.ok ? "ok" : "refused", c.detail));
  }
  s.figures.insert(s.figures.end(), {json_figure("constraints", checks), json_figure("refusals", item.decision.refusals),
                                     json_figure("verdict", verdict_text(item.verdict))});
  return s;
}

FigureSection assumption_figures(const PlanResult& r) {
  FigureSection s{"Assumptions and estimates (override with the flags named)", {}};
  nlohmann::json all = nlohmann::json::array();
  for (const auto& a : r.assumptions) {
    all.push_back({{"name", a.name}, {"value", a.value}, {"why", a.why}});
    Figure f{"assumption." + a.name, a.value, "", a.name, a.value, a.why};
    f.in_json = false;
    s.figures.push_back(f);
  }
  s.figures.push_back(json_figure("assumptions", all));
  return s;
}

// Engine log lines, notes and warnings: CSV rows and JSON arrays; the readable views
// print them in the footer.
FigureSection message_figures(const PlanResult& r) {
  FigureSection s{"", {}};
  auto rows = [&s](const std::string& section, const std::string& key, const std::vector<std::string>& lines) {
    for (const std::string& line : lines) {
      s.figures.push_back(csv_figure(section + "." + key, line));
    }
  };
  rows("engine_log", r.engine, r.engine_log);
  rows("note", "", r.notes);
  rows("warning", "", r.warnings);
  for (auto& [key, lines] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"engine_log", r.engine_log}, {"notes", r.notes}, {"warnings", r.warnings}})
    s.figures.push_back(json_figure(key, lines));
  return s;
}

// One plan as sections of figures (the single-pair report; each row of the fleet's JSON).
FigureDoc item_figures(const PlanItem& item, const EngineOptions& o) {
  const PlanResult& r = item.result;
  const bool per_rank = o.tp > 1 || o.pp > 1;
  FigureDoc doc;
  doc.title = "kvsight plan: " + (item.model.display_name.empty() ? item.model.id : item.model.display_name);
  if (item.gpu) doc.title += " on " + item.gpu->name;
  doc.title += " under " + r.engine + (r.engine_version.empty() ? "" : " " + r.engine_version);
  if (per_rank) doc.title += " (TP " + std::to_string(o.tp) + ", PP " + std::to_string(o.pp) + ")";
  doc.sections = {identity(item, o), kv_figures(item.model, r, o, per_rank), weight_figures(r, per_rank)};
  if (r.placement) doc.sections.push_back(placement_figures(*r.placement));
  doc.sections.insert(doc.sections.end(), {capacity_figures(item, per_rank), assumption_figures(r), message_figures(r)});
  if (!r.engine_log.empty()) {
    doc.footer.push_back("What " + r.engine + " would log:");
    for (const auto& line : r.engine_log) doc.footer.push_back("  " + line);
  }
  for (const auto& n : r.notes) doc.footer.push_back("note: " + n);
  for (const auto& w : r.warnings) doc.footer.push_back("WARNING: " + w);
  doc.footer.push_back("Bytes are per GPU rank; GiB = 2^30 bytes.");
  return doc;
}

// Fleet: one row per (model, GPU) pair; CSV carries raw numbers with units in the column
// names, the table readable figures; JSON each pair's whole plan.
FigureDoc fleet_figures(const PlanOutcome& outcome) {
  const EngineOptions& o = outcome.options;
  std::size_t gpus = 0;
  for (const PlanItem& item : outcome.items)
    if (&item == &outcome.items.front() || item.model.id == outcome.items.front().model.id) ++gpus;
  const std::size_t models = outcome.items.size() / std::max<std::size_t>(1, gpus);
  FigureTable t;
  t.title = "kvsight plan: " + std::to_string(models) + " model(s) x " + std::to_string(gpus) + " GPU(s) under " +
            outcome.engine + " (TP " + std::to_string(o.tp) + ", PP " + std::to_string(o.pp) + ")";
  t.columns = {{"model", "model"},
               {"gpu", "gpu"},
               {"KV B/token", "kv_bytes_per_token", true},
               {"KV/seq GiB", "kv_bytes_per_sequence", true},
               {"weights GiB", "weights_bytes_per_rank", true},
               {"KV avail GiB", "available_kv_bytes", true},
               {"blocks", "num_blocks", true},
               {"KV tokens", "kv_tokens", true},
               {"max_model_len", "max_model_len_tokens", true},
               {"max conc", "max_concurrency", true},
               {"", "fits"},
               {"largest len", "largest_max_model_len_tokens", true},
               {"", "warnings"}};
  FigureDoc doc;
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanItem& item : outcome.items) {
    const PlanResult& r = item.result;
    rows.push_back(figures_json(item_figures(item, o)));
    const std::string gpu_id = item.gpu ? item.gpu->id : "-";
    std::string warnings;
    for (const std::string& w : r.warnings) {
      doc.footer.push_back("WARNING " + item.model.id + " on " + gpu_id + ": " + w);
      warnings += (warnings.empty() ? "" : " | ") + w;
    }
    std::vector<FigureCell> row{{item.model.id, item.model.id},
                                {gpu_id, gpu_id},
                                {commas_text(r.kv.bytes_per_token), r.kv.bytes_per_token},
                                {fixed_text(to_gib(r.kv.bytes_per_sequence), 2), r.kv.bytes_per_sequence},
                                {fixed_text(to_gib(r.weights.bytes_per_rank), 2), r.weights.bytes_per_rank}};
    if (r.capacity) {
      const Capacity& c = *r.capacity;
      const std::string concurrency = item.decision.refused() ? "refused"
                                      : c.fits                ? fixed_text(c.max_concurrency, 2) + "x"
                                                              : "no fit";
      row.insert(row.end(), {{fixed_text(to_gib(c.available_kv_bytes), 2), c.available_kv_bytes},
                             {commas_text(c.num_blocks), c.num_blocks},
                             {commas_text(c.kv_tokens), c.kv_tokens},
                             {commas_text(c.max_model_len), c.max_model_len},
                             {concurrency, c.max_concurrency},
                             {"", item.fits},
                             {commas_text(c.largest_max_model_len), c.largest_max_model_len}});
    } else {
      row.insert(row.end(), {{"-", nullptr}, {"-", nullptr}, {"-", nullptr}, {"-", nullptr}, {"-", nullptr},
                             {"", nullptr}, {"-", nullptr}});
    }
    row.push_back({"", warnings});
    t.rows.push_back(std::move(row));
  }
  doc.sections.push_back(json_section({{"rows", rows}, {"verdict", verdict_text(outcome.verdict)}}));
  doc.tables.push_back(std::move(t));
  doc.footer_spaced = false;  // the warnings follow the table's last row
  return doc;
}

}  // namespace

FigureDoc plan_figures(const PlanOutcome& outcome) {
  return outcome.fleet ? fleet_figures(outcome) : item_figures(outcome.items.front(), outcome.options);
}

}  // namespace kvsight::app
