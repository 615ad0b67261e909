// kvsight inspect: the derived shape of a model: layer kinds, KV heads and head
// dims, RoPE/NoPE per layer, rope scaling, native vs extended context, and the
// defaults the reader had to assume.
#include <memory>

#include "commands.hpp"
#include "figure_output.hpp"
#include "flag_groups.hpp"
#include "kvsight/app/inspect.hpp"

namespace kvsight::cli {

void add_inspect_command(CLI::App& app, CliState& state) {
  auto model_arg = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("inspect", "A model's derived shape: layer kinds, KV heads, RoPE/NoPE, rope scaling, notes");
  cmd->description(
      "Reads the model's config (catalog id, config.json, directory, or org/name in the local HF cache) and shows\n"
      "what kvsight derived from it: per-layer attention kinds, KV heads and head dims, RoPE/NoPE layers, rope\n"
      "scaling and whether the context is native or extended, and every default it had to assume.\n"
      "Example: kvsight inspect --model smollm3-3b --format json");
  add_model_flag(*cmd, *model_arg, true, "Catalog id, config.json path, directory, or org/name in the local HF cache");
  add_output_options(*cmd, state);
  cmd->callback([model_arg, &state] {
    const Format format = state.format();
    emit(state, render_figures(app::inspect_model(*model_arg), format));
  });
}

}  // namespace kvsight::cli
