// kvsight: GPU KV-cache memory planner and paged-attention probes.
#include "commands.hpp"

int main(int argc, char** argv) {
  const int code = kvsight::cli::run_cli(argc, argv);
  // An error that only close reports (NFS, a full disk behind a redirect) still fails the run.
  if (!kvsight::cli::close_stdout() && code < 2) return 3;
  return code;
}
