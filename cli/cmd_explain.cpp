// kvsight explain --log FILE: an engine start-up log reconciled term by term with kvsight's
// plan for the same inputs (app/explain). Binds flags, reads the file, renders.
#include <memory>

#include "commands.hpp"
#include "figure_output.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/explain.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"

namespace kvsight::cli {

namespace {

// A start-up log excerpt is a few KiB; a whole server log a few MiB.
constexpr std::uint64_t kMaxLogBytes = 64ull << 20;

struct ExplainArgs {
  std::string log_path;
  std::string model;
  std::string gpu;
  EngineOptions options;
  CLI::Option* engine_option = nullptr;
  std::vector<std::string> launch;  // the launch line the log came from, after --
};

void run_explain_command(ExplainArgs args, CliState& state) {
  const auto launch = apply_launch_line(state, args.launch, args.model, args.options);
  if (args.model.empty()) throw InputError("--model", "is required (or a launch line after --)");
  app::ExplainRequest request;
  request.log_name = args.log_path;
  request.log_text = read_input_file(args.log_path, "--log", kMaxLogBytes);
  request.model = args.model;
  request.gpu = args.gpu;
  request.options = args.options;
  request.engine_given = (args.engine_option && args.engine_option->count() > 0) || launch.has_value();
  // Without --engine the log's engine applies, and so do its flag spellings.
  if (!request.engine_given) {
    const std::string logged = read_engine_log(request.log_text).engine;
    if (!logged.empty()) request.options.engine = logged;
  }
  check_engine_spellings(state, request.options.engine);
  const app::ExplainOutcome out = app::run_explain(request);
  state.exit_code = 0;
  app::FigureDoc doc = app::explain_figures(request, out);
  if (launch) doc.sections.insert(doc.sections.begin(), app::launch_figures(*launch));
  emit(state, render_figures(doc, state.format()));
}

}  // namespace

void add_explain_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<ExplainArgs>();
  auto* command = app.add_subcommand(
      "explain",
      "An engine start-up log (vLLM, SGLang, TensorRT-LLM, llama.cpp) reconciled term by term with kvsight:\n"
      "weights, activation, non-torch, CUDA graphs, available KV memory, blocks / tokens, concurrency, each\n"
      "logged against kvsight with the difference and the rule behind kvsight's figure. Replayed twice: "
      "with\n"
      "the KV memory the log states, and (with --gpu, or a GPU total in the log) with GPU and flags only.");
  command->add_option("--log", args->log_path, "Engine start-up log (an excerpt is enough)")->required();
  add_model_gpu_flags(*command, args->model, args->gpu, false,
                      "The model the log came from: catalog id, HF id, config.json path or directory",
                      "GPU catalog id the log came from (replays the budget)");
  add_engine_flags(*command, args->options);
  args->engine_option = command->get_option("--engine");
  add_output_options(*command, state);
  add_launch_line(*command, args->launch);
  command->footer(
      "Flags not given are taken from the log where it states them (engine, max_model_len, utilization,\n"
      "GPU total, llama.cpp cells); pin the release with --engine-version.\n"
      "Exit codes: 0 explained; 2 bad input (no line kvsight reads in the log, a bad flag).");
  command->callback([args, &state] { run_explain_command(*args, state); });
}

}  // namespace kvsight::cli
