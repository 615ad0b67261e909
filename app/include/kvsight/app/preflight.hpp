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
#include "kvsight/gates.hpp"
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

// A change that clears a reason (issue #23 item 2), computed by the planner on the same
// engine rules as the verdict (app/src/preflight_fixes.cpp): an engine flag spelled as the
// engine spells it, ready to paste, or an action where no flag clears it (a device fault, a
// busy host). Rules: docs/reference/preflight.md "Fixes".
struct PreflightFix {
  // max_model_len | max_num_seqs | kv_cache_dtype | parallelism | memory_fraction |
  // free_memory | attention_backend | target_gpu | action
  std::string kind;
  std::string flag;  // "--max-model-len 49152"; "" for an action
  std::string text;  // what it gives, with the figures: "the largest length that fits: ..."
  nlohmann::json figures = nlohmann::json::object();
};

struct PreflightReason {
  std::string code;      // model_does_not_fit, concurrency_does_not_fit, engine_refuses_start, ...
  std::string severity;  // FAIL | WARN
  std::string message;   // with the figures
  nlohmann::json figures = nlohmann::json::object();
  std::vector<PreflightFix> fixes;  // attach_fixes; judge_preflight leaves it empty
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
  std::uint64_t bytes_per_sequence = 0;  // KV of one sequence at max_model_len (the plan's)
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
  // The catalog GPU capacity is judged for when the node has no GPU (survey.no_gpu): --gpu,
  // else the stated default (issue #23 item 1); "" on a GPU node.
  std::string target_gpu;
  // The capacity the verdict judges: the memory free now on a GPU node; with no GPU, the
  // target GPU's catalog total (the CPU's memory says nothing of a GPU's).
  const std::optional<CapacityFacts>& judged_capacity() const { return survey.no_gpu ? catalog_total : free_now; }
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
  // WARN when the decode step predicted from this node's calibration and the step built
  // from the same node's measured kernel time differ by more than this share of the
  // measured step (issue #23 item 4; docs/reference/preflight.md "Verdict rules": each
  // figure's noise is bounded by the stopping rule at 0.5 % on a GPU, 3 % on the cpu, so a
  // gap of 25 % is the model, not the noise).
  double prediction_gap_limit = 0.25;
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

// What the fixes are computed on: the engine, model and options of the run, and the device
// the capacity was judged on (its memory_bytes the memory judged: free now, or the target
// GPU's catalog total with no GPU).
struct FixInputs {
  const Engine* engine = nullptr;
  ModelSpec model;
  EngineOptions options;
  GpuSpec device;
  std::uint32_t gpus_on_node = 1;        // the most GPUs a TP x PP fix may use (8 with no GPU: one node)
  std::uint64_t device_total_bytes = 0;  // the device's own total (0 with no GPU)
  std::uint64_t free_bytes = 0;          // free now (0 with no GPU)
};

// Attaches to each reason the changes that clear it (app/src/preflight_fixes.cpp). gates:
// the decision's kernel selection (the decode cliff's fix looks for a kernel that splits).
void attach_fixes(std::vector<PreflightReason>& reasons, const PreflightFacts& facts, const FixInputs& inputs,
                  const GateResult* gates);

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
