#pragma once
// Decode model: decode step time versus context, without a GPU.
//
//   step(c) = non-attention time (weights + recurrent state read at achieved
//             bandwidth + launch overheads, or a measured baseline)
//           + sum over attention layers of the selected kernel's time per call at c.
//
// A kernel that does not split the context runs batch x kv_heads_per_rank programs,
// each reading its (sequence, KV head) share of the context serially, so a call
// costs t0 + c x bytes_per_token_per_program / per_program_rate. A split kernel
// divides each program's share by its split count, and is bounded below by the
// device's achieved bandwidth once it fills the device (docs/architecture.md "Decode model").
// Every figure carries the calibration it used.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/calibration.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/gates.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model_spec.hpp"

namespace kvsight {

// The attention shape of one group of identical layers on one rank.
struct DecodeLayerGroup {
  std::uint32_t layers = 0;
  std::uint32_t kv_heads_per_rank = 1;
  std::uint32_t head_dim = 128;               // K head dim
  std::uint32_t head_dim_v = 128;             // V head dim (0: MLA latent stored once)
  double bytes_per_token_per_program = 1024;  // K + V bytes one program reads per token (one KV head)
  std::uint64_t window = 0;                   // sliding window / chunk: context capped here; 0 = none
  bool splits_context = false;
  std::string kernel;  // selected kernel id
  // Split count of a split kernel at context c; 0 = fill the device (see split_count()).
  std::uint32_t fixed_splits = 0;
};

struct DecodeScenario {
  std::string name;
  std::uint64_t batch = 1;
  std::vector<DecodeLayerGroup> groups;
  double baseline_ms = 0;  // non-attention time per step
  std::string baseline_source;
  KernelCalibration calibration;
  // How the split path is modelled for the side-by-side split curve.
  std::uint32_t split_min_context = 0;   // no split below this context (0 = split always)
  std::uint32_t split_max = 0;           // cap on splits (0 = fill the device)
  std::uint64_t split_full_context = 0;  // splits reach split_max from this context (0 = at once)
  std::string split_source;
};

struct DecodePoint {
  std::uint64_t context = 0;
  double attention_us_per_call = 0;  // of the primary (largest) group
  double attention_ms_per_step = 0;  // all attention layers
  double ms_per_token = 0;
  double tok_s = 0;
  std::uint32_t splits = 1;
};

struct DecodeCurve {
  std::vector<DecodePoint> points;
  double slope_us_per_token = 0;  // step time per context token (least squares over the points)
  double growth = 0;              // attention per call at the last point / at the first
};

// Split count a split kernel uses at context c with `programs` (batch x kv heads).
std::uint32_t split_count(const DecodeScenario& scenario, const DecodeLayerGroup& group,
                          std::uint64_t context, bool force_split);

// Time of one attention call of `group` at context c.
//   no split:  t0 + c x B / r                      (B bytes/token/program, r per-program rate)
//   split S:   t0 + max(c x B / (r x S) x waves, c x B x P / W) + reduce
// with P = batch x kv_heads programs, waves = ceil(P x S / concurrent_programs), W the
// achieved bandwidth.
double attention_call_us(const DecodeScenario& scenario, const DecodeLayerGroup& group, std::uint64_t context,
                         bool force_split, std::uint32_t* splits_out = nullptr);

// The curve at the given contexts; force_split = model every group with a split kernel.
DecodeCurve predict_decode(const DecodeScenario& scenario, const std::vector<std::uint64_t>& contexts,
                           bool force_split = false);

// Per-device default calibration. For gfx1100 (RX 7900 XT/XTX) the published
// cliff.md figures are the calibration (356.664 us at 1024, 10,095.188 us at 32768
// for 2 programs of head_dim 256 bf16); other devices scale it by bandwidth per CU.
KernelCalibration default_calibration(const GpuSpec& gpu);

// Calibration from probe sweeps (typed, or read from a file): kvsight/calibration.hpp.

struct DecodeModelOptions {
  std::optional<double> baseline_ms;  // measured non-attention time per step
  std::optional<KernelCalibration> calibration;
  double bandwidth_efficiency = 0.7;  // achieved / peak for the weights estimate
  double launch_us_per_layer = 10.0;  // kernel launches per layer when not given a baseline
};

// Builds the scenario for a model on a device from the engine's decision on that device:
// its kernel per layer group (decision.gates), KV cache types and weights. Throws
// InputError when the decision has no gates (no device, or an engine without gate rules).
DecodeScenario build_decode_scenario(const ModelSpec& model, const GpuSpec& gpu, const EngineOptions& options,
                                     const EngineDecision& decision,
                                     const DecodeModelOptions& decode_options);

// The published vLLM #50264 case (per TP rank: batch 1, 2 KV heads, 12 Q heads,
// head_dim 256, block 784, 16 attention layers) with the cliff.md calibration.
DecodeScenario vllm_50264_scenario();

// Published figures of that case (cliff.md), read from planner/data/published/vllm-50264.json,
// where each is written once (planner/src/decode/published_cliff.cpp).
struct PublishedPoint {
  std::uint64_t context;
  double ms_per_token;
  double tok_s;
};
struct PublishedCliff {
  std::string collapse_source;            // "vLLM #50264"
  std::string engine_version;             // the collapse's vLLM, "vLLM 0.23.1"
  std::vector<PublishedPoint> collapse;   // decode per token on the fallback
  std::string kernel;                     // the fallback, "kernel_paged_attention_2d"
  double call_us_1k = 0, call_us_32k = 0;  // kernel_paged_attention_2d per call, ctx 1024 and 32768
  double slope_us_per_token = 0;          // the collapse's step slope
  std::string split_source;               // "PR #45916"
  std::vector<PublishedPoint> split;      // decode per token with the split kernel (tok_s = 1000 / ms)
  double split_call_us_32k = 0;           // the split kernel per call at 32768
  double reduce_us = 0;                   // its reduce, per call
  double split_slope_us_per_token = 0;
  // Derived: the per-call growth and slope from 1024 to 32768 tokens, and the split
  // kernel's whole call at 32768 (split + reduce).
  double growth() const { return call_us_32k / call_us_1k; }
  double call_slope_us_per_token() const { return (call_us_32k - call_us_1k) / (32768.0 - 1024.0); }
  double split_total_us_32k() const { return split_call_us_32k + reduce_us; }
};
const PublishedCliff& vllm_50264_figures();

// One-line warning for `plan`: the selected path does not split the context and the
// predicted decode at the decision's max_model_len is more than 1.5x slower than at 1K.
// nullopt otherwise (no gates in the decision, or a max_model_len of 1K or less).
std::optional<std::string> decode_cliff_warning(const ModelSpec& model, const GpuSpec& gpu,
                                                const EngineOptions& options, const EngineDecision& decision);

}  // namespace kvsight
