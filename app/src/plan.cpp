// The plan use case (kvsight/app/plan.hpp).
#include "kvsight/app/plan.hpp"

#include <algorithm>

#include "kvsight/app/engine_setup.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/error.hpp"

namespace kvsight::app {

namespace {

void add_cliff_warning(const ModelSpec& model, const GpuSpec& gpu, const EngineOptions& options,
                       const EngineDecision& decision, PlanResult& result) {
  try {
    if (auto warning = decode_cliff_warning(model, gpu, options, decision))
      result.warnings.push_back(*warning);
  } catch (const InputError&) {
    // A model the gates cannot judge (e.g. no attention layers) gets no warning.
  }
}

}  // namespace

PlanItem plan_item(const EngineSetup& setup, const ModelSpec& model, const GpuSpec* gpu, bool warnings) {
  PlanItem item;
  item.model = model;
  if (gpu) item.gpu = *gpu;
  item.decision = decide(*setup.engine, model, gpu, setup.options);
  item.result = setup.engine->budget(item.decision, model, gpu, setup.options);
  if (gpu && !setup.options.gpu_memory_bytes)
    if (auto note = unified_memory_note(*gpu)) item.result.notes.push_back(*note);
  // What the config reader had to assume belongs next to the figures it affects.
  item.result.notes.insert(item.result.notes.begin(), model.notes.begin(), model.notes.end());
  std::vector<std::string> refused;
  for (const std::string& refusal : item.decision.refusals)
    refused.push_back(setup.engine->display_name() + " would refuse to start: " + refusal);
  item.result.warnings.insert(item.result.warnings.begin(), refused.begin(), refused.end());
  // The decode-cliff check repeats a refusal as its own warning; one is enough.
  if (warnings && gpu && !item.decision.refused())
    add_cliff_warning(model, *gpu, setup.options, item.decision, item.result);
  if (item.result.capacity) {
    const Capacity& c = *item.result.capacity;
    item.fits = c.fits && c.max_concurrency + 1e-9 >= static_cast<double>(setup.options.batch);
    if (c.fits && !item.fits)
      item.result.warnings.push_back("--batch " + std::to_string(setup.options.batch) + " sequences at " +
                                     std::to_string(c.max_model_len) +
                                     " tokens do not fit: max concurrency " +
                                     std::to_string(c.max_concurrency));
  }
  item.verdict = (!item.decision.refused() && item.fits) ? Verdict::ok : Verdict::check_failed;
  return item;
}

PlanOutcome run_plan(const PlanRequest& request) {
  EngineSetup setup = setup_engine(request.options);
  if (!request.gpus.empty() && setup.options.gpu_memory_bytes)
    throw InputError("--gpu-mem-gib", "give either --gpu or --gpu-mem-gib, not both");
  const std::vector<std::string> models = expand_model_list(request.models);
  std::vector<std::string> gpus;
  if (!request.gpus.empty()) gpus = expand_gpu_list(request.gpus);

  PlanOutcome outcome;
  outcome.engine = setup.engine->name();
  outcome.engine_display = setup.engine->display_name();
  outcome.options = setup.options;
  outcome.fleet = models.size() > 1 || gpus.size() > 1;
  for (const std::string& model_id : models) {
    const ModelSpec model = resolve_model(model_id);
    if (gpus.empty()) {
      outcome.items.push_back(plan_item(setup, model, nullptr, request.decode_warnings));
    } else {
      for (const std::string& gpu_id : gpus) {
        // Fleet rows skip the decode-cliff check (it costs a gates evaluation per pair).
        outcome.items.push_back(
            plan_item(setup, model, &find_gpu(gpu_id), request.decode_warnings && !outcome.fleet));
      }
    }
  }
  for (const PlanItem& item : outcome.items) outcome.verdict = worst(outcome.verdict, item.verdict);
  return outcome;
}

}  // namespace kvsight::app
