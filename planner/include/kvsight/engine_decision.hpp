#pragma once
// The engine decision (issue #27): for one (model, device, engine, version, options) the
// engine decides, once, everything the commands report: the version it runs, the KV cache
// types, the block size, the effective max_model_len, the weights, its start-up refusals and,
// on a device, the attention kernel per layer group. plan, gates, fit, preflight, cliff and
// explain all read this one value; none re-derives a part of it (docs/architecture.md lists
// the one call site of each part). vLLM works the same way: one KVCacheConfig and one
// attention-backend selection per worker feed memory, support checks and running
// (vllm/v1/core/kv_cache_utils.py, vllm/v1/attention/selector.py).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model_spec.hpp"
#include "kvsight/weights.hpp"

namespace kvsight {

// How lossy a KV cache type is, for ranking what a user would deploy (fit): the model's
// own precision first, then 8-bit, then fewer bits. Decided by the dtype table's element
// bits (kvsight/dtype.hpp), not by the name the engine gives the type.
enum class KvQualityTier { full = 0, eight_bit = 1, low_bit = 2 };
KvQualityTier kv_quality_tier(const KvTypes& types);
// "full", "8-bit", "4-bit" (the tier's word for tables and JSON).
std::string kv_quality_tier_name(KvQualityTier tier);

struct EngineDecision {
  std::string engine;          // canonical name ("llamacpp")
  std::string engine_display;  // "llama.cpp"
  EngineVersion version;       // the version planned for (the engine's default when not given)
  bool version_given = false;  // --engine-version was given
  // The KV cache type option(s) as the user spelled them (Engine::kv_cache_type_settings),
  // and what they store (K and V).
  std::vector<KvTypeSetting> kv_settings;
  KvTypes kv_types;
  KvQualityTier kv_tier = KvQualityTier::full;
  BlockSizeChoice block;    // validated by the engine (InputError for a size it refuses)
  LengthChoice length;      // the effective max_model_len and where it comes from
  WeightsEstimate weights;  // per the engine's sharding; --weights-gib when given
  Assumption weights_assumption;
  // Every start-up check: the engine's own (TP divides heads, vendor, length), then, on a
  // device with gate rules, the kernel-dependent ones (a kernel admits each layer group,
  // the KV cache type runs on this device, llama.cpp's quantized V needs FlashAttention).
  std::vector<StartupCheck> checks;
  std::vector<std::string> refusals;  // "name: detail" of each failed check, once each
  // The attention kernel per layer group on this device; absent without a device, for an
  // engine without gate rules (exllama) or a model with no attention layers.
  std::optional<GateResult> gates;
  bool refused() const { return !refusals.empty(); }
};

// The one place an engine decision is made. gpu may be null (no device: no gates, no
// device-dependent checks). Throws InputError for bad input (a block size or KV type the
// engine does not have, an unknown version).
EngineDecision decide(const Engine& engine, const ModelSpec& model, const GpuSpec* gpu,
                      const EngineOptions& options);

// decide() on a device where the commands need the kernels (gates, cliff, preflight).
// Throws InputError naming --engine for an engine without gate rules, or --model for a
// model with no attention layers.
EngineDecision decide_with_gates(const Engine& engine, const ModelSpec& model, const GpuSpec& gpu,
                                 const EngineOptions& options);

}  // namespace kvsight
