// The engine decision (kvsight/engine_decision.hpp): each part asked of the engine once,
// in the order the engine itself settles them at start-up (version and config, KV cache
// type, block size, max_model_len, weights, start-up checks, attention backend).
#include <algorithm>

#include "common.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/error.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight {

KvQualityTier kv_quality_tier(const KvTypes& types) {
  const std::uint32_t bits = std::min(types.k.element_bits, types.v.element_bits);
  if (bits >= 16) return KvQualityTier::full;
  if (bits >= 8) return KvQualityTier::eight_bit;
  return KvQualityTier::low_bit;
}

std::string kv_quality_tier_name(KvQualityTier tier) {
  switch (tier) {
    case KvQualityTier::full:
      return "full";
    case KvQualityTier::eight_bit:
      return "8-bit";
    case KvQualityTier::low_bit:
      return "low-bit";
  }
  return "";
}

KvTypes Engine::kv_types(const ModelSpec& model, const EngineOptions& options) const {
  return resolve_kv_types(model, kv_cache_type_settings(options).front().value);
}

LengthChoice Engine::max_model_len(const ModelSpec& model, const EngineOptions& options) const {
  LengthChoice length;
  length.derived = derived_max_model_len(model);
  if (options.max_model_len && *options.max_model_len > 0) {
    length.tokens = static_cast<std::uint64_t>(*options.max_model_len);
    length.source = "given";
  } else {
    length.tokens = length.derived;
    length.source = "the model's maximum (derived from its config)";
  }
  return length;
}

namespace {

WeightsEstimate decide_weights(const Engine& engine, const ModelSpec& model, const EngineOptions& options,
                               Assumption& assumption) {
  EngineOptions sharding = options;
  if (!engine.shards_weights()) sharding.tp = sharding.pp = 1;
  return engine_detail::weights_for(model, sharding, assumption);
}

void add_refusal(EngineDecision& decision, const StartupCheck& check) {
  if (check.ok) return;
  const std::string refusal = check.name + ": " + check.detail;
  if (std::find(decision.refusals.begin(), decision.refusals.end(), refusal) == decision.refusals.end())
    decision.refusals.push_back(refusal);
}

}  // namespace

EngineDecision decide(const Engine& engine, const ModelSpec& model, const GpuSpec* gpu,
                      const EngineOptions& options) {
  EngineDecision d;
  d.engine = engine.name();
  d.engine_display = engine.display_name();
  d.version = engine.version(options);
  d.version_given = !options.engine_version.empty();
  d.kv_settings = engine.kv_cache_type_settings(options);
  d.kv_types = engine.kv_types(model, options);
  d.kv_tier = kv_quality_tier(d.kv_types);
  d.block = engine.block_size(model, gpu, options);
  d.length = engine.max_model_len(model, options);
  d.weights = decide_weights(engine, model, options, d.weights_assumption);
  d.checks = engine.startup_checks(model, gpu, options);
  if (gpu != nullptr && engine.has_gate_rules() && model.attention_layer_count() > 0) {
    // The gates add the kernel-dependent checks to the engine's own (GateResult::constraints
    // holds them all, in that order).
    d.gates = select_kernels(engine, model, *gpu, options, d);
    d.checks = d.gates->constraints;
  }
  for (const StartupCheck& check : d.checks) add_refusal(d, check);
  return d;
}

EngineDecision decide_with_gates(const Engine& engine, const ModelSpec& model, const GpuSpec& gpu,
                                 const EngineOptions& options) {
  if (!engine.has_gate_rules()) {
    std::string allowed;
    for (const std::string& name : gate_engines()) allowed += (allowed.empty() ? "" : ", ") + name;
    throw InputError("--engine", "'" + engine.name() + "' has no gate rules; allowed: " + allowed);
  }
  if (model.attention_layer_count() == 0)
    throw InputError("--model",
                     "'" + model.id + "' has no attention layers; gates apply to attention layers only");
  return decide(engine, model, &gpu, options);
}

PlanResult Engine::plan(const ModelSpec& model, const GpuSpec* gpu, const EngineOptions& options) const {
  const EngineDecision decision = decide(*this, model, gpu, options);
  PlanResult result = budget(decision, model, gpu, options);
  if (gpu != nullptr && !options.gpu_memory_bytes)
    if (auto note = unified_memory_note(*gpu)) result.notes.push_back(*note);
  return result;
}

std::optional<std::string> unified_memory_note(const GpuSpec& gpu) {
  // The runtime's total is the machine's one pool, and what the OS and the page cache hold is
  // "used" to every engine (torch.cuda.mem_get_info reads MemFree there; vllm-project/vllm
  // #48140). The plan's budget is the total's; the node's free memory decides.
  if (!gpu.unified_memory) return std::nullopt;
  return gpu.id + " has unified memory: the OS and the page cache share its " +
         fixed_text(static_cast<double>(gpu.memory_bytes) / (1024.0 * 1024.0 * 1024.0), 2) +
         " GiB, so an engine that sizes from free memory (SGLang, TensorRT-LLM, vLLM 0.34's extensible "
         "cache) gets less, and vLLM refuses to start when free memory < utilization x total; run "
         "`kvsight preflight` on the node (it plans on the memory free there)";
}

}  // namespace kvsight
