// kvsight models / kvsight gpus: the built-in catalogs (figures: app/src/catalog_figures.cpp).
#include "commands.hpp"
#include "figure_output.hpp"
#include "kvsight/app/catalogs.hpp"

namespace kvsight::cli {

void add_models_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("models", "The built-in model catalog (ids for --model)");
  add_output_options(*cmd, state);
  cmd->callback([&state] { emit(state, render_figures(app::model_catalog_figures(), state.format())); });
}

void add_gpus_command(CLI::App& app, CliState& state) {
  auto* cmd = app.add_subcommand("gpus", "The built-in GPU catalog (ids for --gpu)");
  add_output_options(*cmd, state);
  cmd->callback([&state] { emit(state, render_figures(app::gpu_catalog_figures(), state.format())); });
}

}  // namespace kvsight::cli
