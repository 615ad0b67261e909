// kvsight gates: which attention kernel an engine selects for a model on a device,
// every reason the others are refused, and the constraints that refuse start-up.
#include <memory>

#include "commands.hpp"
#include "figure_output.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/gates.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::cli {

namespace {

struct GatesArgs {
  std::string model;
  std::string gpu;
  EngineOptions options;
  std::vector<std::string> launch;  // the user's launch line, after --
};

void run_gates(GatesArgs args, CliState& state) {
  const auto launch = apply_launch_line(state, args.launch, args.model, args.options);
  if (args.model.empty()) throw InputError("--model", "is required (or a launch line after --)");
  check_engine_spellings(state, args.options.engine);
  if (args.gpu.empty()) throw InputError("--gpu", "is required; give a GPU catalog id (kvsight gpus)");
  const app::GatesOutcome outcome = app::run_gates({args.model, args.gpu, args.options});
  state.exit_code = app::exit_code(outcome.verdict);
  app::FigureDoc doc = app::gates_figures(outcome);
  if (launch) doc.sections.insert(doc.sections.begin(), app::launch_figures(*launch));
  emit(state, render_figures(doc, state.format()));
}

}  // namespace

void add_gates_command(CLI::App& app, CliState& state) {
  auto args = std::make_shared<GatesArgs>();
  auto* command = app.add_subcommand(
      "gates",
      "Which attention kernel the engine selects for this model on this device, every reason each other\n"
      "candidate is refused (condition and value), and the hard constraints that refuse start-up.\n"
      "Evaluated per group of attention layers; rules cite the engine file and version they were read from.");
  add_model_gpu_flags(*command, args->model, args->gpu, false,
                      "Catalog id or Hugging Face id, config.json path, directory, or HF cache org/name",
                      "GPU catalog id, any case (kvsight gpus); required");
  add_engine_flags(*command, args->options);
  add_batch_flag(*command, args->options.batch, "Sequences decoding together (default 1)");
  add_output_options(*command, state);
  add_launch_line(*command, args->launch);
  command->footer(
      "Exit codes: 0 the engine can start with these settings (a kernel is selected for every attention "
      "layer);\n"
      "1 a hard constraint refuses start-up (errors[] non-empty: e.g. --tp does not divide the attention "
      "heads);\n"
      "2 bad input. JSON: attention.selected, attention.splits_context, attention.refused[] {kernel, "
      "reasons[]},\n"
      "attention.layer_groups[], constraints[], errors[].");
  command->callback([args, &state] { run_gates(*args, state); });
}

}  // namespace kvsight::cli
