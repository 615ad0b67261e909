// vLLM --kv-transfer-config / --kv-transfer-gib: a connector's GPU buffers are a stated
// reservation subtracted before the KV cache (vllm.cpp memory_budget); vLLM does not size them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kvsight/budget.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight {
namespace {

constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;

TEST(VllmKvTransfer, StatedReservationComesOffTheKvMemory) {
  const ModelSpec m = resolve_model("llama-3.1-8b");
  const GpuSpec& gpu = find_gpu("h100-sxm");
  EngineOptions o;
  o.engine_version = "0.33.0";
  o.max_model_len = 8192;
  const PlanResult plain = make_engine("vllm")->plan(m, &gpu, o);
  set_option(o, OptionField::kv_transfer_config,
             R"({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})");
  EXPECT_EQ(o.vllm.kv_connector, "LMCacheConnectorV1");
  const PlanResult named = make_engine("vllm")->plan(m, &gpu, o);
  // Named but not stated: nothing subtracted, and a warning says so.
  EXPECT_EQ(named.capacity->available_kv_bytes, plain.capacity->available_kv_bytes);
  EXPECT_TRUE(std::any_of(named.warnings.begin(), named.warnings.end(), [](const std::string& w) {
    return w.find("LMCacheConnectorV1") != std::string::npos &&
           w.find("--kv-transfer-gib") != std::string::npos;
  }));
  // 1.5 GiB stated: exactly 1,610,612,736 B less for the KV cache.
  o.overheads.kv_transfer_gib = 1.5;
  const PlanResult stated = make_engine("vllm")->plan(m, &gpu, o);
  EXPECT_EQ(plain.capacity->available_kv_bytes - stated.capacity->available_kv_bytes, 3 * kGiB / 2);
}

TEST(VllmKvTransfer, ConfigWithoutAConnectorIsRefused) {
  EngineOptions o;
  for (const char* bad : {"{}", R"({"kv_connector": ""})", R"({"kv_connector": 3})", "[1]", "{"}) {
    SCOPED_TRACE(bad);
    try {
      set_option(o, OptionField::kv_transfer_config, bad);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.field()).rfind("kv_transfer_config", 0), 0u) << e.field();
    }
  }
}

}  // namespace
}  // namespace kvsight
