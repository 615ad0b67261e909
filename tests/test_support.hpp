#pragma once
// Helpers shared by the tests: run the kvsight binary and capture its output.
#include <string>
#include <vector>

namespace kvsight::test {

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built kvsight binary with args (no shell), capturing stdout/stderr.
CliRun run_kvsight(const std::vector<std::string>& args);

// A fresh empty directory under the test temp dir, removed at process exit.
std::string temp_dir(const std::string& name);

// Writes text to a file, creating parent directories.
void write_file(const std::string& path, const std::string& text);

}  // namespace kvsight::test
