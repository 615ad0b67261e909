#pragma once
// The cliff use case: decode time versus context for the attention path the engine
// selects and a split-KV path, for a published scenario (vllm-50264) or any model and
// GPU, optionally with both probe kernels measured at the model's real shape.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvsight/app/figures.hpp"
#include "kvsight/app/verdict.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/decode_model.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/probes/probes.hpp"

namespace kvsight::app {

struct CliffRequest {
  std::string scenario;  // "vllm-50264", or "" with model and gpu
  std::string model;
  std::string gpu;
  EngineOptions options;
  std::vector<std::uint64_t> contexts;          // empty: the scenario's published ones, or 1K..32K
  std::optional<double> baseline_ms;            // measured non-attention time per step
  std::string calibration_path;                 // `probe sweep --format json` file
  std::string backend;                          // "" = no measurement; cpu, cuda, hip
  std::vector<std::uint64_t> measure_contexts;  // empty: defaults per backend
  int repeats = 5;
  std::function<void(const std::string&)> progress;  // probe progress lines
};

// Both probe kernels measured at the model's shape.
struct CliffMeasurement {
  std::string backend, device;
  std::vector<probes::SweepResult> sweeps;  // nosplit, splitkv
};

struct CliffOutcome {
  bool scenario_mode = false;
  std::string title, kernel, model_id, gpu_id, engine;
  bool splits_context = false;
  std::vector<std::string> gate_errors;  // the engine would refuse to start
  probes::AttentionShape shape;          // the probe shape bridged from the gates
  std::string probe_dtype_note;          // probe_kv_dtype's note ("" when the cache's own type)
  std::uint32_t block_size = 0, q_heads_per_rank = 0;
  GpuSpec gpu;
  DecodeScenario scenario;
  DecodeCurve curve, split_curve;
  // Per-call growth of the selected kernel over the published ratio's range, 1K -> 32K.
  double call_1k_us = 0, call_32k_us = 0, growth = 0, per_call_slope_us = 0;
  double split_call_32k_us = 0;
  std::uint32_t split_splits_32k = 1;
  std::optional<CliffMeasurement> measured;
  Verdict verdict = Verdict::ok;
};

// The probe dtypes for the decision's KV cache: q in the model's bf16 / fp16, K/V in the
// cache's 16-bit type, or fp8 E4M3 for an 8-bit cache. A cache the probe kernels do not
// decode (fp8_e5m2, int8, 4-bit) is probed at fp8 E4M3 and `note` says so with the bytes
// it reads against the cache's.
struct ProbeDtypes {
  std::string dtype = "bf16";     // AttentionShape::dtype
  std::string kv_dtype = "auto";  // AttentionShape::kv_dtype
  std::string note;               // "" when the probe reads the cache's own type
};
ProbeDtypes probe_kv_dtype(const ModelSpec& model, const EngineDecision& decision);

// The probe shape for the selected path of an engine decision (it must hold gates):
// head_dim, the block size the engine uses (bounded to what a probe can allocate), KV
// heads per rank and the whole GQA group, at this batch, in `dtypes` (probe_kv_dtype).
probes::AttentionShape probe_shape_for(const EngineDecision& decision, std::uint64_t batch,
                                       const ProbeDtypes& dtypes);

CliffOutcome run_cliff(const CliffRequest& request);

// The outcome as figures (app/src/cliff_figures.cpp): the decode step and the context cost
// beside the published figures, both curves, the measured kernels, warnings and notes.
FigureDoc cliff_figures(const CliffOutcome& outcome);

}  // namespace kvsight::app
