// kvsight preflight: the check a user runs on the GPU node before deploying. Binds
// flags, calls app::run_preflight and renders its figures as table / json / markdown; the
// work, the verdict and the figures are in app/ (kvsight/app/preflight.hpp).
#include <algorithm>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "figure_output.hpp"
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
  std::vector<std::string> launch;  // the job's launch line, after --
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

void run(PreflightArgs args, CliState& state) {
  // A launch line's model replaces the default job's unless --model names one.
  const bool model_typed = std::find(state.typed_flags.begin(), state.typed_flags.end(), "--model") !=
                               state.typed_flags.end() ||
                           std::find(state.typed_flags.begin(), state.typed_flags.end(), "-m") !=
                               state.typed_flags.end();
  if (!args.launch.empty() && !model_typed) args.model.clear();
  const auto launch = apply_launch_line(state, args.launch, args.model, args.options);
  check_engine_spellings(state, args.options.engine);
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
  app::FigureDoc doc = app::preflight_figures(outcome, state.exit_code);
  // The job's launch line, as plan and gates show it: what was applied, what ignored.
  if (launch) doc.sections.push_back(app::launch_figures(*launch));
  emit(state, render_figures(doc, state.format()));
}

}  // namespace

void add_preflight_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<PreflightArgs>();
  auto* command = app.add_subcommand(
      "preflight",
      "The check to run on the GPU node before deploying: devices found (NVML / ROCm SMI, else the runtime,\n"
      "else the CPU), bandwidth against the catalog peak, the gates, both probe kernels at the model's "
      "shape,\n"
      "capacity on the memory free now, decode per token calibrated here; verdict PASS / WARN / FAIL first,\n"
      "each reason with its fix as the engine's flag (--max-model-len N, --kv-cache-dtype fp8, ...).\n"
      "No GPU: the probes run on the CPU and capacity is judged for --gpu (default h200): WARN no_gpu.\n"
      "Exit 0 PASS (and WARN), 1 at or above --fail-on, 2 bad input, 3 device error.");
  add_model_gpu_flags(*command, args->model, args->gpu, false,
                      "Catalog id, config.json path, directory, or HF cache org/name (default llama-3.1-8b)",
                      "GPU catalog id to judge against, or auto (default: match the device found; "
                      "with no GPU, h200)");
  add_engine_flags(*command, args->options);
  add_batch_flag(*command, args->options.batch, "Sequences decoding together in the probes (default 1)");
  add_count_flag(*command, "--concurrency", args->concurrency,
                 "Sequences that must fit at max_model_len (FAIL when fewer do)", 1, 1ull << 32);
  command->add_flag("--quick", args->quick,
                    "Few points, short budgets (default): under 30 s on a GPU, 90 s on cpu");
  command->add_flag("--full", args->full, "Sweep 1K..32K and max_model_len with longer budgets");
  add_backend_flag(*command, args->backend, "Where the probes run: auto, cuda, hip or cpu")->default_str("auto");
  command->add_option("--fail-on", args->fail_on, "Exit 1 from this verdict up: warn or fail")
      ->default_str("fail");
  // No -q: vLLM's -q is --quantization (issue #22 item 3).
  command->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  command
      ->add_option("--plot", args->plot_path,
                   "Write decode ms/token vs context (measured and predicted) as SVG")
      ->check(output_target("--plot"));
  add_output_options(*command, state);
  add_launch_line(*command, args->launch);
  command->callback([args, &state] { run(*args, state); });
}

}  // namespace kvsight::cli
