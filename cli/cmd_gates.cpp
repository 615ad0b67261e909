// PLACEHOLDER: replaced by the owner of the 'gates' command.
#include "commands.hpp"
#include "kvsight/error.hpp"
namespace kvsight::cli {
void add_gates_command(CLI::App& app, CliState& state) {
  auto* command = app.add_subcommand("gates", "(not yet available)");
  add_output_options(*command, state);
  command->callback([&state] {
    throw InputError("gates", "this command is not built yet");
  });
}
}  // namespace kvsight::cli
