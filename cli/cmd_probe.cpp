// PLACEHOLDER: replaced by the owner of the 'probe' command.
#include "commands.hpp"
#include "kvsight/error.hpp"
namespace kvsight::cli {
void add_probe_command(CLI::App& app, CliState& state) {
  auto* command = app.add_subcommand("probe", "(not yet available)");
  add_output_options(*command, state);
  command->callback([&state] {
    throw InputError("probe", "this command is not built yet");
  });
}
}  // namespace kvsight::cli
