// kvsight preflight: the check a user runs on the GPU node before deploying. Binds
// flags, calls app::run_preflight and renders table / json / markdown; the work and
// the verdict are in app/ (kvsight/app/preflight.hpp).
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/preflight.hpp"
#include "kvsight/error.hpp"
#include "progress.hpp"
#include "svg_plot.hpp"

namespace kvsight::cli {

namespace {

struct PreflightArgs {
  std::string model = "llama-3.1-8b";  // the default job's model (scripts/run.sh, issue #10)
  std::string gpu;
  EngineOptions options;
  std::uint64_t concurrency = 0;  // 0: not asked
  bool quick = false, full = false, quiet = false;
  std::string backend = "auto";
  std::string fail_on = "fail";
  std::string plot_path;
};

Plot decode_plot(const app::PreflightOutcome& o) {
  Plot plot;
  plot.title = "Decode vs context: " + o.model.id + " on " +
               (o.facts.survey.no_gpu ? "this node's CPU (no GPU)" : o.facts.survey.devices.front().name);
  plot.x_label = "context (tokens)";
  plot.y_label = "ms per token";
  PlotSeries engine{"engine path (predicted)", "#d62728", {}, false, false};
  PlotSeries split{"split-KV (predicted)", "#1f77b4", {}, false, true};
  PlotSeries engine_measured{"engine path (measured)", "#d62728", {}, true, false};
  PlotSeries split_measured{"split-KV (measured)", "#1f77b4", {}, true, false};
  for (const app::DecodeFacts& d : o.facts.decode) {
    const double x = static_cast<double>(d.context);
    engine.points.emplace_back(x, d.engine_path.ms_per_token);
    split.points.emplace_back(x, d.split.ms_per_token);
    if (d.measured_engine_ms) engine_measured.points.emplace_back(x, *d.measured_engine_ms);
    if (d.measured_split_ms) split_measured.points.emplace_back(x, *d.measured_split_ms);
  }
  plot.series = {engine, split, engine_measured, split_measured};
  return plot;
}

std::string render_text(const app::PreflightOutcome& o, Format format) {
  const app::PreflightFacts& f = o.facts;
  Report report;
  report.values_left = true;  // labels left, values in one column after them (issue #9)
  report.title = "kvsight preflight: " + o.model.id + " on " + o.host + " (" + o.mode + ", " +
                 f.survey.backend + " backend): " + o.verdict;
  ReportSection head{"Node", {}};
  if (f.survey.no_gpu)
    head.rows.push_back(
        {"GPU", "NONE FOUND", "probes run on the cpu backend; every device figure is the CPU's"});
  for (const probes::DeviceRecord& d : f.survey.devices) {
    const std::string prefix = f.survey.no_gpu ? "cpu" : "device " + std::to_string(d.index);
    head.rows.push_back({prefix, d.name + " (" + d.arch + ")",
                         "identity: " + d.sources.identity +
                             (d.driver_version.empty() ? "" : ", driver " + d.driver_version)});
    head.rows.push_back({"  memory total / free now",
                         gib_text(d.memory_total_bytes) + " / " + gib_text(d.memory_free_bytes),
                         "source: " + d.sources.memory});
    head.rows.push_back(
        {"  held by other processes",
         d.memory_used_by_others_bytes ? gib_text(*d.memory_used_by_others_bytes) + " (" +
                                             std::to_string(d.processes.size()) + " processes)"
                                       : "unknown",
         d.sources.processes.empty() ? "no source lists processes" : "source: " + d.sources.processes});
    for (const probes::ProcessMemory& p : d.processes)
      head.rows.push_back({"    pid " + std::to_string(p.pid), p.name, gib_text(p.used_bytes)});
  }
  head.rows.push_back({"catalog", o.catalog ? o.catalog->id + " (" + o.catalog->name + ")" : "unknown device",
                       o.catalog_match});
  report.sections.push_back(head);

  ReportSection verdict{"Verdict: " + o.verdict, {}};
  if (o.reasons.empty()) verdict.rows.push_back({"PASS", "no reason to hold back", ""});
  for (const app::PreflightReason& r : o.reasons) verdict.rows.push_back({r.severity, r.code, r.message});
  report.sections.push_back(verdict);

  ReportSection model{"Model and engine", {}};
  model.rows.push_back({"model", o.model.id, o.model.display_name});
  model.rows.push_back({"engine", o.options.engine + " " + o.engine_version,
                        "TP " + std::to_string(o.options.tp) + ", PP " + std::to_string(o.options.pp) +
                            ", block " + std::to_string(o.block_size)});
  model.rows.push_back(
      {"attention path", f.kernel, f.splits_context ? "splits the context" : "does NOT split the context"});
  model.rows.push_back({"probe shape",
                        "head_dim " + std::to_string(o.shape.head_dim) + ", " +
                            std::to_string(o.shape.kv_heads) + " KV heads/rank, GQA " +
                            std::to_string(o.shape.kv_heads ? o.shape.q_heads / o.shape.kv_heads : 0) +
                            ", block " + std::to_string(o.shape.block_size) + ", K/V " +
                            probes::stored_kv_dtype(o.shape),
                        "batch " + std::to_string(o.shape.batch) + ", the plan's KV cache type"});
  for (const std::string& refusal : f.refusals) model.rows.push_back({"refusal", refusal, ""});
  report.sections.push_back(model);

  ReportSection measured{"Bandwidth (stream read)", {}};
  if (f.bandwidth) {
    const app::BandwidthFacts& b = *f.bandwidth;
    measured.rows.push_back({"measured", fixed_text(b.measured_bytes_per_s / 1e9, 1) + " GB/s",
                             "noise " + fixed_text(b.noise * 100, 2) + "%, " + std::to_string(b.samples) +
                                 " samples" + (b.converged ? "" : ", NOT converged")});
    measured.rows.push_back(
        {"catalog peak",
         b.catalog_peak_bytes_per_s ? fixed_text(*b.catalog_peak_bytes_per_s / 1e9, 0) + " GB/s" : "n/a",
         b.catalog_peak_bytes_per_s
             ? fixed_text(b.measured_bytes_per_s / *b.catalog_peak_bytes_per_s * 100, 0) + "% of peak"
             : (f.survey.no_gpu ? "a CPU has no catalog peak" : "device not in the catalog")});
  }
  report.sections.push_back(measured);

  ReportSection capacity{
      "Capacity (" + o.options.engine + ", max_model_len " + commas_text(f.max_model_len) + ")", {}};
  const auto add_capacity = [&](const std::string& label, const std::optional<app::CapacityFacts>& c) {
    if (!c) return;
    capacity.rows.push_back({label, gib_text(c->gpu_memory_bytes),
                             "KV " + gib_text(c->capacity.available_kv_bytes) + ", max concurrency " +
                                 fixed_text(c->capacity.max_concurrency, 2) + "x" +
                                 (c->capacity.fits ? "" : ", DOES NOT FIT")});
  };
  add_capacity(f.survey.no_gpu ? "free now (CPU memory)" : "free now", f.free_now);
  add_capacity("catalog total (" + (o.catalog ? o.catalog->id : std::string("-")) + ")", f.catalog_total);
  report.sections.push_back(capacity);
  for (const std::string& note : o.notes) report.footer.push_back("note: " + note);
  report.footer.push_back("calibration: " + o.calibration_source);

  Table probes_table;
  probes_table.title = "Probe kernels at the model's shape on " + f.survey.backend;
  probes_table.columns = {"context", "path",  "kernel",  "us/call",  "GB/s",
                          "splits",  "noise", "samples", "reference"};
  for (const app::ProbeFacts& p : f.probes) {
    probes_table.rows.push_back(
        {commas_text(p.context), p.kernel, p.probe_kernel, p.measured ? fixed_text(p.time_us, 1) : "-",
         p.measured ? fixed_text(p.gbps, 1) : "-", std::to_string(p.splits),
         p.measured ? fixed_text(p.noise * 100, 2) + "%" + (p.converged ? "" : " (!)") : "-",
         std::to_string(p.samples), p.reference_ok ? "ok" : "FAILED"});
  }
  probes_table.right_align = {true, false, false, true, true, true, true, true, false};

  Table decode_table;
  decode_table.title = "Decode per token, calibrated on this node (ms/token)";
  decode_table.columns = {"context", "engine path", "measured", "split-KV", "measured", "tok/s (engine)"};
  for (const app::DecodeFacts& d : f.decode) {
    decode_table.rows.push_back({commas_text(d.context), fixed_text(d.engine_path.ms_per_token, 2),
                                 d.measured_engine_ms ? fixed_text(*d.measured_engine_ms, 2) : "",
                                 fixed_text(d.split.ms_per_token, 2),
                                 d.measured_split_ms ? fixed_text(*d.measured_split_ms, 2) : "",
                                 fixed_text(d.engine_path.tok_s, 2)});
  }
  decode_table.right_align = std::vector<bool>(decode_table.columns.size(), true);

  std::string text;
  if (f.survey.no_gpu)
    text +=
        "NO GPU FOUND on " + o.host + ": running on the cpu backend; every device figure is the CPU's.\n\n";
  text += render_report(report, format);
  if (!probes_table.rows.empty()) text += "\n" + render_table(probes_table, format);
  if (!decode_table.rows.empty()) text += "\n" + render_table(decode_table, format);
  return text;
}

void run(const PreflightArgs& args, CliState& state) {
  check_engine_spellings(state, args.options.engine);
  if (state.format() == Format::csv)
    throw InputError("--format", "'csv' is not a preflight format; allowed: table, json, markdown");
  if (args.quick && args.full) throw InputError("--full", "give --quick or --full, not both");
  if (args.fail_on != "warn" && args.fail_on != "fail")
    throw InputError("--fail-on", "'" + args.fail_on + "' is not allowed; allowed: warn, fail");
  app::PreflightRequest request;
  request.model = args.model;
  request.gpu = args.gpu;
  request.options = args.options;
  if (args.concurrency > 0) request.concurrency = args.concurrency;
  request.full = args.full;
  request.backend = args.backend;
  auto progress = std::make_shared<Progress>("kvsight preflight", !args.quiet && stderr_is_terminal());
  request.progress = [progress](const app::PreflightProgress& p) {
    progress->point(p.step, p.total, p.what, p.figure);
  };
  const app::PreflightOutcome outcome = app::run_preflight(request);
  state.exit_code = app::preflight_exit_code(outcome.verdict, args.fail_on);
  if (!args.plot_path.empty())
    add_artefact(state, args.plot_path, "--plot", render_svg(decode_plot(outcome)));
  if (state.format() == Format::json) {
    emit(state, render_json(app::preflight_json(outcome, state.exit_code)));
    return;
  }
  emit(state, render_text(outcome, state.format()));
}

}  // namespace

void add_preflight_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<PreflightArgs>();
  auto* command = app.add_subcommand(
      "preflight",
      "The check to run on the GPU node before deploying: devices found (NVML / ROCm SMI, else the runtime,\n"
      "else the CPU), bandwidth against the catalog peak, the gates, both probe kernels at the model's "
      "shape,\n"
      "capacity on the memory free now, decode per token calibrated here; verdict PASS / WARN / FAIL.\n"
      "Exit 0 PASS, 1 at or above --fail-on, 2 bad input, 3 device error.");
  add_model_gpu_flags(*command, args->model, args->gpu, false,
                      "Catalog id, config.json path, directory, or HF cache org/name (default llama-3.1-8b)",
                      "GPU catalog id to judge against, or auto (default: match the device found)");
  add_engine_flags(*command, args->options);
  add_count_flag(*command, "--batch", args->options.batch,
                 "Sequences decoding together in the probes (default 1)", 1, 1ull << 24);
  add_count_flag(*command, "--concurrency", args->concurrency,
                 "Sequences that must fit at max_model_len (FAIL when fewer do)", 1, 1ull << 32);
  command->add_flag("--quick", args->quick,
                    "Few points, short budgets (default): under 30 s on a GPU, 90 s on cpu");
  command->add_flag("--full", args->full, "Sweep 1K..32K and max_model_len with longer budgets");
  command->add_option("--backend", args->backend, "Where the probes run: auto, cuda, hip or cpu")
      ->default_str("auto");
  command->add_option("--fail-on", args->fail_on, "Exit 1 from this verdict up: warn or fail")
      ->default_str("fail");
  command->add_flag("--quiet,-q", args->quiet, "No progress lines on stderr");
  command
      ->add_option("--plot", args->plot_path,
                   "Write decode ms/token vs context (measured and predicted) as SVG")
      ->check(output_target("--plot"));
  add_output_options(*command, state);
  command->callback([args, &state] { run(*args, state); });
}

}  // namespace kvsight::cli
