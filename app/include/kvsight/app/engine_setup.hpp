#pragma once
// Resolving the engine a request names and the option checks every use case shares (the
// engine's KV cache types, the draft model of --speculative-config). The engine's
// decision for a model and device is kvsight/engine_decision.hpp decide().
#include <memory>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model.hpp"

namespace kvsight::app {

struct EngineSetup {
  std::unique_ptr<Engine> engine;
  EngineOptions options;  // options.engine is the canonical name ("llama.cpp" -> "llamacpp")
};

// Resolves options.engine (name or alias; InputError("--engine", ...) listing them) and
// refuses KV cache types the engine does not offer (InputError naming the field).
EngineSetup setup_engine(EngineOptions options);

}  // namespace kvsight::app
