// The figures of `kvsight cliff` (issue #26): the model of one decode step and the context
// cost as sections, both curves as tables, the measured kernels, the warnings and notes.
// Each figure is written once here, beside the published one it is compared with (read
// from the scenario's data, kvsight/decode_model.hpp PublishedCliff); the renderers
// (cli/figure_output.cpp) draw it as a table, markdown, CSV or JSON.
#include "kvsight/app/cliff.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

// CSV of the whole output in one table (issue #9: formats are complete): a `table` column
// says which part of the text output a row belongs to (setup, context_cost, selected_path,
// split_path, measured, measured_point, warning, note); numbers are raw (round trip: no
// thousands separators, no units, no "x" or "%"), units are in the column names or, for
// key/value rows, in `unit`. README "JSON contract" says so.
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

double diff_percent(double predicted, double published) {
  return (predicted - published) / published * 100.0;
}

std::string pct(double predicted, double published) {
  return (predicted >= published ? "+" : "") + fixed_text(diff_percent(predicted, published), 1) + "%";
}

// A figure in JSON at `key` and in the CSV at `csv_key`; `csv_key` "" = JSON only, a JSON
// `key` "" = CSV only.
Figure figure(const std::string& key, nlohmann::json value, const std::string& csv_key,
              std::string unit = "") {
  Figure f{key.empty() ? csv_key : key, std::move(value), std::move(unit)};
  if (key.empty()) f.in_json = false;
  if (csv_key.empty())
    f.in_csv = false;
  else if (!key.empty() && csv_key != key)
    f.csv_key = csv_key;
  return f;
}

// The same figure as a reader sees it (table, markdown): label, text, note.
Figure read_as(Figure f, std::string label, std::string text, std::string note) {
  f.label = std::move(label);
  f.text = std::move(text);
  f.note = std::move(note);
  return f;
}

// The published figure at this context (scenario mode only), or nullptr.
const PublishedPoint* published_at(const CliffOutcome& out, const std::vector<PublishedPoint>& list,
                                   std::uint64_t context) {
  if (!out.scenario_mode) return nullptr;
  for (const PublishedPoint& p : list)
    if (p.context == context) return &p;
  return nullptr;
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

// Both curves' points with the published figures at their contexts, and the published lists.
void curve_json(const CliffOutcome& out, FigureSection& section) {
  const PublishedCliff& published = vllm_50264_figures();
  nlohmann::json points = nlohmann::json::array(), split_points = nlohmann::json::array();
  for (const DecodePoint& p : out.curve.points) {
    nlohmann::json j = point_json(p, out.scenario);
    if (const PublishedPoint* pub = published_at(out, published.collapse, p.context)) {
      j["published_ms_per_token"] = pub->ms_per_token;
      j["published_tok_s"] = pub->tok_s;
    }
    points.push_back(j);
  }
  for (const DecodePoint& p : out.split_curve.points) {
    nlohmann::json j = point_json(p, out.scenario);
    if (const PublishedPoint* pub = published_at(out, published.split, p.context))
      j["published_ms_per_token"] = pub->ms_per_token;
    split_points.push_back(j);
  }
  const auto list = [&](const std::vector<PublishedPoint>& source) {
    nlohmann::json out_list = nlohmann::json::array();
    if (out.scenario_mode)
      for (const PublishedPoint& p : source)
        out_list.push_back({{"context", p.context}, {"ms_per_token", p.ms_per_token}, {"tok_s", p.tok_s}});
    return out_list;
  };
  section.figures.push_back(figure("points", points, ""));
  section.figures.push_back(figure("split_points", split_points, ""));
  section.figures.push_back(figure("published", list(published.collapse), ""));
  section.figures.push_back(figure("published_split", list(published.split), ""));
}

FigureSection setup_figures(const CliffOutcome& out) {
  const DecodeScenario& scenario = out.scenario;
  const DecodeLayerGroup& primary = scenario.groups.front();
  const KernelCalibration& cal = scenario.calibration;
  FigureSection s{"Model of one decode step", {}};
  auto& f = s.figures;
  f.push_back(
      figure("scenario", out.scenario_mode ? nlohmann::json(scenario.name) : nlohmann::json(nullptr), ""));
  f.push_back(figure("title", out.title, "setup.title"));
  f.push_back(figure("model", out.model_id, "setup.model"));
  f.push_back(figure("gpu", out.gpu_id, "setup.gpu"));
  f.push_back(figure("engine", out.engine, "setup.engine"));
  Figure path = read_as(figure("kernel", out.kernel, "setup.attention_path"), "attention path", out.kernel,
                        out.splits_context ? "splits the context" : "does NOT split the context");
  path.csv_fields["kernel"] = out.kernel;
  f.push_back(path);
  f.push_back(figure("splits_context", out.splits_context, "setup.splits_context"));
  Figure layers =
      read_as(figure("shape.attention_layers", primary.layers, "setup.attention_layers", "layers"),
              "attention layers", std::to_string(primary.layers),
              "head_dim " + std::to_string(primary.head_dim) + ", " +
                  std::to_string(primary.kv_heads_per_rank) + " KV heads per rank, batch " +
                  std::to_string(scenario.batch) + ", block " + std::to_string(out.block_size));
  layers.csv_note = "";
  f.push_back(layers);
  f.push_back(figure("shape.head_dim", primary.head_dim, "setup.head_dim", "elements"));
  f.push_back(
      figure("shape.kv_heads_per_rank", primary.kv_heads_per_rank, "setup.kv_heads_per_rank", "heads"));
  f.push_back(figure("shape.q_heads_per_rank", out.q_heads_per_rank, "setup.q_heads_per_rank", "heads"));
  f.push_back(figure("shape.batch", scenario.batch, "setup.batch", "sequences"));
  f.push_back(figure("shape.block_size", out.block_size, "setup.block_size", "tokens"));
  f.push_back(figure("shape.probe_dtype", out.shape.dtype, ""));
  f.push_back(figure("shape.probe_kv_dtype", probes::stored_kv_dtype(out.shape), ""));
  f.push_back(figure("shape.bytes_per_token_per_program", primary.bytes_per_token_per_program, ""));
  const std::uint64_t programs = scenario.batch * primary.kv_heads_per_rank;
  f.push_back(read_as(figure("", programs, "setup.programs_per_call", "programs"), "programs per call",
                      std::to_string(programs), "batch x KV heads per rank (no split)"));
  // The calibration's source once (its first figure, and the first note); the rest share it.
  f.push_back(
      read_as(figure("calibration.per_program_gbps", cal.per_program_gbps, "setup.per_program_gbps", "GB/s"),
              "calibration",
              fixed_text(cal.per_program_gbps, 3) + " GB/s per program, t0 " +
                  fixed_text(cal.call_overhead_us, 2) + " us",
              cal.source));
  f.push_back(figure("calibration.call_overhead_us", cal.call_overhead_us, "setup.call_overhead_us", "us"));
  f.push_back(figure("calibration.achieved_bandwidth_gbps", cal.achieved_bandwidth_gbps,
                     "setup.achieved_bandwidth_gbps", "GB/s"));
  f.push_back(figure("calibration.reduce_us", cal.reduce_us, "setup.reduce_us", "us"));
  f.push_back(figure("calibration.concurrent_programs", cal.concurrent_programs, "setup.concurrent_programs",
                     "programs"));
  f.push_back(figure("calibration.source", cal.source, ""));
  f.push_back(read_as(figure("baseline_ms", scenario.baseline_ms, "setup.baseline_ms", "ms"),
                      "non-attention time", fixed_text(scenario.baseline_ms, 2) + " ms",
                      scenario.baseline_source));
  f.push_back(figure("baseline_source", scenario.baseline_source, ""));
  return s;
}

// The context cost, each beside the published figure in scenario mode.
FigureSection context_cost_figures(const CliffOutcome& out) {
  const PublishedCliff& published = vllm_50264_figures();
  const bool scenario = out.scenario_mode;
  FigureSection s{"Context cost", {}};
  auto& f = s.figures;
  const std::string published_growth = "published " + fixed_text(published.growth(), 1) + "x (" +
                                       fixed_text(published.call_us_1k, 3) + " -> " +
                                       commas_fixed_text(published.call_us_32k, 3) + " us)";
  Figure growth = read_as(figure("growth", out.growth, "context_cost.growth_1k_to_32k", "ratio"),
                          "per-call growth 1K -> 32K", fixed_text(out.growth, 1) + "x",
                          fixed_text(out.call_1k_us, 3) + " us -> " + fixed_text(out.call_32k_us, 3) + " us" +
                              (scenario ? "; " + published_growth : ""));
  growth.csv_note = scenario ? published_growth : "";
  f.push_back(growth);
  f.push_back(figure("growth_range", {1024, 32768}, ""));
  f.push_back(
      figure("attention_us_per_call_1k", out.call_1k_us, "context_cost.attention_us_per_call_1k", "us"));
  f.push_back(
      figure("attention_us_per_call_32k", out.call_32k_us, "context_cost.attention_us_per_call_32k", "us"));
  const double slope = out.curve.slope_us_per_token;
  const std::string published_slope =
      "published " + fixed_text(published.slope_us_per_token, 3) + " us/token";
  Figure step_slope =
      read_as(figure("slope_us_per_token", slope, "context_cost.slope_us_per_token", "us/token"),
              "slope (step, per context token)", fixed_text(slope, 3) + " us/token",
              scenario ? published_slope + " (" + pct(slope, published.slope_us_per_token) + ")"
                       : "least squares over the contexts");
  step_slope.csv_note = scenario ? published_slope : "least squares over the contexts";
  f.push_back(step_slope);
  f.push_back(figure("attention_slope_us_per_token_per_call", out.per_call_slope_us,
                     "context_cost.attention_slope_us_per_token_per_call", "us/token"));
  const std::string published_split = "published " + fixed_text(published.split_call_us_32k, 3) + " + " +
                                      fixed_text(published.reduce_us, 3) + " us reduce (" +
                                      published.split_source + ")";
  Figure split_call =
      read_as(figure("split_attention_us_per_call_32k", out.split_call_32k_us,
                     "context_cost.split_attention_us_per_call_32k", "us"),
              "split-KV per call at 32K", fixed_text(out.split_call_32k_us, 3) + " us",
              std::to_string(out.split_splits_32k) + " splits" + (scenario ? "; " + published_split : ""));
  split_call.csv_note = scenario ? published_split : "";
  f.push_back(split_call);
  f.push_back(figure("split_splits_32k", out.split_splits_32k, "context_cost.split_splits_32k", "splits"));
  const double split_slope = out.split_curve.slope_us_per_token;
  f.push_back(read_as(
      figure("split_slope_us_per_token", split_slope, "context_cost.split_slope_us_per_token", "us/token"),
      "split-KV slope", fixed_text(split_slope, 3) + " us/token",
      scenario ? "published " + fixed_text(published.split_slope_us_per_token, 3) + " us/token"
               : out.scenario.split_source));
  f.push_back(figure("split_source", out.scenario.split_source, ""));
  if (scenario) {
    const auto source = [](Figure g, const std::string& note) {
      g.note = note;
      return g;
    };
    f.push_back(source(
        figure("published_growth", published.growth(), "context_cost.published_growth_1k_to_32k", "ratio"),
        published.collapse_source));
    f.push_back(source(figure("published_slope_us_per_token", published.slope_us_per_token,
                              "context_cost.published_slope_us_per_token", "us/token"),
                       published.collapse_source));
    f.push_back(source(figure("published_split_us_per_call_32k", published.split_total_us_32k(),
                              "context_cost.published_split_us_per_call_32k", "us"),
                       published.split_source));
    f.push_back(source(figure("published_split_slope_us_per_token", published.split_slope_us_per_token,
                              "context_cost.published_split_slope_us_per_token", "us/token"),
                       published.split_source));
  }
  curve_json(out, s);
  return s;
}

// A curve as a table: the readable columns, and in the CSV every point with the published
// figure at its context (scenario mode).
FigureTable curve_table(const CliffOutcome& out, bool split) {
  const PublishedCliff& published = vllm_50264_figures();
  const bool scenario = out.scenario_mode;
  FigureTable t;
  t.title = split ? "Split-KV path" + std::string(scenario ? " vs published (" + published.split_source + ")"
                                                           : " (predicted)")
                  : "Selected path (" + out.kernel + ")" +
                        (scenario ? " vs published (" + published.engine_version + ", #50264)" : "");
  t.columns = {{"", "table"},
               {"", "kernel"},
               {"context", "context_tokens", true},
               {split ? "splits" : "", "splits", true},
               {"attention us/call", "attention_us_per_call", true},
               {"ms/token", "ms_per_token", true}};
  if (scenario) {
    t.columns.push_back({"published", "published_ms_per_token", true});
    t.columns.push_back({"diff", "diff_percent", true});
  }
  t.columns.push_back({"tok/s", "tok_s", true});
  t.columns.push_back({scenario && !split ? "published tok/s" : "", "published_tok_s", true});
  for (const DecodePoint& p : (split ? out.split_curve : out.curve).points) {
    const PublishedPoint* pub = published_at(out, split ? published.split : published.collapse, p.context);
    std::vector<FigureCell> row = {{"", split ? "split_path" : "selected_path"},
                                   {"", split ? "split-KV" : out.kernel},
                                   {commas_text(p.context), p.context},
                                   {std::to_string(p.splits), p.splits},
                                   {fixed_text(p.attention_us_per_call, 3), p.attention_us_per_call},
                                   {fixed_text(p.ms_per_token, 2), p.ms_per_token}};
    if (scenario) {
      row.push_back(pub ? FigureCell{fixed_text(pub->ms_per_token, 2), pub->ms_per_token}
                        : FigureCell{"", nullptr});
      row.push_back(pub ? FigureCell{pct(p.ms_per_token, pub->ms_per_token),
                                     diff_percent(p.ms_per_token, pub->ms_per_token)}
                        : FigureCell{"", nullptr});
    }
    row.push_back({fixed_text(p.tok_s, 2), p.tok_s});
    row.push_back(pub ? FigureCell{fixed_text(pub->tok_s, 2), pub->tok_s} : FigureCell{"", nullptr});
    t.rows.push_back(std::move(row));
  }
  return t;
}

// The probe kernels measured at the model's shape: a readable table of one row per kernel,
// and in the CSV a section of figures per kernel followed by its points.
void measured_figures(const CliffOutcome& out, FigureDoc& doc) {
  const CliffMeasurement& measured = *out.measured;
  const PublishedCliff& published = vllm_50264_figures();
  const std::uint32_t layers = out.scenario.groups.front().layers;
  const probes::AttentionShape& shape = out.shape;
  FigureSection head{"", {}};
  nlohmann::json kernels = nlohmann::json::array();
  for (const probes::SweepResult& sweep : measured.sweeps) {
    nlohmann::json j = sweep;
    j["step_slope_us_per_token"] = sweep.slope_us_per_token * layers;
    kernels.push_back(j);
  }
  head.figures = {figure("measured.backend", measured.backend, "measured.backend"),
                  figure("measured.device", measured.device, "measured.device"),
                  figure("measured.kernels", kernels, "")};
  doc.sections.push_back(head);

  FigureTable t;
  t.title = "Measured on " + measured.backend + " (" + measured.device + "), shape head_dim " +
            std::to_string(shape.head_dim) + ", block " + std::to_string(shape.block_size) + ", " +
            std::to_string(shape.kv_heads) + " KV / " + std::to_string(shape.q_heads) + " Q heads, batch " +
            std::to_string(shape.batch) + ", q " + shape.dtype + ", K/V " + probes::stored_kv_dtype(shape);
  for (const char* label : {"kernel", "contexts", "us/call (first -> last)", "slope us/token/call"})
    t.columns.push_back({label, ""});
  t.columns.push_back({"step slope us/token (x" + std::to_string(layers) + ")", ""});
  t.columns.push_back({"growth", ""});
  t.columns.push_back({"published", ""});
  for (const probes::SweepResult& sweep : measured.sweeps) {
    std::string published_text;
    if (out.scenario_mode)
      published_text = sweep.kernel == "nosplit"
                           ? fixed_text(published.call_slope_us_per_token(), 3) + " us/token/call, " +
                                 fixed_text(published.slope_us_per_token, 3) + " step, " +
                                 fixed_text(published.growth(), 1) + "x over 1K -> 32K (gfx1100)"
                           : fixed_text(published.split_slope_us_per_token, 3) + " step us/token; " +
                                 fixed_text(published.split_call_us_32k, 3) + " + " +
                                 fixed_text(published.reduce_us, 3) + " us at 32K (gfx1100)";
    const auto& pts = sweep.points;
    const auto text = [](std::string s) { return FigureCell{s, nullptr}; };
    t.rows.push_back(
        {text(sweep.kernel),
         text(pts.empty() ? "" : commas_text(pts.front().context) + " -> " + commas_text(pts.back().context)),
         text(pts.empty() ? ""
                          : fixed_text(pts.front().time_us, 2) + " -> " + fixed_text(pts.back().time_us, 2)),
         text(fixed_text(sweep.slope_us_per_token, 4)),
         text(fixed_text(sweep.slope_us_per_token * layers, 3)), text(fixed_text(sweep.growth, 2) + "x"),
         text(published_text)});

    FigureSection kernel{"", {}};
    const auto of_kernel = [&](Figure g, const std::string& note) {
      g.note = note;
      g.csv_fields["kernel"] = sweep.kernel;
      return g;
    };
    kernel.figures = {
        of_kernel(figure("", sweep.slope_us_per_token, "measured.slope_us_per_token_per_call", "us/token"),
                  published_text),
        of_kernel(
            figure("", sweep.slope_us_per_token * layers, "measured.step_slope_us_per_token", "us/token"),
            "x " + std::to_string(layers) + " attention layers"),
        of_kernel(figure("", sweep.growth, "measured.growth", "ratio"), "last / first time")};
    for (const probes::ProbePoint& p : pts) {
      Figure point = figure("", p.gbps, "measured_point.gbps", "GB/s");
      point.csv_fields = {{"kernel", sweep.kernel},
                          {"context_tokens", p.context},
                          {"splits", p.splits},
                          {"attention_us_per_call", p.time_us}};
      kernel.figures.push_back(point);
    }
    doc.sections.push_back(kernel);
  }
  doc.tables.push_back(t);
}

// The footer of every format: the calibration, the split model, the probe's K/V type and,
// for the published scenario, what the split run's own figures imply.
std::vector<std::string> cliff_notes(const CliffOutcome& out) {
  const DecodeScenario& scenario = out.scenario;
  std::vector<std::string> notes = {"calibration: " + scenario.calibration.source,
                                    "split model: " + scenario.split_source};
  if (!out.probe_dtype_note.empty()) notes.push_back(out.probe_dtype_note);
  if (out.scenario_mode) {
    // cliff.md: 79.68 ms at 1024 tokens after PR #45916, where the split kernel does
    // not split yet (below 1344 tokens), i.e. the same 356.664 us per call as before.
    const PublishedCliff& published = vllm_50264_figures();
    const PublishedPoint& first = published.split.front();
    const std::uint32_t layers = scenario.groups.front().layers;
    const double split_run_baseline =
        first.ms_per_token - static_cast<double>(layers) * published.call_us_1k / 1000.0;
    notes.push_back(
        "published split run: " + fixed_text(first.ms_per_token, 2) + " ms at " +
        std::to_string(first.context) + " tokens implies a non-attention time of " +
        fixed_text(first.ms_per_token, 2) + " - " + std::to_string(layers) + " x " +
        fixed_text(published.call_us_1k / 1000.0, 3) + " = " + fixed_text(split_run_baseline, 2) + " ms, " +
        fixed_text(scenario.baseline_ms - split_run_baseline, 2) +
        " ms below the #50264 run's; the publications are different runs, and the split curve here "
        "keeps the #50264 baseline");
  }
  return notes;
}

}  // namespace

FigureDoc cliff_figures(const CliffOutcome& out) {
  FigureDoc doc;
  doc.title = out.title;
  doc.csv_one_table = true;
  doc.csv_header = kCliffCsvColumns;
  doc.csv_round_trip = true;
  doc.sections = {setup_figures(out), context_cost_figures(out)};
  doc.tables = {curve_table(out, false), curve_table(out, true)};
  doc.csv_tables_after = doc.sections.size();  // the curves after the key/value figures
  if (out.measured) measured_figures(out, doc);

  const std::vector<std::string> notes = cliff_notes(out);
  FigureSection warnings{"", {figure("gate_errors", out.gate_errors, ""), figure("notes", notes, "")}};
  for (const std::string& error : out.gate_errors) {
    Figure warning = figure("", error, "warning.engine_refuses_start");
    warning.note = "kvsight gates";
    warnings.figures.push_back(warning);
    doc.footer.push_back("warning: the engine would refuse to start: " + error + " (kvsight gates)");
  }
  for (const std::string& note : notes) warnings.figures.push_back(figure("", note, "note"));
  doc.footer.insert(doc.footer.end(), notes.begin(), notes.end());
  doc.sections.push_back(warnings);
  return doc;
}

}  // namespace kvsight::app
