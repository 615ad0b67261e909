// The figures of `kvsight preflight` (issue #26): the node, the verdict, the model and
// engine, bandwidth and capacity as labelled figures; the probe kernels and the decode per
// token as tables. The JSON is the versioned report (preflight_json, kvsight.preflight/1),
// whose keys scripts read; the renderers (cli/figure_output.cpp) draw the rest.
#include <algorithm>
#include <tuple>

#include "kvsight/app/preflight.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

FigureSection node_figures(const PreflightOutcome& o) {
  const probes::DeviceSurvey& survey = o.facts.survey;
  FigureSection s{"Node", {}};
  if (survey.no_gpu)
    s.figures.push_back(
        shown_figure("GPU", "NONE FOUND", "probes run on the cpu backend; every device figure is the CPU's"));
  for (const probes::DeviceRecord& d : survey.devices) {
    const std::string prefix = survey.no_gpu ? "cpu" : "device " + std::to_string(d.index);
    s.figures.push_back(shown_figure(prefix, d.name + " (" + d.arch + ")",
                              "identity: " + d.sources.identity +
                                  (d.driver_version.empty() ? "" : ", driver " + d.driver_version)));
    s.figures.push_back(shown_figure("  memory total / free now",
                              gib_text(d.memory_total_bytes) + " / " + gib_text(d.memory_free_bytes),
                              "source: " + d.sources.memory));
    s.figures.push_back(
        shown_figure("  held by other processes",
              d.memory_used_by_others_bytes ? gib_text(*d.memory_used_by_others_bytes) + " (" +
                                                  std::to_string(d.processes.size()) + " processes)"
                                            : "unknown",
              d.sources.processes.empty() ? "no source lists processes" : "source: " + d.sources.processes));
    for (const probes::ProcessMemory& p : d.processes)
      s.figures.push_back(shown_figure("    pid " + std::to_string(p.pid), p.name, gib_text(p.used_bytes)));
  }
  s.figures.push_back(shown_figure("catalog",
                            o.catalog ? o.catalog->id + " (" + o.catalog->name + ")" : "unknown device",
                            o.catalog_match));
  return s;
}

// One line per class of reason (issue #23 item 3: 6 or 16 "measurement_not_converged" lines
// buried the one FAIL): a class seen once keeps its message; a repeated one says how many and,
// for noisy measurements, the range of their noise and what to do. JSON lists every reason.
std::string repeated_reason_note(const PreflightOutcome& o, const std::vector<const PreflightReason*>& same) {
  if (same.front()->code != "measurement_not_converged")
    return same.front()->message + " (and " + std::to_string(same.size() - 1) + " more: --format json lists each)";
  double low = 0, high = 0;
  for (const PreflightReason* r : same) {
    const double noise = r->figures.is_object() && r->figures.contains("noise") && r->figures["noise"].is_number()
                             ? r->figures["noise"].get<double>()
                             : 0.0;
    low = r == same.front() ? noise : std::min(low, noise);
    high = r == same.front() ? noise : std::max(high, noise);
  }
  std::size_t measured = o.facts.bandwidth ? 1 : 0;
  for (const ProbeFacts& p : o.facts.probes) measured += p.measured ? 1 : 0;
  return std::to_string(same.size()) + " of " + std::to_string(measured) + " measurements noisy, " +
         fixed_text(low * 100, 0) + "-" + fixed_text(high * 100, 0) +
         " % relative noise: a busy host? rerun when it is idle (--format json lists each)";
}

FigureSection verdict_figures(const PreflightOutcome& o) {
  FigureSection s{"Verdict: " + o.verdict, {}};
  if (o.reasons.empty()) s.figures.push_back(shown_figure("PASS", "no reason to hold back", ""));
  std::vector<std::string> done;
  for (const PreflightReason& r : o.reasons) {
    if (std::find(done.begin(), done.end(), r.severity + r.code) != done.end()) continue;
    done.push_back(r.severity + r.code);
    std::vector<const PreflightReason*> same;
    for (const PreflightReason& other : o.reasons)
      if (other.code == r.code && other.severity == r.severity) same.push_back(&other);
    s.figures.push_back(shown_figure(r.severity, r.code, same.size() == 1 ? r.message : repeated_reason_note(o, same)));
    // Its fixes under it, the flag to paste in the value column (issue #23 item 2).
    for (const PreflightFix& fix : r.fixes)
      s.figures.push_back(shown_figure("  fix", fix.flag.empty() ? "(action)" : fix.flag, fix.text));
  }
  return s;
}

FigureSection model_figures(const PreflightOutcome& o) {
  const PreflightFacts& f = o.facts;
  const probes::AttentionShape& shape = o.shape;
  FigureSection s{"Model and engine", {}};
  s.figures.push_back(shown_figure("model", o.model.id, o.model.display_name));
  s.figures.push_back(shown_figure("engine", o.options.engine + " " + o.engine_version,
                            "TP " + std::to_string(o.options.tp) + ", PP " + std::to_string(o.options.pp) +
                                ", block " + std::to_string(o.block_size)));
  s.figures.push_back(shown_figure("attention path", f.kernel,
                            f.splits_context ? "splits the context" : "does NOT split the context"));
  s.figures.push_back(
      shown_figure("probe shape",
            "head_dim " + std::to_string(shape.head_dim) + ", " + std::to_string(shape.kv_heads) +
                " KV heads/rank, GQA " + std::to_string(shape.kv_heads ? shape.q_heads / shape.kv_heads : 0) +
                ", block " + std::to_string(shape.block_size) + ", K/V " + probes::stored_kv_dtype(shape),
            "batch " + std::to_string(shape.batch) + ", the plan's KV cache type"));
  for (const std::string& refusal : f.refusals) s.figures.push_back(shown_figure("refusal", refusal, ""));
  return s;
}

FigureSection bandwidth_figures(const PreflightOutcome& o) {
  FigureSection s{"Bandwidth (stream read)", {}};
  if (!o.facts.bandwidth) return s;
  const BandwidthFacts& b = *o.facts.bandwidth;
  s.figures.push_back(shown_figure("measured", fixed_text(b.measured_bytes_per_s / 1e9, 1) + " GB/s",
                            "noise " + fixed_text(b.noise * 100, 2) + "%, " + std::to_string(b.samples) +
                                " samples" + (b.converged ? "" : ", NOT converged")));
  s.figures.push_back(
      shown_figure("catalog peak",
            b.catalog_peak_bytes_per_s ? fixed_text(*b.catalog_peak_bytes_per_s / 1e9, 0) + " GB/s" : "n/a",
            b.catalog_peak_bytes_per_s
                ? fixed_text(b.measured_bytes_per_s / *b.catalog_peak_bytes_per_s * 100, 0) + "% of peak"
                : (o.facts.survey.no_gpu ? "a CPU has no catalog peak" : "device not in the catalog")));
  return s;
}

FigureSection capacity_figures(const PreflightOutcome& o) {
  const PreflightFacts& f = o.facts;
  FigureSection s{"Capacity (" + o.options.engine + ", max_model_len " + commas_text(f.max_model_len) + ")",
                  {}};
  const auto add = [&](const std::string& label, const std::optional<CapacityFacts>& c) {
    if (!c) return;
    s.figures.push_back(shown_figure(label, gib_text(c->gpu_memory_bytes),
                              "KV " + gib_text(c->capacity.available_kv_bytes) + ", max concurrency " +
                                  fixed_text(c->capacity.max_concurrency, 2) + "x" +
                                  (c->capacity.fits ? "" : ", DOES NOT FIT")));
  };
  // With no GPU the verdict judges the target's catalog total; the CPU's free memory is
  // no GPU's and is not shown as capacity (issue #23 item 1).
  if (!f.survey.no_gpu) add("free now", f.free_now);
  add("catalog total (" + (o.catalog ? o.catalog->id : std::string("-")) + ")" +
          (f.survey.no_gpu ? ", judged" : ""),
      f.catalog_total);
  return s;
}

// Tables: the readable cells, and under CSV keys the raw numbers of the one-table CSV
// (issue #23 item 5: `preflight --format csv` was refused), each row naming its table.
nlohmann::json measured_or_null(bool measured, double value) { return measured ? nlohmann::json(value) : nullptr; }

FigureTable probes_table(const PreflightOutcome& o) {
  FigureTable t;
  t.title = "Probe kernels at the model's shape on " + o.facts.survey.backend;
  t.columns = {{"", "table"},
               {"context", "context", true},
               {"path", "path"},
               {"kernel", "kernel"},
               {"us/call", "time_us", true},
               {"GB/s", "gbps", true},
               {"splits", "splits", true},
               {"noise", "noise", true},
               {"", "converged"},
               {"samples", "samples", true},
               {"reference", "reference_ok"}};
  for (const ProbeFacts& p : o.facts.probes)
    t.rows.push_back(
        {{"", "probe"},
         {commas_text(p.context), p.context},
         {p.kernel, p.kernel},
         {p.probe_kernel, p.probe_kernel},
         {p.measured ? fixed_text(p.time_us, 1) : "-", measured_or_null(p.measured, p.time_us)},
         {p.measured ? fixed_text(p.gbps, 1) : "-", measured_or_null(p.measured, p.gbps)},
         {std::to_string(p.splits), p.splits},
         {p.measured ? fixed_text(p.noise * 100, 2) + "%" + (p.converged ? "" : " (!)") : "-",
          measured_or_null(p.measured, p.noise)},
         {"", p.converged},
         {std::to_string(p.samples), p.samples},
         {p.reference_ok ? "ok" : "FAILED", p.reference_ok}});
  return t;
}

// One column per thing (issue #23 item 4: two columns were both "measured", and a split-KV
// engine path printed the same pair twice): predicted and measured for the engine's path, and
// for a split-KV kernel only when the engine's path does not split (else it is that path).
FigureTable decode_table(const PreflightOutcome& o) {
  const bool split_is_engine_path = o.facts.splits_context;
  FigureTable t;
  t.title = "Decode per token, calibrated on this node (ms/token)" +
            std::string(split_is_engine_path ? "; the engine's path splits the context" : "");
  t.columns = {{"", "table"},
               {"context", "context", true},
               {"engine path predicted", "engine_path_ms", true},
               {"engine path measured", "measured_engine_path_ms", true},
               {split_is_engine_path ? "" : "split-KV predicted", "split_ms", true},
               {split_is_engine_path ? "" : "split-KV measured", "measured_split_ms", true},
               {"tok/s (engine)", "engine_path_tok_s", true}};
  const auto ms = [](const std::optional<double>& v) { return FigureCell{v ? fixed_text(*v, 2) : "", value_or_null(v)}; };
  for (const DecodeFacts& d : o.facts.decode)
    t.rows.push_back({{"", "decode"},
                      {commas_text(d.context), d.context},
                      {fixed_text(d.engine_path.ms_per_token, 2), d.engine_path.ms_per_token},
                      ms(d.measured_engine_ms),
                      {fixed_text(d.split.ms_per_token, 2), d.split.ms_per_token},
                      ms(d.measured_split_ms),
                      {fixed_text(d.engine_path.tok_s, 2), d.engine_path.tok_s}});
  return t;
}

// The CSV's own rows before the tables: the verdict and its reasons, each device's memory,
// the bandwidth and both capacities, raw (bytes, bytes per second, sequences).
FigureSection csv_figures(const PreflightOutcome& o, int exit_code) {
  const PreflightFacts& f = o.facts;
  FigureSection s{"", {}};
  s.figures.push_back(csv_figure("verdict.verdict", o.verdict));
  s.figures.push_back(csv_figure("verdict.exit_code", exit_code));
  for (const PreflightReason& r : o.reasons) {
    s.figures.push_back(csv_figure("reason." + r.code, r.severity, r.message));
    for (const PreflightFix& fix : r.fixes)
      s.figures.push_back(csv_figure("fix." + r.code + "." + fix.kind, fix.flag, fix.text));
  }
  for (const probes::DeviceRecord& d : f.survey.devices) {
    const std::string at = "device." + std::to_string(d.index) + ".";
    s.figures.push_back(csv_figure(at + "name", d.name, d.arch));
    for (auto& [key, bytes] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"memory_total_bytes", d.memory_total_bytes},
             {"memory_free_bytes", d.memory_free_bytes},
             {"memory_used_by_others_bytes",
              d.memory_used_by_others_bytes ? nlohmann::json(*d.memory_used_by_others_bytes) : nullptr}}) {
      Figure figure = csv_figure(at + key, bytes);
      figure.unit = "B";
      s.figures.push_back(figure);
    }
  }
  if (f.bandwidth) {
    Figure measured = csv_figure("bandwidth.measured_bytes_per_s", f.bandwidth->measured_bytes_per_s,
                                 f.bandwidth->converged ? "" : "not converged");
    measured.unit = "B/s";
    s.figures.push_back(measured);
  }
  const auto capacity = [&](const std::string& name, const std::optional<CapacityFacts>& c) {
    if (!c) return;
    for (auto& [key, value, unit] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
             {"gpu_memory_bytes", c->gpu_memory_bytes, "B"},
             {"available_kv_bytes", c->capacity.available_kv_bytes, "B"},
             {"max_concurrency", c->capacity.max_concurrency, "sequences"},
             {"largest_max_model_len", c->capacity.largest_max_model_len, "tokens"},
             {"fits", c->capacity.fits, ""}}) {
      Figure figure = csv_figure("capacity." + name + "." + key, value);
      figure.unit = unit;
      s.figures.push_back(figure);
    }
  };
  capacity("free_now", f.free_now);
  capacity("catalog_total", f.catalog_total);
  return s;
}

}  // namespace

FigureDoc preflight_figures(const PreflightOutcome& o, int exit_code) {
  FigureDoc doc;
  doc.values_left = true;  // labels left, values in one column after them (issue #9)
  doc.title = "kvsight preflight: " + o.model.id + " on " + o.host + " (" + o.mode + ", " +
              o.facts.survey.backend + " backend): " + o.verdict;
  // The verdict and its reasons first, then what they were judged on.
  doc.sections = {verdict_figures(o),  node_figures(o),
                  model_figures(o),    bandwidth_figures(o),
                  capacity_figures(o), json_object_section(preflight_json(o, exit_code)),
                  csv_figures(o, exit_code)};
  // CSV: one table, raw numbers in the shortest text that reads back; the figures' rows
  // (table, key, value, unit, note), then the probe and decode rows under their columns.
  doc.csv_one_table = true;
  doc.csv_round_trip = true;
  doc.csv_header = {"table",   "key",         "value",     "unit",    "note",           "context",
                    "path",    "kernel",      "time_us",   "gbps",    "splits",         "noise",
                    "converged", "samples",   "reference_ok", "engine_path_ms", "measured_engine_path_ms",
                    "split_ms", "measured_split_ms", "engine_path_tok_s"};
  for (const std::string& note : o.notes) doc.footer.push_back("note: " + note);
  doc.footer.push_back("calibration: " + o.calibration_source);
  if (!o.facts.probes.empty()) doc.tables.push_back(probes_table(o));
  if (!o.facts.decode.empty()) doc.tables.push_back(decode_table(o));
  return doc;
}

}  // namespace kvsight::app
