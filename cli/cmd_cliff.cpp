// kvsight cliff: decode time versus context for the selected attention path and a
// split-KV path, beside the published vLLM #50264 / PR #45916 figures, optionally
// with both probe kernels measured on this device.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "figure_output.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/cliff.hpp"
#include "kvsight/counts.hpp"
#include "kvsight/decode_model.hpp"
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

// --plot: ms per token of both curves, and in scenario mode the published ones.
Plot cliff_plot(const app::CliffOutcome& outcome) {
  const PublishedCliff& published = vllm_50264_figures();
  Plot plot;
  plot.title = outcome.scenario_mode ? published.collapse_source + " decode cliff (gfx1100, TP 2, batch 1)"
                                     : outcome.title;
  plot.x_label = "context (tokens)";
  plot.y_label = "ms per token";
  PlotSeries fallback{outcome.kernel + (outcome.splits_context ? " (selected)" : " (selected, no split)"),
                      "#d62728",
                      {},
                      false,
                      false};
  for (const DecodePoint& p : outcome.curve.points) fallback.points.emplace_back(p.context, p.ms_per_token);
  PlotSeries split{"split-KV (predicted)", "#1f77b4", {}, false, true};
  for (const DecodePoint& p : outcome.split_curve.points) split.points.emplace_back(p.context, p.ms_per_token);
  plot.series = {fallback, split};
  if (outcome.scenario_mode) {
    PlotSeries collapse{"published, " + published.engine_version, "#d62728", {}, true, false};
    for (const PublishedPoint& p : published.collapse) collapse.points.emplace_back(p.context, p.ms_per_token);
    PlotSeries published_split{"published, " + published.split_source, "#1f77b4", {}, true, false};
    for (const PublishedPoint& p : published.split) published_split.points.emplace_back(p.context, p.ms_per_token);
    plot.series.push_back(collapse);
    plot.series.push_back(published_split);
  }
  return plot;
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
  // Queued: written with the rest of the run's output once it succeeded.
  if (!args.plot_path.empty()) add_artefact(state, args.plot_path, "--plot", render_svg(cliff_plot(outcome)));
  emit(state, render_figures(app::cliff_figures(outcome), state.format()));
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
  add_model_gpu_flags(*command, args->model, args->gpu, false,
                      "Catalog id, config.json path, directory, or HF cache org/name", "GPU catalog id");
  add_engine_flags(*command, args->options);
  add_batch_flag(*command, args->options.batch, "Sequences decoding together (default 1)");
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
  add_backend_flag(*command, args->backend,
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
