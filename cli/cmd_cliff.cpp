// kvsight cliff: decode time versus context for the selected attention path and a
// split-KV path, beside the published vLLM #50264 / PR #45916 figures, optionally
// with both probe kernels measured on this device.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/cliff.hpp"
#include "kvsight/counts.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"
#include "kvsight/probes/probes.hpp"
#include "svg_plot.hpp"

namespace kvsight::cli {

namespace {

struct CliffArgs {
  std::string scenario;
  std::string model;
  std::string gpu;
  EngineOptions options;
  std::string contexts_text;
  std::string measure_contexts_text;
  double baseline_ms = -1;
  std::string calibration_path;
  std::string backend;
  std::string plot_path;
  int repeats = 5;
};

// Contexts in the one count grammar (kvsight/counts.hpp): "1024,8K,32K".
std::vector<std::uint64_t> parse_contexts(const std::string& text, const std::string& field) {
  return parse_count_list(text, field, 1, 1ull << 24);
}

// --baseline-ms is a measured time: a finite number of milliseconds > 0. CLI11
// converts "nan", "inf" and "-5" to doubles, and a negative one was then silently
// ignored (issue #14 item 4).
CLI::Validator finite_positive_ms() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(begin, &end);
        if (text.empty() || end != begin + text.size() || errno == ERANGE || !std::isfinite(value) ||
            !(value > 0))
          return "is '" + text + "'; allowed: a finite number of milliseconds > 0";
        return "";
      },
      "MS > 0");
}

std::string pct(double predicted, double published) {
  return (predicted >= published ? "+" : "") + fixed_text((predicted - published) / published * 100.0, 1) +
         "%";
}

// docs/architecture.md "Output contract": cliff JSON points carry {context, time_us, bytes, gbps} like the
// probes: time_us is one attention call of the primary layers, bytes the K/V it reads.
nlohmann::json point_json(const DecodePoint& p, const DecodeScenario& scenario) {
  const DecodeLayerGroup& group = scenario.groups.front();
  const std::uint64_t context = group.window > 0 ? std::min(p.context, group.window) : p.context;
  const double bytes = static_cast<double>(context) * group.bytes_per_token_per_program *
                       static_cast<double>(scenario.batch * group.kv_heads_per_rank);
  return {{"context", p.context},
          {"time_us", p.attention_us_per_call},
          {"bytes", static_cast<std::uint64_t>(bytes)},
          {"gbps", p.attention_us_per_call > 0 ? bytes / p.attention_us_per_call / 1000.0 : 0.0},
          {"ms_per_token", p.ms_per_token},
          {"tok_s", p.tok_s},
          {"attention_us_per_call", p.attention_us_per_call},
          {"attention_ms_per_step", p.attention_ms_per_step},
          {"splits", p.splits}};
}

nlohmann::json calibration_json(const KernelCalibration& c) {
  return {{"source", c.source},
          {"call_overhead_us", c.call_overhead_us},
          {"per_program_gbps", c.per_program_gbps},
          {"achieved_bandwidth_gbps", c.achieved_bandwidth_gbps},
          {"reduce_us", c.reduce_us},
          {"concurrent_programs", c.concurrent_programs}};
}

struct Measured {
  bool present = false;
  std::string backend, device;
  std::vector<probes::SweepResult> sweeps;
};

// The published figure at this context (scenario mode only), or nullptr.
const PublishedPoint* published_point(bool scenario_mode, const std::vector<PublishedPoint>& list,
                                      std::uint64_t context) {
  if (!scenario_mode) return nullptr;
  for (const PublishedPoint& p : list)
    if (p.context == context) return &p;
  return nullptr;
}

// CSV of the whole table output in one table (issue #9: formats are complete): a `table`
// column says which table of the text output a row belongs to (setup, context_cost,
// selected_path, split_path, measured, measured_point, warning, note); numbers are raw
// (round_trip_text: no thousands separators, no units, no "x" or "%"), units are in
// the column names or, for key/value rows, in `unit`. README "JSON contract" says so.
const std::vector<std::string> kCliffCsvColumns = {"table",
                                                   "kernel",
                                                   "context_tokens",
                                                   "splits",
                                                   "attention_us_per_call",
                                                   "ms_per_token",
                                                   "tok_s",
                                                   "published_ms_per_token",
                                                   "published_tok_s",
                                                   "diff_percent",
                                                   "key",
                                                   "value",
                                                   "unit",
                                                   "note"};

struct CliffCsv {
  Table table;
  CliffCsv() { table.columns = kCliffCsvColumns; }
  // A key/value row: figure `key` = value [unit], note.
  void figure(const std::string& name, const std::string& key, const std::string& value,
              const std::string& unit = "", const std::string& note = "", const std::string& kernel = "") {
    table.rows.push_back({name, kernel, "", "", "", "", "", "", "", "", key, value, unit, note});
  }
  void number(const std::string& name, const std::string& key, double value, const std::string& unit,
              const std::string& note = "", const std::string& kernel = "") {
    figure(name, key, round_trip_text(value), unit, note, kernel);
  }
  // One point of a decode curve, with the published figures where there are some.
  void point(const std::string& name, const std::string& kernel, const DecodePoint& p,
             const PublishedPoint* published) {
    table.rows.push_back(
        {name, kernel, std::to_string(p.context), std::to_string(p.splits),
         round_trip_text(p.attention_us_per_call), round_trip_text(p.ms_per_token), round_trip_text(p.tok_s),
         published ? round_trip_text(published->ms_per_token) : "",
         published ? round_trip_text(published->tok_s) : "",
         published ? round_trip_text(diff_percent(p.ms_per_token, published->ms_per_token)) : "", "", "", "",
         ""});
  }
  static double diff_percent(double predicted, double published) {
    return (predicted - published) / published * 100.0;
  }
};

// Every figure of the table output as CliffCsv rows: the two report sections, both
// curves, the measured kernels (a summary row per figure and one row per point), then
// the warnings and notes of the footer.
Table cliff_csv(const app::CliffOutcome& out, const std::vector<std::string>& notes) {
  CliffCsv csv;
  const DecodeScenario& scenario = out.scenario;
  const DecodeLayerGroup& primary = scenario.groups.front();
  const KernelCalibration& cal = scenario.calibration;
  const auto count = [](std::uint64_t v) { return std::to_string(v); };
  csv.figure("setup", "title", out.title);
  csv.figure("setup", "model", out.model_id);
  csv.figure("setup", "gpu", out.gpu_id);
  csv.figure("setup", "engine", out.engine);
  csv.figure("setup", "attention_path", out.kernel, "",
             out.splits_context ? "splits the context" : "does NOT split the context", out.kernel);
  csv.figure("setup", "splits_context", out.splits_context ? "true" : "false");
  csv.figure("setup", "attention_layers", count(primary.layers), "layers");
  csv.figure("setup", "head_dim", count(primary.head_dim), "elements");
  csv.figure("setup", "kv_heads_per_rank", count(primary.kv_heads_per_rank), "heads");
  csv.figure("setup", "q_heads_per_rank", count(out.q_heads_per_rank), "heads");
  csv.figure("setup", "batch", count(scenario.batch), "sequences");
  csv.figure("setup", "block_size", count(out.block_size), "tokens");
  csv.figure("setup", "programs_per_call", count(scenario.batch * primary.kv_heads_per_rank), "programs",
             "batch x KV heads per rank (no split)");
  csv.number("setup", "per_program_gbps", cal.per_program_gbps, "GB/s", cal.source);
  // The calibration's source once (its first figure, and the first note); the rest share it.
  csv.number("setup", "call_overhead_us", cal.call_overhead_us, "us");
  csv.number("setup", "achieved_bandwidth_gbps", cal.achieved_bandwidth_gbps, "GB/s");
  csv.number("setup", "reduce_us", cal.reduce_us, "us");
  csv.figure("setup", "concurrent_programs", count(cal.concurrent_programs), "programs");
  csv.number("setup", "baseline_ms", scenario.baseline_ms, "ms", scenario.baseline_source);

  csv.number("context_cost", "growth_1k_to_32k", out.growth, "ratio",
             out.scenario_mode ? "published 28.3x (356.664 -> 10,095.188 us)" : "");
  csv.number("context_cost", "attention_us_per_call_1k", out.call_1k_us, "us");
  csv.number("context_cost", "attention_us_per_call_32k", out.call_32k_us, "us");
  csv.number("context_cost", "slope_us_per_token", out.curve.slope_us_per_token, "us/token",
             out.scenario_mode ? "published 4.840 us/token" : "least squares over the contexts");
  csv.number("context_cost", "attention_slope_us_per_token_per_call", out.per_call_slope_us, "us/token");
  csv.number("context_cost", "split_attention_us_per_call_32k", out.split_call_32k_us, "us",
             out.scenario_mode ? "published 635.779 + 4.117 us reduce (PR #45916)" : "");
  csv.figure("context_cost", "split_splits_32k", count(out.split_splits_32k), "splits");
  csv.number("context_cost", "split_slope_us_per_token", out.split_curve.slope_us_per_token, "us/token",
             out.scenario_mode ? "published 0.430 us/token" : scenario.split_source);
  if (out.scenario_mode) {
    csv.number("context_cost", "published_growth_1k_to_32k", vllm_50264_figures().growth(),
               "ratio", "vLLM #50264");
    csv.number("context_cost", "published_slope_us_per_token", vllm_50264_figures().slope_us_per_token, "us/token",
               "vLLM #50264");
    csv.number("context_cost", "published_split_us_per_call_32k",
               vllm_50264_figures().split_total_us_32k(), "us", "PR #45916");
    csv.number("context_cost", "published_split_slope_us_per_token", vllm_50264_figures().split_slope_us_per_token, "us/token",
               "PR #45916");
  }

  for (const DecodePoint& p : out.curve.points)
    csv.point("selected_path", out.kernel, p,
              published_point(out.scenario_mode, vllm_50264_figures().collapse, p.context));
  for (const DecodePoint& p : out.split_curve.points)
    csv.point("split_path", "split-KV", p,
              published_point(out.scenario_mode, vllm_50264_figures().split, p.context));

  if (out.measured) {
    csv.figure("measured", "backend", out.measured->backend);
    csv.figure("measured", "device", out.measured->device);
    for (const probes::SweepResult& sweep : out.measured->sweeps) {
      std::string published;
      if (out.scenario_mode)
        published = sweep.kernel == "nosplit"
                        ? "0.307 us/token/call, 4.840 step, 28.3x over 1K -> 32K (gfx1100)"
                        : "0.430 step us/token; 635.779 + 4.117 us at 32K (gfx1100)";
      csv.number("measured", "slope_us_per_token_per_call", sweep.slope_us_per_token, "us/token", published,
                 sweep.kernel);
      csv.number("measured", "step_slope_us_per_token", sweep.slope_us_per_token * primary.layers, "us/token",
                 "x " + std::to_string(primary.layers) + " attention layers", sweep.kernel);
      csv.number("measured", "growth", sweep.growth, "ratio", "last / first time", sweep.kernel);
      for (const probes::ProbePoint& p : sweep.points) {
        csv.table.rows.push_back({"measured_point", sweep.kernel, std::to_string(p.context),
                                  std::to_string(p.splits), round_trip_text(p.time_us), "", "", "", "", "",
                                  "gbps", round_trip_text(p.gbps), "GB/s", ""});
      }
    }
  }
  for (const std::string& error : out.gate_errors)
    csv.figure("warning", "engine_refuses_start", error, "", "kvsight gates");
  for (const std::string& note : notes) csv.figure("note", "", note);
  return csv.table;
}

void run_cliff(const CliffArgs& args, CliState& state) {
  check_engine_spellings(state, args.options.engine);
  app::CliffRequest request;
  request.scenario = args.scenario;
  request.model = args.model;
  request.gpu = args.gpu;
  request.options = args.options;
  if (!args.contexts_text.empty()) request.contexts = parse_contexts(args.contexts_text, "--contexts");
  if (args.baseline_ms >= 0) request.baseline_ms = args.baseline_ms;
  request.calibration_path = args.calibration_path;
  request.backend = args.backend;
  if (!args.measure_contexts_text.empty())
    request.measure_contexts = parse_contexts(args.measure_contexts_text, "--measure-contexts");
  request.repeats = args.repeats;
  request.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  const app::CliffOutcome outcome = app::run_cliff(request);
  state.exit_code = app::exit_code(outcome.verdict);

  // What the renderers below read, by the names they use.
  const bool scenario_mode = outcome.scenario_mode;
  const DecodeScenario& scenario = outcome.scenario;
  const DecodeCurve& curve = outcome.curve;
  const DecodeCurve& split_curve = outcome.split_curve;
  const DecodeLayerGroup& primary = scenario.groups.front();
  const std::string &title = outcome.title, &kernel = outcome.kernel, &model_id = outcome.model_id,
                    &gpu_id = outcome.gpu_id, &engine = outcome.engine;
  const bool splits_context = outcome.splits_context;
  const std::vector<std::string>& gate_errors = outcome.gate_errors;
  const probes::AttentionShape& shape = outcome.shape;
  const std::uint32_t block_size = outcome.block_size, q_heads_per_rank = outcome.q_heads_per_rank;
  const double call_1k = outcome.call_1k_us, call_32k = outcome.call_32k_us, growth = outcome.growth;
  const double split_call_32k = outcome.split_call_32k_us, per_call_slope = outcome.per_call_slope_us;
  const std::uint32_t split_32k_splits = outcome.split_splits_32k;
  Measured measured;
  if (outcome.measured) {
    measured.present = true;
    measured.backend = outcome.measured->backend;
    measured.device = outcome.measured->device;
    measured.sweeps = outcome.measured->sweeps;
  }

  const auto published_at = [scenario_mode](const std::vector<PublishedPoint>& list, std::uint64_t context) {
    return published_point(scenario_mode, list, context);
  };

  std::vector<std::string> notes;  // the footer after the warnings, in every format
  notes.push_back("calibration: " + scenario.calibration.source);
  notes.push_back("split model: " + scenario.split_source);
  if (!outcome.probe_dtype_note.empty()) notes.push_back(outcome.probe_dtype_note);
  if (scenario_mode) {
    // cliff.md: 79.68 ms at 1024 tokens after PR #45916, where the split kernel does
    // not split yet (below 1344 tokens), i.e. the same 356.664 us per call as before.
    const double split_run_baseline = 79.68 - 16.0 * vllm_50264_figures().call_us_1k / 1000.0;
    notes.push_back(
        "published split run: 79.68 ms at 1024 tokens implies a non-attention time of 79.68 - 16 x 0.357 = " +
        fixed_text(split_run_baseline, 2) + " ms, " +
        fixed_text(scenario.baseline_ms - split_run_baseline, 2) +
        " ms below the #50264 run's; the publications are different runs, and the split curve here keeps the "
        "#50264 baseline");
  }

  if (!args.plot_path.empty()) {
    Plot plot;
    plot.title = scenario_mode ? "vLLM #50264 decode cliff (gfx1100, TP 2, batch 1)" : title;
    plot.x_label = "context (tokens)";
    plot.y_label = "ms per token";
    PlotSeries fallback{
        kernel + (splits_context ? " (selected)" : " (selected, no split)"), "#d62728", {}, false, false};
    for (const DecodePoint& p : curve.points) fallback.points.emplace_back(p.context, p.ms_per_token);
    PlotSeries split{"split-KV (predicted)", "#1f77b4", {}, false, true};
    for (const DecodePoint& p : split_curve.points) split.points.emplace_back(p.context, p.ms_per_token);
    plot.series = {fallback, split};
    if (scenario_mode) {
      PlotSeries published{"published, vLLM 0.23.1", "#d62728", {}, true, false};
      for (const PublishedPoint& p : vllm_50264_figures().collapse)
        published.points.emplace_back(p.context, p.ms_per_token);
      PlotSeries published_split{"published, PR #45916", "#1f77b4", {}, true, false};
      for (const PublishedPoint& p : vllm_50264_figures().split) {
        published_split.points.emplace_back(p.context, p.ms_per_token);
      }
      plot.series.push_back(published);
      plot.series.push_back(published_split);
    }
    // Queued: written with the rest of the run's output once it succeeded.
    add_artefact(state, args.plot_path, "--plot", render_svg(plot));
  }

  if (state.format() == Format::json) {
    nlohmann::json points = nlohmann::json::array(), split_points = nlohmann::json::array();
    for (const DecodePoint& p : curve.points) {
      nlohmann::json j = point_json(p, scenario);
      if (const PublishedPoint* pub = published_at(vllm_50264_figures().collapse, p.context)) {
        j["published_ms_per_token"] = pub->ms_per_token;
        j["published_tok_s"] = pub->tok_s;
      }
      points.push_back(j);
    }
    for (const DecodePoint& p : split_curve.points) {
      nlohmann::json j = point_json(p, scenario);
      if (const PublishedPoint* pub = published_at(vllm_50264_figures().split, p.context)) {
        j["published_ms_per_token"] = pub->ms_per_token;
      }
      split_points.push_back(j);
    }
    nlohmann::json published = nlohmann::json::array(), published_split = nlohmann::json::array();
    if (scenario_mode) {
      for (const PublishedPoint& p : vllm_50264_figures().collapse) {
        published.push_back({{"context", p.context}, {"ms_per_token", p.ms_per_token}, {"tok_s", p.tok_s}});
      }
      for (const PublishedPoint& p : vllm_50264_figures().split) {
        published_split.push_back(
            {{"context", p.context}, {"ms_per_token", p.ms_per_token}, {"tok_s", p.tok_s}});
      }
    }
    nlohmann::json out = {
        {"scenario", scenario_mode ? nlohmann::json(args.scenario) : nlohmann::json(nullptr)},
        {"model", model_id},
        {"gpu", gpu_id},
        {"engine", engine},
        {"kernel", kernel},
        {"splits_context", splits_context},
        {"shape",
         {{"batch", scenario.batch},
          {"kv_heads_per_rank", primary.kv_heads_per_rank},
          {"q_heads_per_rank", q_heads_per_rank},
          {"head_dim", primary.head_dim},
          {"block_size", block_size},
          {"probe_dtype", outcome.shape.dtype},
          {"probe_kv_dtype", probes::stored_kv_dtype(outcome.shape)},
          {"attention_layers", primary.layers},
          {"bytes_per_token_per_program", primary.bytes_per_token_per_program}}},
        {"calibration", calibration_json(scenario.calibration)},
        {"baseline_ms", scenario.baseline_ms},
        {"baseline_source", scenario.baseline_source},
        {"points", points},
        {"split_points", split_points},
        {"split_source", scenario.split_source},
        {"published", published},
        {"published_split", published_split},
        {"slope_us_per_token", curve.slope_us_per_token},
        {"attention_slope_us_per_token_per_call", per_call_slope},
        {"growth", growth},
        {"growth_range", {1024, 32768}},
        {"attention_us_per_call_1k", call_1k},
        {"attention_us_per_call_32k", call_32k},
        {"split_attention_us_per_call_32k", split_call_32k},
        {"split_splits_32k", split_32k_splits},
        {"split_slope_us_per_token", split_curve.slope_us_per_token},
        {"gate_errors", gate_errors},
        {"title", title},
        {"notes", notes}};
    if (scenario_mode) {
      out["published_slope_us_per_token"] = vllm_50264_figures().slope_us_per_token;
      out["published_growth"] = vllm_50264_figures().growth();
      out["published_split_us_per_call_32k"] = vllm_50264_figures().split_total_us_32k();
      out["published_split_slope_us_per_token"] = vllm_50264_figures().split_slope_us_per_token;
    }
    if (measured.present) {
      nlohmann::json kernels = nlohmann::json::array();
      for (const probes::SweepResult& sweep : measured.sweeps) {
        nlohmann::json j = sweep;
        j["step_slope_us_per_token"] = sweep.slope_us_per_token * primary.layers;
        kernels.push_back(j);
      }
      out["measured"] = {{"backend", measured.backend}, {"device", measured.device}, {"kernels", kernels}};
    }
    emit(state, render_json(out));
    return;
  }

  Report report;
  report.title = title;
  ReportSection setup{"Model of one decode step", {}};
  setup.rows.push_back(
      {"attention path", kernel, splits_context ? "splits the context" : "does NOT split the context"});
  setup.rows.push_back({"attention layers", std::to_string(primary.layers),
                        "head_dim " + std::to_string(primary.head_dim) + ", " +
                            std::to_string(primary.kv_heads_per_rank) + " KV heads per rank, batch " +
                            std::to_string(scenario.batch) + ", block " + std::to_string(block_size)});
  setup.rows.push_back({"programs per call", std::to_string(scenario.batch * primary.kv_heads_per_rank),
                        "batch x KV heads per rank (no split)"});
  setup.rows.push_back({"calibration",
                        fixed_text(scenario.calibration.per_program_gbps, 3) + " GB/s per program, t0 " +
                            fixed_text(scenario.calibration.call_overhead_us, 2) + " us",
                        scenario.calibration.source});
  setup.rows.push_back(
      {"non-attention time", fixed_text(scenario.baseline_ms, 2) + " ms", scenario.baseline_source});
  report.sections.push_back(setup);

  ReportSection summary{"Context cost", {}};
  summary.rows.push_back({"per-call growth 1K -> 32K", fixed_text(growth, 1) + "x",
                          fixed_text(call_1k, 3) + " us -> " + fixed_text(call_32k, 3) + " us" +
                              (scenario_mode ? "; published 28.3x (356.664 -> 10,095.188 us)" : "")});
  summary.rows.push_back(
      {"slope (step, per context token)", fixed_text(curve.slope_us_per_token, 3) + " us/token",
       scenario_mode
           ? "published 4.840 us/token (" + pct(curve.slope_us_per_token, vllm_50264_figures().slope_us_per_token) + ")"
           : "least squares over the contexts"});
  summary.rows.push_back({"split-KV per call at 32K", fixed_text(split_call_32k, 3) + " us",
                          std::to_string(split_32k_splits) + " splits" +
                              (scenario_mode ? "; published 635.779 + 4.117 us reduce (PR #45916)" : "")});
  summary.rows.push_back({"split-KV slope", fixed_text(split_curve.slope_us_per_token, 3) + " us/token",
                          scenario_mode ? "published 0.430 us/token" : scenario.split_source});
  report.sections.push_back(summary);
  for (const std::string& error : gate_errors) {
    report.footer.push_back("warning: the engine would refuse to start: " + error + " (kvsight gates)");
  }
  report.footer.insert(report.footer.end(), notes.begin(), notes.end());

  Table table;
  table.title =
      "Selected path (" + kernel + ")" + (scenario_mode ? " vs published (vLLM 0.23.1, #50264)" : "");
  table.columns = {"context", "attention us/call", "ms/token", "tok/s"};
  if (scenario_mode)
    table.columns = {"context", "attention us/call", "ms/token", "published", "diff",
                     "tok/s",   "published tok/s"};
  for (const DecodePoint& p : curve.points) {
    std::vector<std::string> row = {commas_text(p.context), fixed_text(p.attention_us_per_call, 3),
                                    fixed_text(p.ms_per_token, 2)};
    if (const PublishedPoint* pub = published_at(vllm_50264_figures().collapse, p.context)) {
      row.push_back(fixed_text(pub->ms_per_token, 2));
      row.push_back(pct(p.ms_per_token, pub->ms_per_token));
      row.push_back(fixed_text(p.tok_s, 2));
      row.push_back(fixed_text(pub->tok_s, 2));
    } else {
      if (scenario_mode) {
        row.push_back("");
        row.push_back("");
      }
      row.push_back(fixed_text(p.tok_s, 2));
      if (scenario_mode) row.push_back("");
    }
    table.rows.push_back(row);
  }
  table.right_align = std::vector<bool>(table.columns.size(), true);

  Table split_table;
  split_table.title =
      "Split-KV path" + std::string(scenario_mode ? " vs published (PR #45916)" : " (predicted)");
  split_table.columns = {"context", "splits", "attention us/call", "ms/token", "tok/s"};
  if (scenario_mode)
    split_table.columns = {"context", "splits", "attention us/call", "ms/token", "published",
                           "diff",    "tok/s"};
  for (const DecodePoint& p : split_curve.points) {
    std::vector<std::string> row = {commas_text(p.context), std::to_string(p.splits),
                                    fixed_text(p.attention_us_per_call, 3), fixed_text(p.ms_per_token, 2)};
    if (scenario_mode) {
      const PublishedPoint* pub = published_at(vllm_50264_figures().split, p.context);
      row.push_back(pub ? fixed_text(pub->ms_per_token, 2) : "");
      row.push_back(pub ? pct(p.ms_per_token, pub->ms_per_token) : "");
    }
    row.push_back(fixed_text(p.tok_s, 2));
    split_table.rows.push_back(row);
  }
  split_table.right_align = std::vector<bool>(split_table.columns.size(), true);

  if (state.format() == Format::csv) {
    emit(state, render_table(cliff_csv(outcome, notes), Format::csv));
    return;
  }
  std::string text = render_report(report, state.format()) + "\n" + render_table(table, state.format()) +
                     "\n" + render_table(split_table, state.format());
  if (measured.present) {
    Table mtable;
    mtable.title = "Measured on " + measured.backend + " (" + measured.device + "), shape head_dim " +
                   std::to_string(shape.head_dim) + ", block " + std::to_string(shape.block_size) + ", " +
                   std::to_string(shape.kv_heads) + " KV / " + std::to_string(shape.q_heads) +
                   " Q heads, batch " + std::to_string(shape.batch) + ", q " + shape.dtype + ", K/V " +
                   probes::stored_kv_dtype(shape);
    mtable.columns = {"kernel",
                      "contexts",
                      "us/call (first -> last)",
                      "slope us/token/call",
                      "step slope us/token (x" + std::to_string(primary.layers) + ")",
                      "growth",
                      "published"};
    for (const probes::SweepResult& sweep : measured.sweeps) {
      const auto& pts = sweep.points;
      const std::string range =
          pts.empty() ? "" : commas_text(pts.front().context) + " -> " + commas_text(pts.back().context);
      const std::string times =
          pts.empty() ? "" : fixed_text(pts.front().time_us, 2) + " -> " + fixed_text(pts.back().time_us, 2);
      std::string published;
      if (scenario_mode) {
        published = sweep.kernel == "nosplit"
                        ? "0.307 us/token/call, 4.840 step, 28.3x over 1K -> 32K (gfx1100)"
                        : "0.430 step us/token; 635.779 + 4.117 us at 32K (gfx1100)";
      }
      mtable.rows.push_back({sweep.kernel, range, times, fixed_text(sweep.slope_us_per_token, 4),
                             fixed_text(sweep.slope_us_per_token * primary.layers, 3),
                             fixed_text(sweep.growth, 2) + "x", published});
    }
    text += "\n" + render_table(mtable, state.format());
  }
  emit(state, text);
}

}  // namespace

void add_cliff_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<CliffArgs>();
  auto* command = app.add_subcommand(
      "cliff",
      "Decode time per token versus context for the attention path the engine selects, beside a split-KV\n"
      "path. --scenario vllm-50264 replays the published RDNA cliff (12.1 -> 4.2 tok/s) next to its "
      "figures;\n"
      "--model/--gpu runs the same analysis for any model and device. Every prediction names its "
      "calibration.");
  command->add_option("--scenario", args->scenario, "Published case to replay: vllm-50264");
  command->add_option("--model,-m", args->model,
                      "Catalog id, config.json path, directory, or HF cache org/name");
  command->add_option("--gpu,-g", args->gpu, "GPU catalog id");
  add_engine_flags(*command, args->options);
  add_count_flag(*command, "--batch", args->options.batch, "Sequences decoding together (default 1)", 1,
                 1ull << 24);
  command->add_option(
      "--contexts", args->contexts_text,
      "Comma list of contexts to predict, K/M allowed (default 1024..32768; scenario: the published ones)");
  command
      ->add_option("--baseline-ms", args->baseline_ms,
                   "Measured non-attention time per step, ms (default: estimate from weights and bandwidth)")
      ->check(finite_positive_ms());
  command->add_option(
      "--calibration", args->calibration_path,
      "JSON of `kvsight probe sweep --format json` (nosplit kernel) to calibrate the kernel times");
  command->add_option("--backend", args->backend,
                      "Also measure both probe kernels (nosplit, splitkv) at this shape: cuda, hip or cpu");
  command->add_option("--measure-contexts", args->measure_contexts_text,
                      "Contexts for --backend (default cpu 256,512,1024,2048; gpu 1024..32768)");
  command->add_option("--repeats", args->repeats, "Timed repeats per probe point")->default_str("5");
  command->add_option("--plot", args->plot_path, "Write ms/token vs context as an SVG file")
      ->check(output_target("--plot"));
  add_output_options(*command, state);
  command->callback([args, &state] { run_cliff(*args, state); });
}

}  // namespace kvsight::cli
