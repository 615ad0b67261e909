// kvsight plan: KV footprints, weights, and what fits under an engine's budget
// rules. One model x one GPU gives a report; comma lists or `all` give a fleet
// table with one row per pair.
#include <charconv>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/plan.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/counts.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::cli {

namespace {

struct PlanArgs {
  std::string model;
  std::string gpu;
  std::optional<std::string> gpu_mem_gib;  // the one byte-size grammar, in GiB (kvsight/counts.hpp parse_gib)
  // Overhead overrides, read as strict decimals (parse_number_in): CLI11's own conversion
  // would take "0x10" and "0x1p4" as 16 (issue #14 item 3).
  std::optional<std::string> activation_gib, non_torch_gib, cuda_graph_gib, weights_gib, kv_transfer_gib;
  EngineOptions engine;
  bool no_warnings = false;
};

std::optional<double> overhead_gib(const std::optional<std::string>& text, const char* flag) {
  if (!text) return std::nullopt;
  return parse_number_in(*text, flag, 0.0, 1.0e9, "a non-negative decimal number of GiB below 1e9");
}

void validate(PlanArgs& a) {
  a.engine.overheads.activation_gib = overhead_gib(a.activation_gib, "--activation-gib");
  a.engine.overheads.non_torch_gib = overhead_gib(a.non_torch_gib, "--non-torch-gib");
  a.engine.overheads.cuda_graph_gib = overhead_gib(a.cuda_graph_gib, "--cuda-graph-gib");
  a.engine.overheads.weights_gib = overhead_gib(a.weights_gib, "--weights-gib");
  a.engine.overheads.kv_transfer_gib = overhead_gib(a.kv_transfer_gib, "--kv-transfer-gib");
  if (a.gpu_mem_gib) {
    const std::uint64_t bytes = parse_gib(*a.gpu_mem_gib, "--gpu-mem-gib");
    // Below 1e7 GiB, as before the grammar was shared: no device is a thousandth of that.
    if (bytes == 0 || bytes >= 10000000ull * (1ull << 30))
      throw InputError("--gpu-mem-gib",
                       "is " + *a.gpu_mem_gib + "; allowed: a positive number of GiB below 1e7");
    a.engine.gpu_memory_bytes = bytes;
  }
}

nlohmann::json checks_json(const std::vector<StartupCheck>& checks) {
  nlohmann::json out = nlohmann::json::array();
  for (const StartupCheck& c : checks)
    out.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}, {"source", c.source}});
  return out;
}

nlohmann::json to_json(const ModelSpec& model, const GpuSpec* gpu, const PlanResult& r,
                       const EngineOptions& o) {
  nlohmann::json j;
  j["model"] = {{"id", model.id}, {"name", model.display_name}, {"source", model.source}};
  if (gpu)
    j["gpu"] = {{"id", gpu->id}, {"name", gpu->name}, {"memory_bytes", gpu->memory_bytes}};
  else if (o.gpu_memory_bytes)
    j["gpu"] = {{"id", "custom"}, {"name", "--gpu-mem-gib"}, {"memory_bytes", *o.gpu_memory_bytes}};
  else
    j["gpu"] = nullptr;
  j["engine"] = {{"name", r.engine}, {"version", r.engine_version}};
  j["parallel"] = {{"tensor_parallel_size", o.tp}, {"pipeline_parallel_size", o.pp}};
  j["kv"] = {{"bytes_per_token", r.kv.bytes_per_token},
             {"bytes_per_token_all_layers", r.kv.bytes_per_token_all_layers},
             {"state_bytes_per_sequence", r.kv.state_bytes_per_sequence},
             {"bytes_per_sequence", r.kv.bytes_per_sequence},
             {"bytes_per_batch", r.kv.bytes_per_batch},
             {"block_size", r.kv.block_size},
             {"blocks_per_sequence", r.kv.blocks_per_sequence},
             {"context", r.kv.context},
             {"batch", r.kv.batch},
             {"kv_cache_dtype", o.kv_cache_dtype},
             {"per_rank", true}};
  j["weights"] = {{"params", r.weights.params},
                  {"bytes", r.weights.bytes},
                  {"bytes_per_rank", r.weights.bytes_per_rank},
                  {"bits_per_weight", r.weights.bits_per_weight},
                  {"exact", r.weights.exact},
                  {"method", r.weights.method}};
  if (r.capacity) {
    const Capacity& c = *r.capacity;
    j["capacity"] = {{"gpu_memory_bytes", c.gpu_memory_bytes},
                     {"requested_bytes", c.requested_bytes},
                     {"overhead_bytes", c.overhead_bytes},
                     {"available_kv_bytes", c.available_kv_bytes},
                     {"page_bytes", c.page_bytes},
                     {"num_blocks", c.num_blocks},
                     {"kv_tokens", c.kv_tokens},
                     {"max_concurrency", c.max_concurrency},
                     {"max_model_len", c.max_model_len},
                     {"fits", c.fits},
                     {"largest_max_model_len", c.largest_max_model_len},
                     {"limiting_rank", c.limiting_rank}};
  } else {
    j["capacity"] = nullptr;
  }
  j["engine_log"] = r.engine_log;
  auto& assumptions = j["assumptions"] = nlohmann::json::array();
  for (const auto& a : r.assumptions)
    assumptions.push_back({{"name", a.name}, {"value", a.value}, {"why", a.why}});
  j["notes"] = r.notes;
  j["warnings"] = r.warnings;
  return j;
}

// Exact bytes, then a readable binary unit (GiB for anything from 1 GiB up).
std::string bytes_cell(std::uint64_t bytes) {
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

Report to_report(const ModelSpec& model, const GpuSpec* gpu, const PlanResult& r, const EngineOptions& o) {
  Report rep;
  std::string title = "kvsight plan: " + (model.display_name.empty() ? model.id : model.display_name);
  if (gpu) title += " on " + gpu->name;
  title += " under " + r.engine + (r.engine_version.empty() ? "" : " " + r.engine_version);
  if (o.tp > 1 || o.pp > 1) title += " (TP " + std::to_string(o.tp) + ", PP " + std::to_string(o.pp) + ")";
  rep.title = title;
  const bool per_rank = o.tp > 1 || o.pp > 1;
  const std::string rank_note = per_rank ? "per GPU rank" : "";

  ReportSection kv{
      "KV cache (" + (o.kv_cache_dtype == "auto" ? model.dtype + ", auto" : o.kv_cache_dtype) + ")", {}};
  kv.rows.push_back({"per token (grows with context)", bytes_cell(r.kv.bytes_per_token),
                     r.kv.bytes_per_token == r.kv.bytes_per_token_all_layers
                         ? rank_note
                         : "full-attention layers; " + rank_note});
  if (r.kv.bytes_per_token_all_layers != r.kv.bytes_per_token)
    kv.rows.push_back(
        {"per token, all layers", bytes_cell(r.kv.bytes_per_token_all_layers), "until windows fill"});
  if (r.kv.state_bytes_per_sequence > 0)
    kv.rows.push_back(
        {"recurrent state per sequence", bytes_cell(r.kv.state_bytes_per_sequence), "constant"});
  kv.rows.push_back({"block size", std::to_string(r.kv.block_size) + " tokens", ""});
  kv.rows.push_back({"per sequence at " + commas_text(r.kv.context) + " tokens",
                     bytes_cell(r.kv.bytes_per_sequence), commas_text(r.kv.blocks_per_sequence) + " blocks"});
  kv.rows.push_back({"per batch of " + commas_text(r.kv.batch), bytes_cell(r.kv.bytes_per_batch), ""});
  rep.sections.push_back(kv);

  ReportSection w{"Weights", {}};
  w.rows.push_back({"parameters", commas_text(r.weights.params),
                    fixed_text(static_cast<double>(r.weights.params) / 1e9, 2) + " B"});
  w.rows.push_back(
      {"bytes", bytes_cell(r.weights.bytes),
       r.weights.exact
           ? (r.weights.method.find("GGUF") != std::string::npos ? "exact (GGUF)" : "exact (safetensors)")
           : "estimate"});
  if (per_rank) w.rows.push_back({"bytes per rank", bytes_cell(r.weights.bytes_per_rank), "largest rank"});
  rep.sections.push_back(w);

  if (r.capacity) {
    const Capacity& c = *r.capacity;
    ReportSection cap{"Capacity" + std::string(per_rank ? " (per rank; minimum over ranks)" : ""), {}};
    cap.rows.push_back({"GPU memory (runtime total)", gib_text(c.gpu_memory_bytes), ""});
    if (c.requested_bytes) cap.rows.push_back({"engine budget", gib_text(c.requested_bytes), ""});
    if (c.overhead_bytes)
      cap.rows.push_back({"runtime overheads", gib_text(c.overhead_bytes), "estimate, see assumptions"});
    cap.rows.push_back({"available for KV", gib_text(c.available_kv_bytes), ""});
    cap.rows.push_back({"blocks", commas_text(c.num_blocks), "page " + commas_text(c.page_bytes) + " B"});
    cap.rows.push_back({"KV tokens", commas_text(c.kv_tokens), ""});
    cap.rows.push_back({"max concurrency at " + commas_text(c.max_model_len),
                        fixed_text(c.max_concurrency, 2) + "x", c.fits ? "fits" : "DOES NOT FIT (exit 1)"});
    cap.rows.push_back({"largest max_model_len that fits", commas_text(c.largest_max_model_len), ""});
    rep.sections.push_back(cap);
  }
  if (!r.assumptions.empty()) {
    ReportSection as{"Assumptions and estimates (override with the flags named)", {}};
    for (const auto& a : r.assumptions) as.rows.push_back({a.name, a.value, a.why});
    rep.sections.push_back(as);
  }
  if (!r.engine_log.empty()) {
    rep.footer.push_back("What " + r.engine + " would log:");
    for (const auto& line : r.engine_log) rep.footer.push_back("  " + line);
  }
  for (const auto& n : r.notes) rep.footer.push_back("note: " + n);
  for (const auto& wmsg : r.warnings) rep.footer.push_back("WARNING: " + wmsg);
  rep.footer.push_back("Bytes are per GPU rank; GiB = 2^30 bytes.");
  return rep;
}

// CSV of one plan: one row per figure, raw numbers, units in their own column
// (issue #9: CSV carries numbers, not display strings), then every warning, note,
// assumption and engine log line.
Table plan_csv(const app::PlanItem& item) {
  Table t;
  t.columns = {"section", "key", "value", "unit", "note"};
  const PlanResult& r = item.result;
  auto row = [&t](const std::string& section, const std::string& key, const std::string& value,
                  const std::string& unit, const std::string& note = "") {
    t.rows.push_back({section, key, value, unit, note});
  };
  auto n = [](auto v) { return std::to_string(v); };
  row("kv", "bytes_per_token", n(r.kv.bytes_per_token), "B");
  row("kv", "bytes_per_token_all_layers", n(r.kv.bytes_per_token_all_layers), "B");
  row("kv", "state_bytes_per_sequence", n(r.kv.state_bytes_per_sequence), "B");
  row("kv", "block_size", n(r.kv.block_size), "tokens");
  row("kv", "context", n(r.kv.context), "tokens");
  row("kv", "bytes_per_sequence", n(r.kv.bytes_per_sequence), "B");
  row("kv", "blocks_per_sequence", n(r.kv.blocks_per_sequence), "blocks");
  row("kv", "batch", n(r.kv.batch), "sequences");
  row("kv", "bytes_per_batch", n(r.kv.bytes_per_batch), "B");
  row("weights", "params", n(r.weights.params), "parameters");
  row("weights", "bytes", n(r.weights.bytes), "B", r.weights.exact ? "exact" : "estimate");
  row("weights", "bytes_per_rank", n(r.weights.bytes_per_rank), "B");
  if (r.capacity) {
    const Capacity& c = *r.capacity;
    row("capacity", "gpu_memory_bytes", n(c.gpu_memory_bytes), "B");
    row("capacity", "requested_bytes", n(c.requested_bytes), "B");
    row("capacity", "overhead_bytes", n(c.overhead_bytes), "B", "estimate");
    row("capacity", "available_kv_bytes", n(c.available_kv_bytes), "B");
    row("capacity", "page_bytes", n(c.page_bytes), "B");
    row("capacity", "num_blocks", n(c.num_blocks), "blocks");
    row("capacity", "kv_tokens", n(c.kv_tokens), "tokens");
    row("capacity", "max_model_len", n(c.max_model_len), "tokens");
    row("capacity", "max_concurrency", fixed_text(c.max_concurrency, 6), "sequences");
    row("capacity", "fits", c.fits ? "true" : "false", "");
    row("capacity", "largest_max_model_len", n(c.largest_max_model_len), "tokens");
  }
  for (const StartupCheck& c : item.decision.checks)
    row("constraint", c.name, c.ok ? "ok" : "refused", "", c.detail);
  for (const auto& a : r.assumptions) row("assumption", a.name, a.value, "", a.why);
  for (const auto& line : r.engine_log) row("engine_log", r.engine, line, "");
  for (const auto& note : r.notes) row("note", "", note, "");
  for (const auto& warning : r.warnings) row("warning", "", warning, "");
  return t;
}

void run_plan(PlanArgs args, CliState& state) {
  check_engine_spellings(state, args.engine.engine);
  validate(args);
  const Format format = state.format();
  app::PlanRequest request;
  request.models = args.model;
  request.gpus = args.gpu;
  request.options = args.engine;
  request.decode_warnings = !args.no_warnings;
  const app::PlanOutcome outcome = app::run_plan(request);
  state.exit_code = app::exit_code(outcome.verdict);
  const EngineOptions& options = outcome.options;

  if (!outcome.fleet) {
    const app::PlanItem& item = outcome.items.front();
    const GpuSpec* gpu = item.gpu ? &*item.gpu : nullptr;
    if (format == Format::json) {
      nlohmann::json j = to_json(item.model, gpu, item.result, options);
      j["constraints"] = checks_json(item.decision.checks);
      j["refusals"] = item.decision.refusals;
      j["verdict"] = item.verdict == app::Verdict::ok ? "ok" : "check_failed";
      emit(state, render_json(j));
    } else if (format == Format::csv) {
      emit(state, render_table(plan_csv(item), format));
    } else {
      emit(state, render_report(to_report(item.model, gpu, item.result, options), format));
    }
    return;
  }

  // Fleet: one row per (model, GPU) pair. Bad input in one pair is still an error for
  // the whole run: a capacity table with a silently missing row would mislead.
  std::size_t gpus = 0;
  for (const app::PlanItem& item : outcome.items)
    if (&item == &outcome.items.front() || item.model.id == outcome.items.front().model.id) ++gpus;
  std::size_t models = outcome.items.size() / std::max<std::size_t>(1, gpus);
  Table table;
  table.title = "kvsight plan: " + std::to_string(models) + " model(s) x " + std::to_string(gpus) +
                " GPU(s) under " + outcome.engine + " (TP " + std::to_string(options.tp) + ", PP " +
                std::to_string(options.pp) + ")";
  const bool csv = format == Format::csv;
  // CSV: raw numbers, units in the column names; table/markdown: readable figures.
  if (csv) {
    table.columns = {"model",
                     "gpu",
                     "kv_bytes_per_token",
                     "kv_bytes_per_sequence",
                     "weights_bytes_per_rank",
                     "available_kv_bytes",
                     "num_blocks",
                     "kv_tokens",
                     "max_model_len_tokens",
                     "max_concurrency",
                     "fits",
                     "largest_max_model_len_tokens",
                     "warnings"};
  } else {
    table.columns = {"model",  "gpu",       "KV B/token",    "KV/seq GiB", "weights GiB", "KV avail GiB",
                     "blocks", "KV tokens", "max_model_len", "max conc",   "largest len"};
    table.right_align = {false, false, true, true, true, true, true, true, true, true, true};
  }
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> footer;
  for (const app::PlanItem& item : outcome.items) {
    const PlanResult& r = item.result;
    const GpuSpec* gpu = item.gpu ? &*item.gpu : nullptr;
    if (format == Format::json) {
      nlohmann::json j = to_json(item.model, gpu, r, options);
      j["constraints"] = checks_json(item.decision.checks);
      j["refusals"] = item.decision.refusals;
      j["verdict"] = item.verdict == app::Verdict::ok ? "ok" : "check_failed";
      rows.push_back(std::move(j));
      continue;
    }
    const std::string gpu_id = gpu ? gpu->id : "-";
    for (const std::string& w : r.warnings)
      footer.push_back("WARNING " + item.model.id + " on " + gpu_id + ": " + w);
    if (csv) {
      std::string warnings;
      for (const std::string& w : r.warnings) warnings += (warnings.empty() ? "" : " | ") + w;
      std::vector<std::string> row{item.model.id, gpu_id, std::to_string(r.kv.bytes_per_token),
                                   std::to_string(r.kv.bytes_per_sequence),
                                   std::to_string(r.weights.bytes_per_rank)};
      if (r.capacity) {
        const Capacity& c = *r.capacity;
        row.insert(row.end(), {std::to_string(c.available_kv_bytes), std::to_string(c.num_blocks),
                               std::to_string(c.kv_tokens), std::to_string(c.max_model_len),
                               fixed_text(c.max_concurrency, 6), item.fits ? "true" : "false",
                               std::to_string(c.largest_max_model_len)});
      } else {
        row.insert(row.end(), 7, "");
      }
      row.push_back(warnings);
      table.rows.push_back(std::move(row));
      continue;
    }
    std::vector<std::string> row{item.model.id, gpu_id, commas_text(r.kv.bytes_per_token),
                                 fixed_text(to_gib(r.kv.bytes_per_sequence), 2),
                                 fixed_text(to_gib(r.weights.bytes_per_rank), 2)};
    if (r.capacity) {
      const Capacity& c = *r.capacity;
      row.push_back(fixed_text(to_gib(c.available_kv_bytes), 2));
      row.push_back(commas_text(c.num_blocks));
      row.push_back(commas_text(c.kv_tokens));
      row.push_back(commas_text(c.max_model_len));
      row.push_back(item.decision.refused() ? "refused"
                    : c.fits                ? fixed_text(c.max_concurrency, 2) + "x"
                                            : "no fit");
      row.push_back(commas_text(c.largest_max_model_len));
    } else {
      row.insert(row.end(), 6, "-");
    }
    table.rows.push_back(std::move(row));
  }
  if (format == Format::json) {
    emit(state, render_json({{"rows", rows},
                             {"verdict", outcome.verdict == app::Verdict::ok ? "ok" : "check_failed"}}));
    return;
  }
  std::string text = render_table(table, format);
  if (!csv && !footer.empty()) {
    for (const std::string& line : footer) text += line + "\n";
  }
  emit(state, text);
}

}  // namespace

void add_plan_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd =
      app.add_subcommand("plan", "KV cache per token/sequence/batch, weights, and how many sequences fit");
  cmd->description(
      "KV cache per token, per sequence (with paged-block rounding) and per batch; the weights; and, with a "
      "GPU,\n"
      "what the engine leaves for KV, blocks, KV tokens, max concurrency at max_model_len and the largest\n"
      "max_model_len that fits, with the lines the engine itself logs at start-up.\n"
      "Flags use the engines' own names; each flag's help says which engine reads it.\n"
      "Examples:\n"
      "  kvsight plan --model smollm3-3b --gpu h200\n"
      "  kvsight plan --model llama-3.1-8b --gpu rtx3090 --max-model-len 20000 --gpu-memory-utilization 0.9\n"
      "  kvsight plan --model all --gpu h100-sxm,mi300x --format csv");
  auto& e = args->engine;
  add_model_gpu_flags(*cmd, args->model, args->gpu, true,
                      "Catalog id or Hugging Face id (kvsight models), config.json path, model directory, or "
                      "org/name in the local HF cache; comma list or 'all' for a fleet table",
                      "GPU catalog id, any case (kvsight gpus); comma list or 'all'");
  cmd->add_option("--gpu-mem-gib", args->gpu_mem_gib, "GPU memory in GiB instead of a catalog GPU");
  add_engine_flags(*cmd, e);
  // No range beyond 64 bits: the products they enter are overflow-checked and say which.
  add_count_flag(*cmd, "--context", e.context,
                 "Tokens per sequence for the kv.* figures (default: max_model_len)", 0, UINT64_MAX);
  add_count_flag(*cmd, "--batch,-b", e.batch,
                 "Sequences in the batch for kv.bytes_per_batch; with a GPU, exit 1 unless that many fit "
                 "(default 1)",
                 1, UINT64_MAX);
  cmd->add_option("--activation-gib", args->activation_gib, "Override the activation-peak estimate (GiB)");
  cmd->add_option("--non-torch-gib", args->non_torch_gib, "Override the non-torch memory estimate (GiB)");
  cmd->add_option("--cuda-graph-gib", args->cuda_graph_gib, "Override the CUDA-graph memory estimate (GiB)");
  cmd->add_option("--weights-gib", args->weights_gib, "Override the weights size (GiB, whole model)");
  cmd->add_option(
      "--kv-transfer-gib", args->kv_transfer_gib,
      "vLLM: GPU memory a KV-transfer connector (LMCache, NIXL) takes per rank, subtracted before "
      "the KV cache (GiB; vLLM does not size it)");
  cmd->add_flag("--no-warnings", args->no_warnings, "Skip the decode-cliff check");
  add_output_options(*cmd, state);
  cmd->footer(
      "Exit codes: 0 the plan fits; 1 the engine would refuse to start (e.g. --tp does not divide the "
      "attention\n"
      "heads, --max-model-len above the model's maximum) or --batch sequences at max_model_len do not fit;\n"
      "2 bad input (also an overhead flag the engine's budget has no term for, e.g. --cuda-graph-gib with "
      "sglang).\n"
      "JSON: kv.*, weights.*, capacity.*, constraints[], refusals[], warnings[], engine_log[].");
  cmd->callback([args, &state] { run_plan(*args, state); });
}

}  // namespace kvsight::cli
