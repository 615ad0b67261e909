#pragma once
// The explain use case: an engine start-up log (vLLM, SGLang, TensorRT-LLM, llama.cpp)
// reconciled term by term with kvsight's own plan for the same inputs. The log is read
// with read_engine_log (kvsight/engine_log.hpp); what the log states (engine, max_model_len,
// utilization, GPU total, cells) becomes an input unless the user gave it; the plan use
// case is rerun twice: with the KV memory the log states (the arithmetic after the budget)
// and with nothing but the GPU and the flags (the budget itself).
#include <optional>
#include <string>
#include <vector>

#include "kvsight/app/plan.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_log.hpp"

namespace kvsight::app {

struct ExplainRequest {
  std::string log_text;       // the log's content
  std::string log_name;       // the path as given, for messages
  std::string model;          // --model (required: a log names its model in no form kvsight reads)
  std::string gpu;            // --gpu, optional
  EngineOptions options;      // the user's flags
  bool engine_given = false;  // --engine typed: otherwise the engine is the log's
};

// One figure, logged against kvsight.
struct ExplainTerm {
  std::string name;    // "weights", "available KV cache memory", "KV tokens", ...
  std::string replay;  // "GPU and flags" or "given KV memory"
  std::string unit;    // "GiB", "tokens", "blocks", "x"
  std::optional<double> logged;
  std::optional<double> kvsight;
  std::string rule;      // the rule (and its source) behind kvsight's figure
  bool implied = false;  // the logged side is derived from other logged figures, not printed
  std::optional<double> difference() const {
    if (!logged || !kvsight) return std::nullopt;
    return *kvsight - *logged;
  }
  std::optional<double> relative() const {
    if (!logged || !kvsight || *logged == 0.0) return std::nullopt;
    return (*kvsight - *logged) / *logged;
  }
};

struct ExplainOutcome {
  EngineLogFigures figures;
  std::string engine;                        // canonical engine the replays used
  std::string engine_version;                // as resolved by the engine
  std::vector<std::string> inputs_from_log;  // "max_model_len 20000 (Maximum concurrency line)"
  std::optional<PlanItem> given_memory;      // replay with the logged KV memory
  std::optional<PlanItem> gpu_only;          // replay with GPU and flags only
  std::vector<ExplainTerm> terms;
  std::optional<std::size_t> largest;  // index into terms of the largest differing term
  std::string largest_summary;         // one line naming it, or why none could be named
  std::vector<std::string> notes;
};

// Throws InputError("--log", ...) when no known line is in the log, InputError("--model",
// ...) without a model, and whatever the plan use case throws for bad flags.
ExplainOutcome run_explain(const ExplainRequest& request);

// The outcome as figures (app/src/explain_figures.cpp): one row per term and replay.
FigureDoc explain_figures(const ExplainRequest& request, const ExplainOutcome& outcome);

}  // namespace kvsight::app
