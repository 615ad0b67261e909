#pragma once
// The gates use case: which attention kernel the engine selects for a model on a
// device, why the others are refused, and the start-up constraints.
#include <string>

#include "kvsight/app/figures.hpp"
#include "kvsight/app/verdict.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::app {

struct GatesRequest {
  std::string model;
  std::string gpu;
  EngineOptions options;
};

struct GatesOutcome {
  ModelSpec model;
  GpuSpec gpu;
  EngineOptions options;  // as resolved (canonical engine name)
  GateResult gates;
  Verdict verdict = Verdict::ok;  // check_failed when a constraint refuses start-up
};

GatesOutcome run_gates(const GatesRequest& request);

// The outcome as figures (app/src/gates_figures.cpp): the selected kernel per layer group,
// the constraints, and the primary group's candidates in the engine's priority order.
FigureDoc gates_figures(const GatesOutcome& outcome);

}  // namespace kvsight::app
