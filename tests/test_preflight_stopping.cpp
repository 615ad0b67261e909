// The measurement stopping rule (kvsight/probes/stopping_rule.hpp) on synthetic
// samples, and device discovery's fallback when NVML / ROCm SMI are absent.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "kvsight/probes/device_info.hpp"
#include "kvsight/probes/stopping_rule.hpp"

namespace kvsight::probes {
namespace {

// The stand-in libraries (tests/fake_nvml.cpp, fake_rocm_smi.cpp) sit beside the test binary.
std::string beside_this_test(const std::string& name) {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / name).string();
}
const std::string kFakeNvml = beside_this_test("libkvsight_fake_nvml.so");
const std::string kFakeRocmSmi = beside_this_test("libkvsight_fake_rocm_smi.so");

TEST(StoppingRule, RelativeNoiseIsSampleStdevOverMean) {
  // Samples 9, 10, 11: mean 10, squared deviations 1 + 0 + 1 = 2, sample variance
  // 2 / (3 - 1) = 1, stdev 1, noise 1 / 10 = 0.1.
  EXPECT_NEAR(relative_noise({9, 10, 11}), 0.1, 1e-12);
  // One sample has no spread to speak of; identical samples have none.
  EXPECT_EQ(relative_noise({5}), 0.0);
  EXPECT_EQ(relative_noise({4, 4, 4, 4}), 0.0);
}

TEST(StoppingRule, StopsOnNoiseOnceMinSamplesAreIn) {
  StoppingRule rule;
  rule.max_noise = 0.01;
  rule.min_samples = 5;
  rule.max_time_s = 100;
  StoppingCriterion stop(rule);
  // 100, 100.5, 99.5, 100, 100.5, 99.5 ...: mean about 100, stdev about 0.41 -> noise 0.4% < 1%,
  // but not before the fifth sample.
  const double pattern[] = {100, 100.5, 99.5};
  int taken = 0;
  while (!stop.done() && taken < 100) {
    stop.add(pattern[taken % 3], 0.001 * taken);
    ++taken;
  }
  EXPECT_EQ(taken, 5);
  const StoppingStatus s = stop.status();
  EXPECT_TRUE(s.converged);
  EXPECT_EQ(s.stopped_by, "noise");
  // Samples 100, 100.5, 99.5, 100, 100.5: mean 500.5 / 5 = 100.1; deviations -0.1, 0.4,
  // -0.6, -0.1, 0.4; squares 0.01 + 0.16 + 0.36 + 0.01 + 0.16 = 0.70; / 4 = 0.175;
  // stdev 0.41833; noise 0.41833 / 100.1 = 0.0041791.
  EXPECT_NEAR(s.mean_us, 100.1, 1e-9);
  EXPECT_NEAR(s.noise, std::sqrt(0.175) / 100.1, 1e-9);
}

TEST(StoppingRule, NoisySamplesStopOnTheTimeBudgetNotConverged) {
  StoppingRule rule;
  rule.max_noise = 0.005;
  rule.min_samples = 3;
  rule.max_time_s = 0.5;
  StoppingCriterion stop(rule);
  // Alternating 50 / 150: noise near 0.5, never under 0.5%. 0.1 s per sample: the
  // budget of 0.5 s is spent at the sixth sample (elapsed 0.1 x 5 = 0.5 at index 5).
  int taken = 0;
  while (!stop.done() && taken < 1000) {
    stop.add(taken % 2 ? 150.0 : 50.0, 0.1 * taken);
    ++taken;
  }
  EXPECT_EQ(taken, 6);
  EXPECT_FALSE(stop.status().converged);
  EXPECT_EQ(stop.status().stopped_by, "time");
  EXPECT_GT(stop.status().noise, 0.4);
}

TEST(StoppingRule, SampleCapStopsWhateverTheNoise) {
  StoppingRule rule;
  rule.max_noise = 1e-6;
  rule.min_samples = 2;
  rule.max_samples = 7;
  rule.max_time_s = 1e9;
  StoppingCriterion stop(rule);
  int taken = 0;
  while (!stop.done() && taken < 1000) stop.add(10.0 + (taken++ % 2), 0.0);
  EXPECT_EQ(taken, 7);
  EXPECT_EQ(stop.status().stopped_by, "samples");
  EXPECT_FALSE(stop.status().converged);
}

TEST(StoppingRule, MinTimeKeepsAConvergedRuleSampling) {
  StoppingRule rule;
  rule.max_noise = 0.01;
  rule.min_samples = 2;
  rule.min_time_s = 0.3;
  rule.max_time_s = 10;
  StoppingCriterion stop(rule);
  // Identical samples converge at the second, but 0.1 s each: elapsed reaches 0.3 s
  // at the fourth sample (index 3).
  int taken = 0;
  while (!stop.done() && taken < 100) {
    stop.add(7.0, 0.1 * taken);
    ++taken;
  }
  EXPECT_EQ(taken, 4);
  EXPECT_TRUE(stop.status().converged);
}

TEST(DeviceSurvey, AbsentManagementLibrariesTakeTheFallbackAndSaySo) {
  SurveyOptions options;
  options.nvml_library = "libkvsight-no-such-nvml.so.1";
  options.rocm_smi_library = "libkvsight-no-such-rocm-smi.so";
  const DeviceSurvey survey = survey_devices(options);
  bool nvml_said = false, rsmi_said = false;
  for (const std::string& note : survey.notes) {
    nvml_said |= note.find("NVML: libkvsight-no-such-nvml.so.1 not loaded") != std::string::npos;
    rsmi_said |= note.find("ROCm SMI: libkvsight-no-such-rocm-smi.so not loaded") != std::string::npos;
  }
  EXPECT_TRUE(nvml_said);
  EXPECT_TRUE(rsmi_said);
  ASSERT_FALSE(survey.devices.empty());
  for (const DeviceRecord& d : survey.devices) {
    // No figure may claim a source that was not loaded.
    EXPECT_NE(d.sources.memory, "nvml");
    EXPECT_NE(d.sources.memory, "rocm_smi");
  }
}

TEST(DeviceSurvey, ThisMachineWithoutAGpuFallsBackToTheCpu) {
  // The real library names: on a node that has NVML or ROCm SMI this test says nothing.
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
  void* rsmi = dlopen("librocm_smi64.so", RTLD_LAZY);
  if (nvml || rsmi) {
    if (nvml) dlclose(nvml);
    if (rsmi) dlclose(rsmi);
    GTEST_SKIP() << "a management library is present here";
  }
  const DeviceSurvey survey = survey_devices();
  if (!survey.no_gpu) GTEST_SKIP() << "a GPU runtime found a device";
  EXPECT_EQ(survey.backend, "cpu");
  ASSERT_EQ(survey.devices.size(), 1u);
  const DeviceRecord& cpu = survey.devices.front();
  EXPECT_EQ(cpu.vendor, "cpu");
  EXPECT_EQ(cpu.sources.identity, "cpu");
  EXPECT_EQ(cpu.sources.memory, "cpu");
  EXPECT_GT(cpu.memory_total_bytes, 0u);
  EXPECT_LE(cpu.memory_free_bytes, cpu.memory_total_bytes);
  bool said = false;
  for (const std::string& note : survey.notes) said |= note.find("no GPU found") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace kvsight::probes

namespace kvsight::probes {
namespace {

TEST(DeviceSurvey, NvmlFiguresAndProcessesComeFromNvml) {
  SurveyOptions options;
  options.nvml_library = kvsight::probes::kFakeNvml;
  options.rocm_smi_library = "libkvsight-no-such-rocm-smi.so";
  const DeviceSurvey survey = survey_devices(options);
  ASSERT_FALSE(survey.no_gpu);
  ASSERT_GE(survey.devices.size(), 2u);
  const DeviceRecord& idle = survey.devices[0];
  const DeviceRecord& busy = survey.devices[1];
  EXPECT_EQ(idle.name, "NVIDIA H200");
  EXPECT_EQ(idle.arch, "sm_90");  // compute capability 9.0
  EXPECT_EQ(idle.driver_version, "580.65.06");
  EXPECT_EQ(idle.sources.identity.substr(0, 4), "nvml");
  EXPECT_EQ(idle.sources.memory, "nvml");
  EXPECT_EQ(idle.sources.processes, "nvml");
  EXPECT_EQ(idle.memory_total_bytes, 150754820096ull);
  EXPECT_EQ(idle.memory_used_by_others_bytes, 0u);
  // Device 1: 150,754,820,096 - 3 GiB (3,221,225,472) = 147,533,594,624 B free; of its two
  // processes the caller's own (1 GiB) is left out, the other holds 2 GiB = 2,147,483,648 B.
  EXPECT_EQ(busy.memory_free_bytes, 147533594624ull);
  ASSERT_EQ(busy.processes.size(), 1u);
  EXPECT_EQ(busy.processes[0].pid, 4242u);
  EXPECT_EQ(busy.memory_used_by_others_bytes, 2147483648ull);
}

TEST(DeviceSurvey, RocmSmiFiguresComeFromRocmSmi) {
  SurveyOptions options;
  options.nvml_library = "libkvsight-no-such-nvml.so.1";
  options.rocm_smi_library = kvsight::probes::kFakeRocmSmi;
  const DeviceSurvey survey = survey_devices(options);
  ASSERT_FALSE(survey.no_gpu);
  const DeviceRecord& d = survey.devices.front();
  EXPECT_EQ(d.vendor, "amd");
  EXPECT_EQ(d.name, "AMD Radeon RX 7900 XT");
  EXPECT_EQ(d.driver_version, "6.8.5");
  EXPECT_EQ(d.sources.memory, "rocm_smi");
  // 21,458,059,264 B of VRAM, 1 GiB = 1,073,741,824 B in use: 20,384,317,440 B free, and
  // the 1 GiB is other processes' (surveyed before kvsight opens the device).
  EXPECT_EQ(d.memory_total_bytes, 21458059264ull);
  EXPECT_EQ(d.memory_free_bytes, 20384317440ull);
  EXPECT_EQ(d.memory_used_by_others_bytes, 1073741824ull);
}

}  // namespace
}  // namespace kvsight::probes

#include "kvsight/app/preflight.hpp"

namespace kvsight::app {
namespace {

TEST(PreflightOnFakeNvml, SurveyFeedsTheVerdict) {
  // The whole use case on the stand-in NVML (no injected facts, no probes): two H200s,
  // device 1 with another process holding 2 GiB -> one WARN, memory_held_by_others.
  PreflightRequest request;
  request.model = "llama-3.1-8b";
  request.survey.nvml_library = kvsight::probes::kFakeNvml;
  request.survey.rocm_smi_library = "libkvsight-no-such-rocm-smi.so";
  request.measure = false;
  const PreflightOutcome o = run_preflight(request);
  EXPECT_FALSE(o.facts.survey.no_gpu);
  ASSERT_TRUE(o.catalog.has_value());
  EXPECT_EQ(o.catalog->id, "h200");
  ASSERT_EQ(o.reasons.size(), 1u) << o.verdict;
  EXPECT_EQ(o.reasons[0].code, "memory_held_by_others");
  EXPECT_EQ(o.reasons[0].figures["used_by_others_bytes"], 2147483648ull);
  EXPECT_EQ(o.verdict, "WARN");
  // Free now is device 0's at TP 1: all of its 150,754,820,096 B.
  EXPECT_EQ(o.facts.free_now->gpu_memory_bytes, 150754820096ull);
}

}  // namespace
}  // namespace kvsight::app
