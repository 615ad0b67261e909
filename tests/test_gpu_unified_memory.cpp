// GB10 (DGX Spark), a unified-memory device (issue #28: "vLLM's batch defaults on GB10 are 2048
// in the logs, kvsight assumes 8192/1024"; the engines count memory used outside the process).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "engine_fixtures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/gpu.hpp"

namespace kvsight {
namespace {

std::string assumption(const PlanResult& r, const std::string& name) {
  for (const Assumption& a : r.assumptions)
    if (a.name == name) return a.value;
  return "";
}

bool has_note_with(const PlanResult& r, const std::string& text) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(GpuUnifiedMemory, Gb10IsInTheCatalogUnderItsNames) {
  const GpuSpec& gb10 = find_gpu("gb10");
  EXPECT_EQ(&find_gpu("dgx-spark"), &gb10);
  EXPECT_EQ(&find_gpu("NVIDIA GB10"), &gb10);  // nvidia-smi's name
  EXPECT_TRUE(gb10.unified_memory);
  EXPECT_EQ(gb10.arch, "sm_121");
  // torch's total_memory, 121.69 GiB as vLLM prints it.
  EXPECT_EQ(gb10.memory_bytes, 130663165952ull);
  EXPECT_FALSE(find_gpu("h100-sxm").unified_memory);
}

TEST(GpuUnifiedMemory, VllmKeepsGb10OnTheSmallBatchTier) {
  // engine/arg_utils.py get_batch_defaults: >= 70 GiB and not an A100 -> 8192 / 1024 (API
  // server); GB10's 121.69 GiB would qualify, but through 0.32 NVML's memory query raises there
  // (device_memory = 0 in the except path) and 0.33+ checks is_device_capability((12, 1)):
  // 2048 / 256 as a server, 8192 / 256 offline.
  const ModelSpec m = llama31_8b();
  EngineOptions o;
  for (const std::string version : {"0.19.0", "0.33.0"}) {
    o.engine_version = version;
    o.vllm.api_server = true;
    EXPECT_EQ(assumption(make_engine("vllm")->plan(m, &find_gpu("gb10"), o), "max_num_batched_tokens / max_num_seqs"),
              "2048 / 256")
        << version;
    EXPECT_EQ(assumption(make_engine("vllm")->plan(m, &find_gpu("h100-sxm"), o),
                         "max_num_batched_tokens / max_num_seqs"),
              "8192 / 1024")
        << version;
    o.vllm.api_server = false;
    EXPECT_EQ(assumption(make_engine("vllm")->plan(m, &find_gpu("gb10"), o), "max_num_batched_tokens / max_num_seqs"),
              "8192 / 256")
        << version;
  }
}

TEST(GpuUnifiedMemory, EveryEngineSaysWhatSharedMemoryMeans) {
  const ModelSpec m = llama31_8b();
  for (const std::string engine : {"vllm", "sglang", "trtllm"}) {
    EngineOptions o;
    o.engine = engine;
    EXPECT_TRUE(has_note_with(make_engine(engine)->plan(m, &find_gpu("gb10"), o), "gb10 has unified memory"))
        << engine;
    EXPECT_FALSE(has_note_with(make_engine(engine)->plan(m, &find_gpu("h100-sxm"), o), "unified memory")) << engine;
  }
  // --gpu-mem-gib states the memory: no catalog device, no note.
  EngineOptions given;
  given.gpu_memory_bytes = 100ull << 30;
  EXPECT_FALSE(has_note_with(make_engine("vllm")->plan(m, &find_gpu("gb10"), given), "unified memory"));
}

}  // namespace
}  // namespace kvsight
