#pragma once
// Attention-kernel gates: which attention implementation an engine selects for a
// model's attention layers on a device family, why every other candidate is
// refused, and the hard constraints that stop the engine from starting at all.
// The rules are data tables (planner/src/gates/gates_rules.cpp), each recording the
// engine file and version it was read from (docs/reference/gates.md).
#include <cstdint>
#include <string>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model_spec.hpp"

namespace kvsight {

// The facts a gate looks at, for one group of identical attention layers on one rank.
struct GateInput {
  std::string engine = "vllm";
  std::string engine_version;            // "" = the newest the rules know
  std::string family;                    // GpuSpec::family: cuda, gfx9, gfx10, gfx11, gfx12
  std::string arch;                      // sm_90, gfx1100 ...
  std::uint32_t compute_capability = 0;  // CUDA: 10 x major + minor (sm_90 -> 90); 0 on AMD
  std::string q_dtype = "bf16";          // query/activation dtype: bf16, fp16, fp32
  std::string kv_cache_dtype = "auto";   // as the user gave it
  std::uint32_t head_size = 0;           // K head dim (vLLM head_size)
  std::uint32_t head_size_v = 0;         // V head dim
  std::uint32_t block_size = 16;         // the block size the engine really uses
  std::uint32_t q_heads_per_rank = 0;
  std::uint32_t kv_heads_per_rank = 0;
  std::uint32_t gqa_ratio = 0;       // q_heads_per_rank / kv_heads_per_rank
  std::uint64_t max_seq_len = 0;     // max_model_len
  std::uint64_t sliding_window = 0;  // 0 = none
  std::uint64_t batch = 1;           // sequences decoding together
  bool alibi = false;
  bool sinks = false;
  bool padded_layout = false;  // stride-padded hybrid KV layout
  bool mla = false;
};

// One candidate implementation and the verdict on it.
struct KernelVerdict {
  std::string kernel;     // stable id, e.g. "rocm_custom_paged_attention"
  std::string name;       // what the engine calls it
  std::string backend;    // vLLM backend name (ROCM_ATTN, TRITON_ATTN, FLASH_ATTN, ...)
  bool admitted = false;  // every condition holds
  bool selected = false;
  bool splits_context = false;       // whether decode at this shape splits the context across programs
  std::string split_rule;            // why it does or does not split
  std::vector<std::string> reasons;  // every failed condition, naming condition and value
  std::string source;                // engine file, version, PR/issue the rule was read from
};

// One group of identical attention layers and what it runs.
struct LayerGroupGate {
  std::string kind;  // full_attention, sliding_window, chunked_local, mla
  LayerKind layer_kind = LayerKind::full_attention;
  std::uint32_t layer_count = 0;
  std::uint32_t head_size = 0;
  std::uint32_t kv_heads_per_rank = 0;
  std::uint32_t q_heads_per_rank = 0;
  std::uint64_t window = 0;
  std::string selected;  // kernel id
  std::string selected_name;
  bool splits_context = false;
  std::vector<KernelVerdict> kernels;  // every candidate, priority order
  // When no kernel is admitted because of the KV cache type: the engine's refusal of that
  // type on this device (what its backends accept there); "" otherwise.
  std::string kv_type_refusal;
};

// A start-up constraint as the gates report it: the engine's own checks and the
// kernel-dependent ones ("tp divides attention heads", "an attention kernel admits ...").
using GateConstraint = StartupCheck;

struct GateResult {
  std::string engine;
  std::string engine_version;  // as evaluated ("newest known: X" when not given)
  std::string family;
  std::uint32_t block_size = 0;
  std::string block_size_source;
  std::uint32_t tp = 1;
  std::uint64_t max_seq_len = 0;
  // The group with the most attention layers (full attention preferred): what the
  // cliff and the decode model follow.
  LayerGroupGate primary;
  std::vector<LayerGroupGate> groups;
  std::vector<GateConstraint> constraints;
  std::vector<std::string> errors;  // hard constraints that refuse start-up
  std::vector<std::string> notes;
};

// Engines the gates know.
std::vector<std::string> gate_engines();

// Evaluates the candidates of input.engine on input.family for one layer group.
// Returns them in the engine's priority order, the first admitted one selected.
std::vector<KernelVerdict> evaluate_kernels(const GateInput& input);

// The kernel selection of an engine decision (kvsight/engine_decision.hpp decide() is the
// one caller): per attention-layer group, from the decision's block size, length and KV
// cache type; constraints = the decision's start-up checks, then the kernel-dependent ones.
GateResult select_kernels(const Engine& engine, const ModelSpec& model, const GpuSpec& gpu,
                          const EngineOptions& options, const EngineDecision& decision);

// The gates of the engine decision for this model on this device (decide()). Throws
// InputError for an unknown engine, one without gate rules, or a model with no attention
// layers.
GateResult evaluate_gates(const ModelSpec& model, const GpuSpec& gpu, const EngineOptions& options);

// "0.23.1" -> comparable number (major x 1e6 + minor x 1e3 + patch; "b6000" -> 6000,
// EngineVersion::ordinal); "" -> the newest known. Either form of
// kvsight/engine_version.hpp; throws InputError("--engine-version", ...) naming both.
std::uint64_t parse_engine_version(const std::string& text);

}  // namespace kvsight
