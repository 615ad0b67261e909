#pragma once
// The preflight use case: everything kvsight knows about a model on THIS node, then a
// verdict. Devices found (NVML / ROCm SMI / runtime / cpu), the stream probe against
// the catalog peak, the gates, both probe kernels at the model's real shape, the
// capacity plan on the memory free now and on the catalog total, and decode time per
// token predicted with this node's own measurements. The verdict is a pure function of
// those facts (judge_preflight), so every reason is tested without a GPU.
// JSON: docs/preflight-report.md (kvsight.preflight/1); rules: docs/reference/preflight.md.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvsight/app/figures.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/probes/device_info.hpp"
#include "kvsight/probes/probes.hpp"

namespace kvsight::app {

// One step of a long run, for a progress line ("point k of N").
struct PreflightProgress {
  int step = 0, total = 0;
  std::string what;    // "bandwidth", "nosplit 8,192"
  std::string figure;  // the figure just measured, rounded ("41.3 GB/s", "123 us")
};

struct PreflightRequest {
  std::string model;
  std::string gpu;  // "" or "auto": match the device found to the catalog; an id: judge against it
  EngineOptions options;
  std::optional<std::uint64_t> concurrency;  // --concurrency N at the requested length
  std::optional<std::uint64_t> context;      // --context: the requested length (default max_model_len)
  bool full = false;                         // --full: sweep; default --quick
  std::string backend = "auto";              // auto | cuda | hip | cpu
  std::function<void(const PreflightProgress&)> progress;
  probes::SurveyOptions survey;  // library names (tests point them at absent files)
  // Tests: run on these facts instead of surveying the node (device facts injected).
  std::optional<probes::DeviceSurvey> injected_survey;
  bool measure = true;  // false: plan and judge only, no probes (tests)
};

struct PreflightReason {
  std::string code;      // model_does_not_fit, concurrency_does_not_fit, engine_refuses_start, ...
  std::string severity;  // FAIL | WARN
  std::string message;   // with the figures
  nlohmann::json figures = nlohmann::json::object();
};

struct BandwidthFacts {
  double measured_bytes_per_s = 0;
  std::optional<double> catalog_peak_bytes_per_s;  // none for an unknown device or the CPU
  double noise = 0;
  bool converged = false;
  int samples = 0;
};

struct ProbeFacts {
  std::string kernel;        // engine_path | split_path
  std::string probe_kernel;  // nosplit | splitkv: the probe kernel that stands for it
  bool split = false;
  std::uint64_t context = 0;
  probes::AttentionShape shape;
  bool measured = false;  // false: it failed; see error
  double time_us = 0, gbps = 0, noise = 0;
  bool converged = false;
  int samples = 0;
  std::uint32_t splits = 1;
  bool reference_ok = true;
  double max_error = 0;
  std::string error;  // the device's message when the reference check failed
};

struct CapacityFacts {
  std::uint64_t gpu_memory_bytes = 0;
  Capacity capacity;
};

struct DecodeFacts {
  std::uint64_t context = 0;
  DecodePoint engine_path, split;
  bool measured = false;  // a probe measured this context on this node
  // The step built from the measured kernel times: the prediction with the primary
  // layers' predicted call replaced by the probe's measured one (ms per token).
  std::optional<double> measured_engine_ms, measured_split_ms;
};

// Everything judge_preflight reads, measured or planned. Built by run_preflight, or
// by a test by hand.
struct PreflightFacts {
  probes::DeviceSurvey survey;
  std::string engine;  // canonical name
  std::string kernel;  // the engine's selected attention path
  bool splits_context = false;
  std::vector<std::string> refusals;  // engine start-up refusals (constraints, gates)
  std::uint64_t max_model_len = 0;    // the length capacity is computed at
  std::optional<std::uint64_t> requested_concurrency;
  std::optional<CapacityFacts> free_now, catalog_total;
  // vLLM refuses to start when free memory < total x gpu_memory_utilization
  // (docs/reference/formulas.md "vLLM V1 budget", step 1): the requested bytes.
  std::optional<std::uint64_t> engine_requested_bytes;
  std::optional<BandwidthFacts> bandwidth;
  std::vector<ProbeFacts> probes;
  std::vector<DecodeFacts> decode;
};

// The verdict rules' thresholds, each with its source (docs/reference/preflight.md).
struct PreflightRules {
  double bandwidth_ratio_floor = 0.8;  // issue #10: WARN below 80% of the catalog peak
  // The same bound as `plan`'s decode-cliff warning (kvsight/decode_model.hpp
  // decode_cliff_warning: "more than 1.5x slower" at 32K than at 1K).
  double cliff_growth_limit = 1.5;
  std::uint64_t cliff_short_context = 1024, cliff_long_context = 32768;
};

// Every reason, worst first (FAIL before WARN, then in rule order). Pure.
std::vector<PreflightReason> judge_preflight(const PreflightFacts& facts, const PreflightRules& rules = {});
// PASS | WARN | FAIL
std::string verdict_of(const std::vector<PreflightReason>& reasons);
// 0 PASS; 1 when the verdict is at or above fail_on (warn | fail); else 0.
int preflight_exit_code(const std::string& verdict, const std::string& fail_on);

struct PreflightOutcome {
  std::string mode;  // quick | full
  std::string host, generated_at;
  ModelSpec model;
  EngineOptions options;  // as resolved
  std::string engine_version;
  std::uint32_t block_size = 0;
  std::optional<GpuSpec> catalog;  // the matched (or --gpu) catalog entry; none: unknown device
  std::string catalog_match;       // how it was matched ("name and memory", "--gpu", "none")
  GpuSpec device_spec;             // what the gates and the decode model were given
  probes::AttentionShape shape;    // the probe shape (context per point)
  PreflightFacts facts;
  std::optional<probes::BandwidthResult> bandwidth;
  std::vector<std::uint64_t> contexts;  // probe and decode contexts
  std::string calibration_source;
  std::vector<PreflightReason> reasons;
  std::string verdict;
  std::vector<std::string> notes;
};

PreflightOutcome run_preflight(const PreflightRequest& request);

// The catalog entry a device is, matched by its model token (the first word with a
// digit: "H200", "A100", "MI300X", "7900") and arch, the nearest memory total among
// several; nullptr when none matches.
const GpuSpec* match_catalog(const probes::DeviceRecord& device);

// The report as docs/preflight-report.md fixes it (kvsight.preflight/1).
nlohmann::json preflight_json(const PreflightOutcome& outcome, int exit_code);

// The outcome as figures (app/src/preflight_figures.cpp): the readable report and tables,
// and preflight_json as the JSON.
FigureDoc preflight_figures(const PreflightOutcome& outcome, int exit_code);

}  // namespace kvsight::app
