#pragma once
// The plan use case: KV footprints, weights and capacity for one model x GPU, or a
// fleet table of every (model, GPU) pair, with the engine's verdict for each.
#include <optional>
#include <string>
#include <vector>

#include "kvsight/app/verdict.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::app {

struct PlanRequest {
  std::string models;  // catalog id, HF id, path; comma list or "all"
  std::string gpus;    // catalog ids; comma list or "all"; "" = none (only KV and weights)
  EngineOptions options;
  bool decode_warnings = true;  // add the decode-cliff warning (gates + decode model)
};

struct PlanItem {
  ModelSpec model;
  std::optional<GpuSpec> gpu;
  PlanResult result;
  std::vector<StartupCheck> checks;   // the engine's start-up checks
  std::vector<std::string> refusals;  // failed checks: the engine would not start
  bool fits = true;                   // capacity (when computed) holds --batch sequences at max_model_len
  Verdict verdict = Verdict::ok;
};

struct PlanOutcome {
  std::string engine;          // canonical engine name
  std::string engine_display;  // "vLLM"
  EngineOptions options;       // as resolved
  bool fleet = false;          // more than one model or GPU: a table
  std::vector<PlanItem> items;
  Verdict verdict = Verdict::ok;  // the worst of the items
};

PlanOutcome run_plan(const PlanRequest& request);

}  // namespace kvsight::app
