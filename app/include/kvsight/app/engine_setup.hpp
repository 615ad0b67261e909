#pragma once
// Resolving the engine a request names and applying the checks every use case shares:
// the engine's KV cache types, its block size rule and its start-up constraints (TP
// divides heads, ...). One implementation, so plan, gates, cliff and preflight give the
// same answer for the same flags.
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

// The engine's start-up checks for this model; the failed ones are its refusals. Also
// applies the engine's block-size rule (InputError for a size it refuses).
std::vector<StartupCheck> startup_checks(const EngineSetup& setup, const ModelSpec& model,
                                         const GpuSpec* gpu);

// "name: detail" of each failed check.
std::vector<std::string> refusals(const std::vector<StartupCheck>& checks);

}  // namespace kvsight::app
