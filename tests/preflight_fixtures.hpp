#pragma once
// Preflight scenarios without a GPU (test_preflight_verdict.cpp, test_preflight_fixes.cpp):
// device records as NVML would report them, a survey of them, and preflight run on that survey
// with no probes (PreflightRequest::injected_survey, measure = false).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvsight/app/preflight.hpp"

namespace kvsight::app::preflight_fixtures {

constexpr std::uint64_t kGiB = 1ull << 30;
// planner/data/gpus.json h200: the runtime total vLLM budgets from.
constexpr std::uint64_t kH200Total = 150023962624ull;

inline probes::DeviceRecord gpu(int index, const std::string& name, const std::string& arch, std::uint64_t total,
                                std::uint64_t free) {
  probes::DeviceRecord d;
  d.index = index;
  d.vendor = arch.rfind("sm_", 0) == 0 ? "nvidia" : "amd";
  d.name = name;
  d.arch = arch;
  d.memory_total_bytes = total;
  d.memory_free_bytes = free;
  d.memory_used_by_others_bytes = 0;
  d.sources = {"nvml", "nvml", "nvml"};
  return d;
}

// No devices: run_preflight puts the CPU in (no_gpu).
inline probes::DeviceSurvey survey_of(std::vector<probes::DeviceRecord> devices) {
  probes::DeviceSurvey s;
  s.backend = devices.empty() ? "cpu" : "cuda";
  s.devices = std::move(devices);
  s.no_gpu = false;
  return s;
}

inline PreflightOutcome plan_only(const std::string& model, probes::DeviceSurvey survey, EngineOptions options = {},
                                  std::optional<std::uint64_t> concurrency = std::nullopt, std::string gpu_flag = "") {
  PreflightRequest request;
  request.model = model;
  request.gpu = std::move(gpu_flag);
  request.options = std::move(options);
  request.concurrency = concurrency;
  request.injected_survey = std::move(survey);
  request.measure = false;
  return run_preflight(request);
}

// The vLLM #50264 case (docs/reference/cliff.md): Qwen3.6-27B, TP 2 on two RX 7900 XT (gfx1100).
inline PreflightOutcome vllm_50264_case(const std::string& engine_version = "") {
  EngineOptions options;
  options.tp = 2;
  options.engine_version = engine_version;
  const std::uint64_t total = 21458059264ull;  // gpus.json rx7900xt
  return plan_only("qwen3.6-27b",
                   survey_of({gpu(0, "AMD Radeon RX 7900 XT", "gfx1100", total, total),
                              gpu(1, "AMD Radeon RX 7900 XT", "gfx1100", total, total)}),
                   options);
}

}  // namespace kvsight::app::preflight_fixtures
