// kvsight: GPU KV-cache memory planner and paged-attention probes.
#include "commands.hpp"

int main(int argc, char** argv) { return kvsight::cli::run_cli(argc, argv); }
