// The gates use case (kvsight/app/gates.hpp).
#include "kvsight/app/gates.hpp"

#include "kvsight/app/engine_setup.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/error.hpp"

namespace kvsight::app {

GatesOutcome run_gates(const GatesRequest& request) {
  EngineSetup setup = setup_engine(request.options);
  GatesOutcome outcome;
  outcome.model = resolve_model(request.model);
  outcome.gpu = find_gpu(request.gpu);
  outcome.options = setup.options;
  outcome.gates = *decide_with_gates(*setup.engine, outcome.model, outcome.gpu, setup.options).gates;
  outcome.verdict = outcome.gates.errors.empty() ? Verdict::ok : Verdict::check_failed;
  return outcome;
}

}  // namespace kvsight::app
