// The checked output writer (cli/output_file.hpp): what it refuses, that it never
// follows or clobbers a planted path, that a failed run writes nothing, and that a
// stdout write error fails the run (issue #14 item 2).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kvsight/error.hpp"
#include "output_file.hpp"
#include "test_support.hpp"

extern char** environ;

namespace kvsight::cli {
namespace {

namespace fs = std::filesystem;
using test::run_kvsight;
using test::temp_dir;
using test::write_file;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The InputError message of check_output_target, or "" if it accepted the path.
std::string refusal(const std::string& path, const std::string& flag = "--output") {
  try {
    check_output_target(path, flag);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(OutputFile, NewFileIsWrittenWholeWithNoTemporaryLeft) {
  const std::string dir = temp_dir("out-new");
  write_output_file(dir + "/out.json", "--output", "{\"a\":1}\n");
  EXPECT_EQ(read(dir + "/out.json"), "{\"a\":1}\n");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"out.json"});
}

TEST(OutputFile, ExistingRegularFileIsReplacedAndKeepsItsMode) {
  const std::string dir = temp_dir("out-existing");
  const std::string path = dir + "/out.json";
  write_file(path, "old contents, longer than the new ones");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  write_output_file(path, "--output", "new\n");
  EXPECT_EQ(read(path), "new\n");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0640u);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"out.json"});
}

TEST(OutputFile, SymlinkTargetIsRefusedAndWhatItPointsToIsUntouched) {
  const std::string dir = temp_dir("out-symlink");
  write_file(dir + "/victim", "precious");
  fs::create_symlink(dir + "/victim", dir + "/out.json");
  const std::string message = refusal(dir + "/out.json");
  EXPECT_TRUE(contains(message, "--output")) << message;
  EXPECT_TRUE(contains(message, "symlink")) << message;
  EXPECT_THROW(write_output_file(dir + "/out.json", "--output", "attack"), InputError);
  EXPECT_EQ(read(dir + "/victim"), "precious");
  EXPECT_TRUE(fs::is_symlink(dir + "/out.json"));  // still the link, not replaced by a file
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"out.json", "victim"}));
}

TEST(OutputFile, PlantedOldStyleTemporaryIsNeverFollowed) {
  // Before #14 the temporary was <out>.tmp.<pid>, opened without O_EXCL: a symlink
  // planted at that name had its target overwritten. Plant it for this very pid.
  const std::string dir = temp_dir("out-planted");
  write_file(dir + "/victim", "precious");
  const std::string planted = dir + "/out.json.tmp." + std::to_string(::getpid());
  fs::create_symlink(dir + "/victim", planted);
  write_output_file(dir + "/out.json", "--output", "result\n");
  EXPECT_EQ(read(dir + "/victim"), "precious");
  EXPECT_EQ(read(dir + "/out.json"), "result\n");
  EXPECT_FALSE(fs::is_symlink(dir + "/out.json"));
  EXPECT_TRUE(fs::is_symlink(planted));
}

TEST(OutputFile, NonRegularTargetsAreRefusedNamingWhatTheyAre) {
  const std::string dir = temp_dir("out-kinds");
  fs::create_directory(dir + "/subdir");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  EXPECT_TRUE(contains(refusal(dir + "/subdir"), "a directory")) << refusal(dir + "/subdir");
  EXPECT_TRUE(contains(refusal(dir + "/fifo", "--json-output"), "--json-output: "));
  EXPECT_TRUE(contains(refusal(dir + "/fifo"), "a FIFO")) << refusal(dir + "/fifo");
  EXPECT_TRUE(contains(refusal("/dev/null"), "a character device")) << refusal("/dev/null");
  EXPECT_TRUE(contains(refusal(dir + "/"), "names a directory")) << refusal(dir + "/");
  EXPECT_TRUE(contains(refusal(""), "is empty")) << refusal("");
  EXPECT_TRUE(contains(refusal(dir + "/missing/out.json"), "does the directory exist"))
      << refusal(dir + "/missing/x");
  // A regular file under a regular file is not a directory.
  write_file(dir + "/file", "x");
  EXPECT_FALSE(refusal(dir + "/file/out.json").empty());
  // And the control: a new name and an existing regular file are accepted.
  EXPECT_EQ(refusal(dir + "/new.json"), "");
  EXPECT_EQ(refusal(dir + "/file"), "");
}

TEST(OutputFile, OneBadArtefactMeansNoneIsWritten) {
  // Both temporaries are written before either is renamed: the second target
  // fails its check, so the first (valid) target must not appear either.
  const std::string dir = temp_dir("out-all-or-none");
  fs::create_directory(dir + "/subdir");
  const std::vector<Artefact> artefacts = {{dir + "/a.json", "--output", "a\n"},
                                           {dir + "/subdir", "--plot", "b\n"}};
  EXPECT_THROW(write_artefacts(artefacts), InputError);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"subdir"});
  EXPECT_TRUE(fs::is_empty(dir + "/subdir"));
}

// Runs kvsight with stdout on /dev/full (every write fails with ENOSPC).
int run_into_dev_full(const std::vector<std::string>& args, std::string& err) {
  const std::string dir = temp_dir("dev-full");
  const std::string err_path = dir + "/err";
  std::vector<std::string> argv_text{KVSIGHT_BINARY};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/full", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  err = read(err_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(OutputFile, StdoutWriteErrorFailsTheRun) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  std::string err;
  // The plan itself is fine (exit 0 to a file); its text cannot be written: exit 3.
  EXPECT_EQ(run_into_dev_full({"plan", "--model", "smollm3-3b"}, err), 3) << err;
  EXPECT_TRUE(contains(err, "writing stdout failed")) << err;
  EXPECT_TRUE(contains(err, "No space left on device")) << err;
  EXPECT_EQ(run_into_dev_full({"--help"}, err), 3) << err;
  EXPECT_TRUE(contains(err, "writing stdout failed")) << err;
  // The control: the same plan to a regular stdout succeeds.
  EXPECT_EQ(run_kvsight({"plan", "--model", "smollm3-3b"}).exit_code, 0);
}

TEST(OutputFile, DeviceNodeAsOutputIsRefusedAndLeftADevice) {
  const auto run = run_kvsight({"plan", "--model", "smollm3-3b", "--output", "/dev/null"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "--output")) << run.err;
  EXPECT_TRUE(contains(run.err, "character device")) << run.err;
  struct stat info {};
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
}

TEST(OutputFile, FailedCliffLeavesNoPlot) {
  // Issue #14: cliff drew the plot, then refused --format yaml, leaving p.svg.
  // Now --format is checked at parse time and the plot is only queued until the
  // run succeeded: no p.svg.
  const std::string dir = temp_dir("cliff-plot");
  const auto run =
      run_kvsight({"cliff", "--scenario", "vllm-50264", "--plot", dir + "/p.svg", "--format", "yaml"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "yaml")) << run.err;
  EXPECT_EQ(names_in(dir), std::vector<std::string>{});
  // The control: with a valid format the plot is written.
  const auto good = run_kvsight({"cliff", "--scenario", "vllm-50264", "--plot", dir + "/p.svg"});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_TRUE(contains(read(dir + "/p.svg"), "<svg"));
}

TEST(OutputFile, SweepWithBadOutputIsRefusedBeforeItRuns) {
  const std::string dir = temp_dir("sweep-bad-output");
  const std::vector<std::string> sweep = {"probe",      "sweep", "--backend", "cpu", "--head-dim", "64",
                                          "--kv-heads", "1",     "--q-heads", "1",   "--contexts", "64,128",
                                          "--repeats",  "1",     "--warmup",  "0"};
  auto args = sweep;
  args.insert(args.end(), {"--json-output", dir + "/sweep.json", "--output", dir + "/missing/out.txt"});
  const auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "--output")) << run.err;
  // The sweep prints a progress line per point to stderr: none means it never ran.
  EXPECT_FALSE(contains(run.err, "kvsight probe sweep:")) << run.err;
  EXPECT_EQ(names_in(dir), std::vector<std::string>{});
  // A FIFO as --json-output is refused the same way (never opened, so no hang).
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  args = sweep;
  args.insert(args.end(), {"--json-output", dir + "/fifo"});
  const auto fifo = run_kvsight(args);
  EXPECT_EQ(fifo.exit_code, 2) << fifo.err;
  EXPECT_TRUE(contains(fifo.err, "--json-output")) << fifo.err;
  EXPECT_TRUE(contains(fifo.err, "FIFO")) << fifo.err;
  // The control: the same sweep with good paths writes both files.
  args = sweep;
  args.insert(args.end(), {"--json-output", dir + "/sweep.json", "--output", dir + "/out.txt"});
  const auto good = run_kvsight(args);
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_TRUE(contains(good.err, "kvsight probe sweep:"))
      << good.err;  // so its absence above means something
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"fifo", "out.txt", "sweep.json"}));
}

// Issue #25 class 7: an output that is another output of the run, or one of its inputs,
// lost an artefact (or the input) silently. Now the run is refused, naming both flags,
// and nothing is written: the input keeps its bytes.
TEST(OutputFile, AnOutputThatIsAnotherOutputOrAnInputIsRefused) {
  const std::string dir = temp_dir("collide");
  // -o and --plot naming one file, spelled two ways.
  auto run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--plot", dir + "/p.svg", "-o", dir + "/./p.svg"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "is the same file as --plot")) << run.err;
  EXPECT_EQ(names_in(dir), std::vector<std::string>{});
  // --output over the --log it reads: the log is kept as it was.
  const std::string log_path = fs::path(KVSIGHT_SOURCE_DIR) / "tests/fixtures/logs/vllm-lmcache-1739.log";
  const std::string log = dir + "/vllm.log";
  write_file(log, read(log_path));
  run = run_kvsight({"explain", "--log", log, "--model", "llama-3.1-8b", "-o", log});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "--output: '" + log + "' is the input file of --log")) << run.err;
  EXPECT_EQ(read(log), read(log_path));
  // A hard link to the --model config.json is the same file under another name.
  const std::string config = dir + "/config.json";
  write_file(config, read(fs::path(KVSIGHT_SOURCE_DIR) / "tests/fixtures/logs/llama-2-7b.config.json"));
  ASSERT_EQ(::link(config.c_str(), (dir + "/linked.json").c_str()), 0);
  run = run_kvsight({"plan", "--model", config, "-o", dir + "/linked.json"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "is the input file of --model")) << run.err;
  // In a fleet's comma list too.
  run = run_kvsight({"plan", "--model", "llama-3.1-8b," + config, "--gpu", "h200", "-o", config});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "is the input file of --model")) << run.err;
  // The controls: distinct files are written.
  run = run_kvsight({"plan", "--model", config, "-o", dir + "/plan.txt"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  run = run_kvsight({"cliff", "--scenario", "vllm-50264", "--plot", dir + "/p.svg", "-o", dir + "/cliff.txt"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"cliff.txt", "config.json", "linked.json", "p.svg",
                                                     "plan.txt", "vllm.log"}));
}

}  // namespace
}  // namespace kvsight::cli
