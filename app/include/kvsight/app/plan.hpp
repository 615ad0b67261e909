#pragma once
// The plan use case: KV footprints, weights and capacity for one model x GPU, or a
// fleet table of every (model, GPU) pair, with the engine's verdict for each.
#include <optional>
#include <string>
#include <vector>

#include "kvsight/app/engine_setup.hpp"
#include "kvsight/app/figures.hpp"
#include "kvsight/app/verdict.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_decision.hpp"
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
  EngineDecision decision;  // the engine's decision (checks, refusals, kernels on the GPU)
  PlanResult result;
  bool fits = true;  // capacity (when computed) holds --batch sequences at max_model_len
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

// The outcome as figures (app/src/plan_figures.cpp): one pair as sections, a fleet as a
// table of pairs.
FigureDoc plan_figures(const PlanOutcome& outcome);

// One model on one GPU (or none) under an engine already set up: what run_plan computes
// for each pair. fit (app/src/fit.cpp) calls it once per candidate configuration.
PlanItem plan_item(const EngineSetup& setup, const ModelSpec& model, const GpuSpec* gpu,
                   bool decode_warnings);

}  // namespace kvsight::app
