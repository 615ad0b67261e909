#include "test_support.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <vector>

extern char** environ;

namespace kvsight::test {

CliRun run_kvsight(const std::vector<std::string>& args) {
  // Output goes to temporary files, not pipes, so a large stdout can never
  // deadlock against an unread stderr.
  const std::string dir = temp_dir("cli-run");
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  std::vector<std::string> argv_text{KVSIGHT_BINARY};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv_text[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream o(out_path), e(err_path);
  run.out.assign(std::istreambuf_iterator<char>(o), {});
  run.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove_all(dir);
  return run;
}

namespace {
// Every directory temp_dir made, removed when the test process exits, so a test
// run leaves nothing in /tmp (thousands of runs had left thousands of them).
// Errors are ignored: a test may have made a file unreadable on purpose.
struct TempDirRegistry {
  std::vector<std::filesystem::path> paths;
  TempDirRegistry() = default;
  TempDirRegistry(const TempDirRegistry&) = delete;
  TempDirRegistry& operator=(const TempDirRegistry&) = delete;
  ~TempDirRegistry() {
    for (const auto& p : paths) {
      std::error_code ec;
      std::filesystem::permissions(p, std::filesystem::perms::owner_all, std::filesystem::perm_options::add,
                                   ec);
      std::filesystem::remove_all(p, ec);
    }
  }
};
TempDirRegistry& temp_dirs() {
  static TempDirRegistry registry;
  return registry;
}
}  // namespace

std::string temp_dir(const std::string& name) {
  static int counter = 0;
  auto path = std::filesystem::temp_directory_path() /
              ("kvsight-test-" + std::to_string(::getpid()) + "-" + name + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  temp_dirs().paths.push_back(path);
  return path.string();
}

void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string make_gguf(const std::string& name, const std::string& variant) {
  const std::string dir = temp_dir("gguf-" + variant);
  const std::string out = dir + "/" + name;
  const std::string command = "python3 '" KVSIGHT_SOURCE_DIR "/tests/make_gguf.py' '" + out + "' " + variant +
                              " > '" + dir + "/log' 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream log(dir + "/log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  if (rc != 0) {
    ADD_FAILURE() << "make_gguf.py failed (rc " << rc << "): " << text
                  << "\nThe gguf Python package is required: scripts/setup.sh installs it "
                     "(pip install --break-system-packages gguf).";
    return "";
  }
  return out;
}

std::string expected_tile_reads_suffix() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool intel = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("vendor_id", 0) == 0) {
      intel = line.find("GenuineIntel") != std::string::npos;
      break;
    }
  }
  return intel ? "; tile reads: prefetch" : "; tile reads: dense + prefetch";
}

}  // namespace kvsight::test
