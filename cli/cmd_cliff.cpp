// PLACEHOLDER: replaced by the owner of the 'cliff' command.
#include "commands.hpp"
#include "kvsight/error.hpp"
namespace kvsight::cli {
void add_cliff_command(CLI::App& app, CliState& state) {
  auto* command = app.add_subcommand("cliff", "(not yet available)");
  add_output_options(*command, state);
  command->callback([&state] {
    throw InputError("cliff", "this command is not built yet");
  });
}
}  // namespace kvsight::cli
