// Device faults (docs/reliability.md, "Device faults"): an allocation that
// fails, a kernel launch that reports an error and a result that fails the
// reference check, injected on the cpu backend through KVSIGHT_INJECT_FAULT or
// --inject-fault. Each must exit 3 naming the fault and where, print no
// measurement, write no file, and release every device buffer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kvsight/error.hpp"
#include "kvsight/probes/faults.hpp"
#include "kvsight/probes/probes.hpp"
#include "test_support.hpp"

namespace {
namespace kp = kvsight::probes;
namespace fs = std::filesystem;
using kvsight::test::run_kvsight;

// Sets KVSIGHT_INJECT_FAULT for the scope (the spawned binary inherits environ).
class ScopedFaultEnv {
 public:
  explicit ScopedFaultEnv(const std::string& value) { ::setenv("KVSIGHT_INJECT_FAULT", value.c_str(), 1); }
  ~ScopedFaultEnv() { ::unsetenv("KVSIGHT_INJECT_FAULT"); }
  ScopedFaultEnv(const ScopedFaultEnv&) = delete;
  ScopedFaultEnv& operator=(const ScopedFaultEnv&) = delete;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

// Small shapes: head_dim 128, 2 KV / 4 Q heads, batch 1, bf16, 2 timed runs after 1 warm-up.
const std::vector<std::string> kShape = {"--backend", "cpu", "--kv-heads", "2", "--q-heads", "4",
                                         "--repeats", "2",   "--warmup",   "1", "--threads", "2"};

std::vector<std::string> command_args(const std::string& command, const std::string& dir) {
  std::vector<std::string> args = {"probe", command};
  if (command == "bandwidth") {
    args.insert(args.end(),
                {"--backend", "cpu", "--bytes", "4MiB", "--repeats", "2", "--warmup", "1", "--threads", "2"});
  } else {
    args.insert(args.end(), kShape.begin(), kShape.end());
    if (command == "attention") args.insert(args.end(), {"--context", "512", "--kernel", "splitkv"});
    if (command == "sweep") {
      args.insert(args.end(), {"--contexts", "512,1024", "--kernels", "nosplit,splitkv", "--json-output",
                               dir + "/sweep.json"});
    }
  }
  args.insert(args.end(), {"--format", "json", "--output", dir + "/out.json"});
  return args;
}

struct CliFault {
  std::string command;  // attention | sweep | bandwidth
  std::string fault;    // KVSIGHT_INJECT_FAULT value
  std::vector<std::string> stderr_parts;
};

// Hand-derived expectations: bandwidth's first two allocations are the 4 MiB
// source and destination (4194304 bytes, 1048576 words); the attention
// session allocates K, V, q, block tables, seq lens (4 bytes x batch 1), out
// (batch 1 x 4 Q heads x 128 x 4 bytes = 2048), in that order; the relative
// error bound at context 512 is 16 x 2^-24 x sqrt(512 + 128) = 16 x 25.30 /
// 16777216 = 0.000024 (probes/src/shape.cpp error_bound).
const std::vector<CliFault> kCliFaults = {
    {"attention",
     "alloc",
     {"device error: cpu: allocation of ", "bytes failed (injected fault KVSIGHT_INJECT_FAULT=alloc)"}},
    {"attention",
     "alloc:5",
     {"cpu: allocation of 4 bytes failed (injected fault KVSIGHT_INJECT_FAULT=alloc:5)"}},
    {"attention",
     "alloc:6",
     {"cpu: allocation of 2048 bytes failed (injected fault KVSIGHT_INJECT_FAULT=alloc:6)"}},
    {"attention",
     "kernel",
     {"device error: cpu: kernel execution failed: paged decode (splitkv) reported an error (injected fault "
      "KVSIGHT_INJECT_FAULT=kernel)"}},
    {"attention",
     "verify",
     {"device error: cpu: splitkv result at context 512 failed verification against the float64 reference: "
      "max relative error ",
      " > bound 0.000024 (injected fault KVSIGHT_INJECT_FAULT=verify)"}},
    {"sweep", "alloc", {"device error: cpu: allocation of ", "(injected fault KVSIGHT_INJECT_FAULT=alloc)"}},
    {"sweep",
     "kernel",
     {"device error: cpu: kernel execution failed: paged decode (nosplit) reported an error (injected fault "
      "KVSIGHT_INJECT_FAULT=kernel)"}},
    // Per point: 1 check + 1 warm-up + 2 timed launches; the 9th launch is the
    // first of nosplit at context 1024, after context 512 completed for both kernels.
    {"sweep",
     "kernel:9",
     {"kvsight probe sweep: splitkv context 512:", "cpu: kernel execution failed: paged decode (nosplit)",
      "KVSIGHT_INJECT_FAULT=kernel:9)"}},
    {"sweep",
     "verify",
     {"cpu: nosplit result at context 512 failed verification against the float64 reference",
      "> bound 0.000024 (injected fault KVSIGHT_INJECT_FAULT=verify)"}},
    // The 4th check is splitkv at context 1024.
    {"sweep",
     "verify:4",
     {"kvsight probe sweep: nosplit context 1024:", "cpu: splitkv result at context 1024 failed verification",
      "KVSIGHT_INJECT_FAULT=verify:4)"}},
    {"bandwidth",
     "alloc",
     {"device error: cpu: allocation of 4194304 bytes failed (injected fault KVSIGHT_INJECT_FAULT=alloc)"}},
    {"bandwidth",
     "alloc:2",
     {"cpu: allocation of 4194304 bytes failed (injected fault KVSIGHT_INJECT_FAULT=alloc:2)"}},
    {"bandwidth",
     "kernel",
     {"device error: cpu: kernel execution failed: stream read reported an error (injected fault "
      "KVSIGHT_INJECT_FAULT=kernel)"}},
    // 1 warm-up + 2 timed reads, then the first copy.
    {"bandwidth",
     "kernel:4",
     {"cpu: kernel execution failed: stream copy reported an error (injected fault "
      "KVSIGHT_INJECT_FAULT=kernel:4)"}},
    {"bandwidth",
     "verify",
     {"device error: cpu: bandwidth result failed verification (exact, bound 0): read sum ",
      "copy: 1 of 1048576 words differ (injected fault KVSIGHT_INJECT_FAULT=verify)"}},
};

TEST(ProbeFaults, CliFaultsExitThreeNamingTheFaultAndWriteNothing) {
  for (const auto& c : kCliFaults) {
    SCOPED_TRACE(c.command + " with KVSIGHT_INJECT_FAULT=" + c.fault);
    const std::string dir = kvsight::test::temp_dir("faults");
    kvsight::test::CliRun run;
    {
      ScopedFaultEnv env(c.fault);
      run = run_kvsight(command_args(c.command, dir));
    }
    EXPECT_EQ(run.exit_code, 3) << run.err;
    for (const auto& part : c.stderr_parts)
      EXPECT_TRUE(contains(run.err, part)) << "missing '" << part << "' in:\n" << run.err;
    // No measurement: nothing on stdout, no file (nor a temporary) at --output or --json-output.
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(files_in(dir), std::vector<std::string>{});
  }
}

TEST(ProbeFaults, SameCommandsWithoutAFaultSucceedAndWrite) {
  // The control: the commands above are valid, so exit 3 came from the fault alone.
  for (const std::string command : {"attention", "sweep", "bandwidth"}) {
    SCOPED_TRACE(command);
    const std::string dir = kvsight::test::temp_dir("faults-control");
    const auto run = run_kvsight(command_args(command, dir));
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_TRUE(fs::exists(dir + "/out.json"));
    EXPECT_EQ(fs::exists(dir + "/sweep.json"), command == "sweep");
  }
}

TEST(ProbeFaults, FlagInjectsLikeTheEnvironmentAndIsListedAsTestingOnly) {
  const std::string dir = kvsight::test::temp_dir("faults-flag");
  auto args = command_args("attention", dir);
  args.insert(args.end(), {"--inject-fault", "kernel:2"});
  const auto run = run_kvsight(args);
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_TRUE(contains(run.err,
                       "cpu: kernel execution failed: paged decode (splitkv) reported an error "
                       "(injected fault --inject-fault=kernel:2)"))
      << run.err;
  EXPECT_EQ(files_in(dir), std::vector<std::string>{});

  for (const std::string command : {"attention", "sweep", "bandwidth"}) {
    const auto help = run_kvsight({"probe", command, "--help"});
    EXPECT_TRUE(contains(help.out, "--inject-fault")) << command;
    EXPECT_TRUE(contains(help.out, "Testing only")) << command;
  }
}

TEST(ProbeFaults, BadFaultSpecsExitTwo) {
  for (const std::string spec : {"bogus", "alloc:0", "kernel:", "verify:x", "alloc:-1"}) {
    SCOPED_TRACE(spec);
    const std::string dir = kvsight::test::temp_dir("faults-bad");
    {
      ScopedFaultEnv env(spec);
      const auto run = run_kvsight(command_args("attention", dir));
      EXPECT_EQ(run.exit_code, 2) << run.err;
      EXPECT_TRUE(contains(run.err, "KVSIGHT_INJECT_FAULT: '" + spec + "'")) << run.err;
    }
    auto args = command_args("attention", dir);
    args.insert(args.end(), {"--inject-fault", spec});
    const auto run = run_kvsight(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_TRUE(contains(run.err, "--inject-fault: '" + spec + "'")) << run.err;
    EXPECT_EQ(files_in(dir), std::vector<std::string>{});
  }
}

// ---- In process: the probes API and the live-allocation counter.

class ProbeFaultsApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("KVSIGHT_INJECT_FAULT");
    kp::set_injected_fault("");
    shape_.head_dim = 128;
    shape_.block_size = 16;
    shape_.kv_heads = 2;
    shape_.q_heads = 4;
    shape_.batch = 1;
    shape_.context = 512;
    shape_.dtype = "bf16";
    options_.repeats = 2;
    options_.warmup = 1;
    options_.threads = 2;
    ASSERT_EQ(kp::live_device_bytes(), 0u);
  }
  void TearDown() override {
    kp::set_injected_fault("");
    ::unsetenv("KVSIGHT_INJECT_FAULT");
  }

  // Runs `call` with `spec` injected; expects DeviceError containing `part`
  // and no live device memory afterwards.
  template <typename Call>
  void expect_fault(const std::string& spec, const std::string& part, Call call) {
    SCOPED_TRACE(spec);
    kp::set_injected_fault(spec);
    try {
      call();
      ADD_FAILURE() << "no DeviceError for " << spec;
    } catch (const kvsight::DeviceError& error) {
      EXPECT_TRUE(contains(error.what(), part)) << error.what();
      EXPECT_TRUE(contains(error.what(), "(injected fault --inject-fault=" + spec + ")")) << error.what();
    }
    EXPECT_EQ(kp::live_device_bytes(), 0u);
    EXPECT_EQ(kp::live_device_buffers(), 0u);
    kp::set_injected_fault("");
  }

  kp::AttentionShape shape_;
  kp::ProbeOptions options_;
};

TEST_F(ProbeFaultsApi, CounterSeesTheSessionBuffersWhileRunningAndZeroAfter) {
  std::vector<std::uint64_t> bytes_seen, buffers_seen;
  options_.progress = [&](const std::string&) {
    bytes_seen.push_back(kp::live_device_bytes());
    buffers_seen.push_back(kp::live_device_buffers());
  };
  const auto result = kp::run_sweep("cpu", "splitkv", shape_, {512, 1024}, options_);
  ASSERT_EQ(result.points.size(), 2u);
  ASSERT_EQ(bytes_seen.size(), 2u);
  // K, V, q, tables, seq lens, out, partial out / max / sum.
  EXPECT_EQ(buffers_seen[0], 9u);
  // At least K + V for context 1024: 1024 tokens x 2 KV heads x 128 x 2 bytes x 2 (K and V).
  EXPECT_GE(bytes_seen[0], 1024u * 2 * 128 * 2 * 2);
  EXPECT_EQ(kp::live_device_bytes(), 0u);
  EXPECT_EQ(kp::live_device_buffers(), 0u);
}

TEST_F(ProbeFaultsApi, EveryAllocationOfTheSessionCanFailAndLeavesNothing) {
  // The session makes exactly 9 allocations and the stream probe of the run one
  // more (its partial sums, after the kernels): the 11th never comes.
  for (int n = 1; n <= 10; ++n) {
    expect_fault("alloc:" + std::to_string(n), "cpu: allocation of ", [&] {
      kp::run_sweep("cpu", "splitkv", shape_, {512, 1024}, options_);
    });
  }
  kp::set_injected_fault("alloc:11");
  EXPECT_NO_THROW(kp::run_sweep("cpu", "splitkv", shape_, {512, 1024}, options_));
  EXPECT_EQ(kp::live_device_bytes(), 0u);
}

TEST_F(ProbeFaultsApi, EveryKernelLaunchOfAnAttentionRunCanFail) {
  // 1 check + 1 warm-up + 2 timed launches, then the run's stream probe (1
  // warm-up + 2 timed reads): the 8th never comes.
  for (int n = 1; n <= 4; ++n) {
    expect_fault("kernel:" + std::to_string(n), "cpu: kernel execution failed: paged decode (nosplit)",
                 [&] { kp::run_attention("cpu", "nosplit", shape_, options_); });
  }
  for (int n = 5; n <= 7; ++n) {
    expect_fault("kernel:" + std::to_string(n), "cpu: kernel execution failed: stream read",
                 [&] { kp::run_attention("cpu", "nosplit", shape_, options_); });
  }
  kp::set_injected_fault("kernel:8");
  const auto result = kp::run_attention("cpu", "nosplit", shape_, options_);
  EXPECT_TRUE(result.point.correct);
}

TEST_F(ProbeFaultsApi, VerifyFaultIsAnErrorNotAMeasurement) {
  expect_fault("verify", "nosplit result at context 512 failed verification against the float64 reference",
               [&] { kp::run_attention("cpu", "nosplit", shape_, options_); });
  expect_fault("verify:2", "splitkv result at context 512 failed verification", [&] {
    kp::run_sweeps("cpu", {"nosplit", "splitkv"}, shape_, {512}, options_);
  });
  // One check per run: a second verify never comes.
  kp::set_injected_fault("verify:2");
  EXPECT_NO_THROW(kp::run_attention("cpu", "nosplit", shape_, options_));
  // Without the reference check there is nothing to corrupt, and nothing is claimed correct.
  kp::set_injected_fault("verify");
  options_.check = false;
  const auto unchecked = kp::run_attention("cpu", "nosplit", shape_, options_);
  EXPECT_FALSE(unchecked.point.correct);
}

TEST_F(ProbeFaultsApi, BandwidthFaultsReleaseBothBuffers) {
  constexpr std::uint64_t kBytes = 4ull << 20;
  expect_fault("alloc:1", "cpu: allocation of 4194304 bytes failed",
               [&] { kp::run_bandwidth("cpu", kBytes, options_); });
  expect_fault("alloc:2", "cpu: allocation of 4194304 bytes failed",
               [&] { kp::run_bandwidth("cpu", kBytes, options_); });
  expect_fault("alloc:3", "cpu: allocation of ", [&] { kp::run_bandwidth("cpu", kBytes, options_); });
  expect_fault("kernel:1", "stream read reported an error",
               [&] { kp::run_bandwidth("cpu", kBytes, options_); });
  expect_fault("kernel:4", "stream copy reported an error",
               [&] { kp::run_bandwidth("cpu", kBytes, options_); });
  expect_fault("verify", "copy: 1 of 1048576 words differ",
               [&] { kp::run_bandwidth("cpu", kBytes, options_); });
  kp::set_injected_fault("alloc:4");  // source, destination, partial sums: 3 allocations
  EXPECT_TRUE(kp::run_bandwidth("cpu", kBytes, options_).correct);
}

TEST_F(ProbeFaultsApi, EnvironmentIsReadAndNoneOverridesIt) {
  ::setenv("KVSIGHT_INJECT_FAULT", "alloc", 1);
  try {
    kp::run_attention("cpu", "nosplit", shape_, options_);
    ADD_FAILURE() << "no DeviceError";
  } catch (const kvsight::DeviceError& error) {
    EXPECT_TRUE(contains(error.what(), "(injected fault KVSIGHT_INJECT_FAULT=alloc)")) << error.what();
  }
  EXPECT_EQ(kp::live_device_bytes(), 0u);
  kp::set_injected_fault("none");
  EXPECT_TRUE(kp::run_attention("cpu", "nosplit", shape_, options_).point.correct);
  EXPECT_THROW(kp::set_injected_fault("alloc:0"), kvsight::InputError);
}

}  // namespace
