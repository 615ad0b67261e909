// Decode step time versus context (see kvsight/decode_model.hpp for the model).
// Published figures: docs/reference/cliff.md (vLLM issue #50264, PR #45916).
#include "kvsight/decode_model.hpp"

#include <algorithm>
#include <cmath>

#include "kvsight/error.hpp"
#include "kvsight/footprint.hpp"
#include "kvsight/least_squares.hpp"
#include "kvsight/number_text.hpp"
#include "kvsight/split_plan.hpp"
#include "kvsight/weights.hpp"

namespace kvsight {

namespace {

// cliff.md "Setup": RX 7900 XT, gfx1100: 84 CUs, torch reports 42 (WGPs); 800 GB/s
// is AMD's published peak for the RX 7900 XT.
constexpr std::uint32_t kRx7900xtCus = 84;
constexpr std::uint32_t kRx7900xtRuntimeMps = 42;
constexpr double kRx7900xtBandwidthGbps = 800.0;
// The published kernel profile is for head_dim 256, bf16: one program reads K and V
// of one KV head per token: (256 + 256) x 2 B.
constexpr double kCliffBytesPerTokenPerProgram = (256.0 + 256.0) * 2.0;
// A kernel that fills the device reaches about this share of peak bandwidth
// (assumed; no published figure for the split kernel at full occupancy).
constexpr double kAchievedBandwidthShare = 0.8;

// The gfx1100 calibration: the published per-call times of kernel_paged_attention_2d
// at 1024 and 32768 tokens (cliff.md kernel profile, 2 programs: batch 1 x 2 KV heads).
KernelCalibration gfx1100_calibration() {
  const PublishedCliff& published = vllm_50264_figures();
  KernelCalibration c;
  const double slope_us = published.call_slope_us_per_token();
  c.call_overhead_us = published.call_us_1k - 1024.0 * slope_us;
  // bytes per us = 1e6 B/s; / 1e3 -> GB/s.
  c.per_program_gbps = kCliffBytesPerTokenPerProgram / slope_us / 1000.0;
  c.achieved_bandwidth_gbps = kAchievedBandwidthShare * kRx7900xtBandwidthGbps;
  c.reduce_us = published.reduce_us;
  c.concurrent_programs = kRx7900xtCus;
  c.calibrated_bytes_per_token_per_program = kCliffBytesPerTokenPerProgram;
  c.source = "gfx1100 published figures (cliff.md, " + published.collapse_source + "): " + published.kernel + " " +
             fixed_text(published.call_us_1k, 3) + " us at 1024 and " + commas_fixed_text(published.call_us_32k, 3) +
             " us at 32768 tokens, 2 programs of head_dim 256 bf16 -> t0 " + fixed_text(c.call_overhead_us, 2) +
             " us, " + fixed_text(c.per_program_gbps, 3) + " GB/s per program; split reduce " +
             fixed_text(published.reduce_us, 3) + " us (" + published.split_source +
             "); fill-device bandwidth 80% of 800 GB/s (assumed)";
  return c;
}

}  // namespace

KernelCalibration default_calibration(const GpuSpec& gpu) {
  KernelCalibration base = gfx1100_calibration();
  if (gpu.arch == "gfx1100" || gpu.multiprocessors == 0 || gpu.bandwidth_gbps <= 0) {
    if (gpu.arch != "gfx1100" && !gpu.arch.empty()) {
      base.source += " (used as-is: " + gpu.id + " has no bandwidth/CU figures)";
    }
    return base;
  }
  // Other devices: one program's streaming rate scaled by bandwidth per CU/SM relative
  // to gfx1100 (an estimate until `kvsight probe sweep` measures this device).
  const double scale = (gpu.bandwidth_gbps / gpu.multiprocessors) / (kRx7900xtBandwidthGbps / kRx7900xtCus);
  KernelCalibration c = base;
  c.per_program_gbps = base.per_program_gbps * scale;
  c.achieved_bandwidth_gbps = kAchievedBandwidthShare * gpu.bandwidth_gbps;
  c.concurrent_programs = gpu.multiprocessors;
  c.source = "estimate for " + gpu.id +
             ": gfx1100 calibration (cliff.md #50264: " + fixed_text(base.per_program_gbps, 3) +
             " GB/s per program, t0 " + fixed_text(base.call_overhead_us, 2) +
             " us) scaled by bandwidth per " + (gpu.vendor == "nvidia" ? "SM" : "CU") + " x" +
             fixed_text(scale, 2) + " -> " + fixed_text(c.per_program_gbps, 3) +
             " GB/s per program; fill-device bandwidth 80% of " + fixed_text(gpu.bandwidth_gbps, 0) +
             " GB/s; measure with `kvsight probe sweep` and pass --calibration";
  return c;
}

std::uint32_t split_count(const DecodeScenario& scenario, const DecodeLayerGroup& group,
                          std::uint64_t context, bool force_split) {
  if (!group.splits_context && !force_split) return 1;
  if (group.fixed_splits > 0) return group.fixed_splits;
  if (scenario.split_min_context > 0 && context < scenario.split_min_context) return 1;
  std::uint64_t splits = 0;
  if (scenario.split_max > 0) {
    splits = scenario.split_max;
    if (scenario.split_full_context > 0 && context < scenario.split_full_context) {
      splits = (context * scenario.split_max + scenario.split_full_context - 1) / scenario.split_full_context;
    }
  } else {
    // Fill the device with the planner the probes use (kvsight/split_plan.hpp):
    // the calibration's programs per CU/SM (default 2: PR #45916 targets 2 x the
    // multiprocessor count; a probe sweep reports its kernel's occupancy).
    SplitPlanInput input;
    input.multiprocessors = scenario.calibration.concurrent_programs;
    input.ctas_per_multiprocessor = scenario.calibration.ctas_per_multiprocessor;
    input.batch = scenario.batch;
    input.kv_heads = group.kv_heads_per_rank;
    input.context = context;
    splits = plan_splits(input).splits;
  }
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, splits));
}

double attention_call_us(const DecodeScenario& scenario, const DecodeLayerGroup& group, std::uint64_t context,
                         bool force_split, std::uint32_t* splits_out) {
  const KernelCalibration& cal = scenario.calibration;
  const std::uint64_t c = group.window > 0 ? std::min(context, group.window) : context;
  const std::uint32_t splits = split_count(scenario, group, c, force_split);
  if (splits_out) *splits_out = splits;
  const double programs =
      static_cast<double>(std::max<std::uint64_t>(1, scenario.batch * group.kv_heads_per_rank));
  const double bytes = group.bytes_per_token_per_program;
  const double concurrent = std::max<double>(1.0, cal.concurrent_programs);
  const double waves = std::ceil(programs * splits / concurrent);
  // GB/s x 1000 = bytes per microsecond.
  const double stream_us = static_cast<double>(c) * bytes / (cal.per_program_gbps * 1000.0) / splits * waves;
  const double bandwidth_us = cal.achieved_bandwidth_gbps > 0 ? static_cast<double>(c) * bytes * programs /
                                                                    (cal.achieved_bandwidth_gbps * 1000.0)
                                                              : 0.0;
  double time = cal.call_overhead_us + std::max(stream_us, bandwidth_us);
  if (splits > 1) time += cal.reduce_us;
  return time;
}

DecodeCurve predict_decode(const DecodeScenario& scenario, const std::vector<std::uint64_t>& contexts,
                           bool force_split) {
  DecodeCurve curve;
  std::vector<double> x, y;
  for (std::uint64_t context : contexts) {
    DecodePoint point;
    point.context = context;
    for (std::size_t i = 0; i < scenario.groups.size(); ++i) {
      std::uint32_t splits = 1;
      const double call = attention_call_us(scenario, scenario.groups[i], context, force_split, &splits);
      if (i == 0) {
        point.attention_us_per_call = call;
        point.splits = splits;
      }
      point.attention_ms_per_step += call * scenario.groups[i].layers / 1000.0;
    }
    point.ms_per_token = scenario.baseline_ms + point.attention_ms_per_step;
    point.tok_s = point.ms_per_token > 0 ? 1000.0 / point.ms_per_token : 0.0;
    x.push_back(static_cast<double>(context));
    y.push_back(point.ms_per_token * 1000.0);
    curve.points.push_back(point);
  }
  curve.slope_us_per_token = least_squares_slope(x, y);
  if (!curve.points.empty() && curve.points.front().attention_us_per_call > 0) {
    curve.growth = curve.points.back().attention_us_per_call / curve.points.front().attention_us_per_call;
  }
  return curve;
}

DecodeScenario vllm_50264_scenario() {
  DecodeScenario s;
  s.name = "vllm-50264";
  s.batch = 1;
  DecodeLayerGroup group;
  group.layers = 16;            // full-attention layers (every 4th of 64)
  group.kv_heads_per_rank = 2;  // 4 KV heads / TP 2
  group.head_dim = 256;
  group.head_dim_v = 256;
  group.bytes_per_token_per_program = kCliffBytesPerTokenPerProgram;  // bf16 KV
  group.splits_context = false;                                       // kernel_paged_attention_2d
  group.kernel = "triton_paged_attention_2d";
  s.groups.push_back(group);
  s.calibration = gfx1100_calibration();
  // The published non-attention time: the step at the shortest published context
  // (82.51 ms at 518 tokens) less the model's attention there (16 calls).
  const PublishedCliff& published = vllm_50264_figures();
  const PublishedPoint& shortest = published.collapse.front();
  const double call_shortest = attention_call_us(s, group, shortest.context, false);
  s.baseline_ms = shortest.ms_per_token - static_cast<double>(group.layers) * call_shortest / 1000.0;
  s.baseline_source = "published: " + fixed_text(shortest.ms_per_token, 2) + " ms/token at " +
                      std::to_string(shortest.context) + " tokens (cliff.md) - " + std::to_string(group.layers) +
                      " x " + fixed_text(call_shortest, 3) + " us predicted attention = " +
                      fixed_text(s.baseline_ms, 3) +
                      " ms (the recurrent layers and w4a16 GEMMs are flat in context: cliff.md kernel profile)";
  // PR #45916's split count: no split below about 84 x 16 = 1344 tokens; 14 splits
  // at batch 1 from 4K up. Between 1344 and 4096 the PR's count is not published:
  // assumed to grow linearly to 14.
  s.split_min_context = 84 * 16;
  s.split_max = 14;
  s.split_full_context = 4096;
  s.split_source = published.split_source +
                   " heuristic (cliff.md): no split below 1344 tokens, 14 splits at batch 1 from 4096 up "
                   "(linear in between, assumed); reduce " +
                   fixed_text(published.reduce_us, 3) + " us per call";
  return s;
}

KernelCalibration fit_calibration(const Calibration& calibration, const GpuSpec& gpu) {
  const std::string& origin = calibration.origin;
  if (!calibration.nosplit) {
    throw InputError("--calibration",
                     "'" + origin +
                         "' holds no sweep of kernel \"nosplit\" with points[]; run `kvsight probe "
                         "sweep --kernel nosplit --format json`");
  }
  const CalibrationSweep& nosplit = *calibration.nosplit;
  std::vector<double> x, y;
  for (const CalibrationPoint& point : nosplit.points) {
    x.push_back(static_cast<double>(point.context));
    y.push_back(point.time_us);
  }
  if (x.size() < 2) {
    throw InputError("--calibration", "'" + origin + "': the nosplit sweep needs at least 2 points, has " +
                                          std::to_string(x.size()));
  }
  if (std::all_of(x.begin(), x.end(), [&x](double c) { return c == x.front(); }))
    throw InputError("--calibration", "'" + origin + "': " + nosplit.where + ".points all have context " +
                                          fixed_text(x.front(), 0) +
                                          "; allowed: at least two different contexts (a slope needs them)");
  const double slope = least_squares_slope(x, y);
  if (slope <= 0) {
    throw InputError("--calibration", "'" + origin +
                                          "': the nosplit time does not grow with context (slope " +
                                          fixed_text(slope, 6) + " us/token); sweep longer contexts");
  }
  double mean_x = 0, mean_y = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    mean_x += x[i];
    mean_y += y[i];
  }
  mean_x /= static_cast<double>(x.size());
  mean_y /= static_cast<double>(y.size());
  const double element_bytes = nosplit.dtype == "fp32" ? 4.0 : 2.0;
  const double bytes_per_program = 2.0 * static_cast<double>(nosplit.head_dim) * element_bytes;
  KernelCalibration c;
  c.call_overhead_us = std::max(0.0, mean_y - slope * mean_x);
  c.concurrent_programs = gpu.multiprocessors > 0 ? gpu.multiprocessors : 1;
  // The sweep's batch x KV heads programs ran in ceil(programs / concurrent) waves, so the
  // slope is that many programs' streams one after another: attention_call_us counts the
  // waves of the predicted call the same way, and the rate must not count them twice (a
  // 2-thread cpu ran 8 programs in 4 waves: the rate was 4x low and preflight's prediction
  // 2x its own measurement at 32K, issue #23 item 4). One wave on every GPU of the catalog.
  const double sweep_programs =
      std::max(1.0, static_cast<double>(nosplit.batch) * static_cast<double>(nosplit.kv_heads));
  const double sweep_waves = std::ceil(sweep_programs / static_cast<double>(c.concurrent_programs));
  c.per_program_gbps = bytes_per_program * sweep_waves / slope / 1000.0;
  c.calibrated_bytes_per_token_per_program = bytes_per_program;
  c.achieved_bandwidth_gbps = kAchievedBandwidthShare * gpu.bandwidth_gbps;
  std::string split_note = "fill-device bandwidth 80% of the catalog peak (assumed)";
  if (calibration.splitkv) {
    double best = 0;
    for (const CalibrationPoint& point : calibration.splitkv->points) best = std::max(best, point.gbps);
    // The probe's own split plan came from its kernel's occupancy: predict with it.
    if (calibration.splitkv->ctas_per_multiprocessor >= 1)
      c.ctas_per_multiprocessor = calibration.splitkv->ctas_per_multiprocessor;
    if (best > 0) {
      c.achieved_bandwidth_gbps = best;
      split_note = "fill-device bandwidth " + fixed_text(best, 1) + " GB/s (best splitkv point)";
    }
  }
  c.source = "probe sweep '" + origin + "' (" + nosplit.backend + ", " + nosplit.device + ", nosplit, " +
             std::to_string(x.size()) + " points, head_dim " + std::to_string(nosplit.head_dim) + ", " +
             std::to_string(nosplit.kv_heads) + " KV heads): slope " + fixed_text(slope, 4) +
             " us/token" + (sweep_waves > 1 ? " over " + fixed_text(sweep_waves, 0) + " waves" : std::string()) +
             " -> " + fixed_text(c.per_program_gbps, 3) + " GB/s per program, t0 " +
             fixed_text(c.call_overhead_us, 2) + " us; " + split_note;
  // Numbers that overflow the fit are bad input too (fuzz finding, docs/reliability.md).
  if (!std::isfinite(c.per_program_gbps) || !(c.per_program_gbps > 0) || !std::isfinite(c.call_overhead_us) ||
      !std::isfinite(c.achieved_bandwidth_gbps) || !(c.achieved_bandwidth_gbps > 0))
    throw InputError("--calibration",
                     "'" + origin +
                         "': contexts or times are out of range (the fit is not finite and "
                         "positive); expected microseconds and token counts from a probe sweep");
  return c;
}

DecodeScenario build_decode_scenario(const ModelSpec& model, const GpuSpec& gpu, const EngineOptions& options,
                                     const EngineDecision& decision,
                                     const DecodeModelOptions& decode_options) {
  if (!decision.gates)
    throw InputError("--engine", decision.engine_display + " has no attention-kernel rules for " + model.id +
                                     " on " + gpu.id + ": no decode model");
  const GateResult& gates = *decision.gates;
  DecodeScenario s;
  s.name = model.id + " on " + gpu.id;
  s.batch = std::max<std::uint64_t>(1, options.batch);
  s.calibration = decode_options.calibration ? *decode_options.calibration : default_calibration(gpu);
  const KvTypes& types = decision.kv_types;
  // Primary group first (the decode curve reports its per-call time).
  std::vector<LayerGroupGate> ordered;
  ordered.push_back(gates.primary);
  bool skipped_primary = false;
  for (const LayerGroupGate& group : gates.groups) {
    if (!skipped_primary && group.kind == gates.primary.kind && group.head_size == gates.primary.head_size &&
        group.kv_heads_per_rank == gates.primary.kv_heads_per_rank && group.window == gates.primary.window &&
        group.layer_count == gates.primary.layer_count) {
      skipped_primary = true;
      continue;
    }
    ordered.push_back(group);
  }
  // PP: a rank holds 1/pp of the layers; decode runs the stages one after another,
  // so the step still sums every layer.
  for (const LayerGroupGate& gate : ordered) {
    DecodeLayerGroup group;
    group.layers = gate.layer_count;
    group.kv_heads_per_rank = gate.kv_heads_per_rank;
    group.head_dim = gate.head_size;
    group.window = gate.window;
    group.splits_context = gate.splits_context;
    group.kernel = gate.selected;
    // Bytes one program reads per token: one KV head's K and V rows (MLA: the latent).
    LayerSpec probe_layer;
    for (const LayerSpec& layer : model.layers) {
      if (layer.is_attention() && layer.head_dim_k == gate.head_size && layer.kind == gate.layer_kind) {
        probe_layer = layer;
        break;
      }
    }
    group.head_dim_v = probe_layer.head_dim_v;
    group.bytes_per_token_per_program = static_cast<double>(types.k.row_bytes(probe_layer.head_dim_k));
    if (probe_layer.head_dim_v > 0) {
      group.bytes_per_token_per_program += static_cast<double>(types.v.row_bytes(probe_layer.head_dim_v));
    }
    // vLLM unified attention 3D: NUM_PAR_SOFTMAX_SEGMENTS = 16 (triton_attn.py).
    if (gate.selected == "triton_unified_attention" && gate.splits_context) group.fixed_splits = 16;
    s.groups.push_back(group);
  }

  if (decode_options.baseline_ms) {
    s.baseline_ms = *decode_options.baseline_ms;
    s.baseline_source = "--baseline-ms (measured by the user)";
  } else {
    const WeightsEstimate& weights = decision.weights;  // --weights-gib when given
    const TokenFootprint footprint = token_footprint(model, types, options.tp);
    const double bandwidth = gpu.bandwidth_gbps * decode_options.bandwidth_efficiency;  // GB/s = bytes/ns
    // Weights read once per step; recurrent state read and written once per sequence.
    const double weight_ms =
        bandwidth > 0 ? static_cast<double>(weights.bytes_per_rank) / (bandwidth * 1e6) : 0.0;
    const double state_ms = bandwidth > 0 ? 2.0 * static_cast<double>(footprint.state_bytes_per_sequence) *
                                                static_cast<double>(s.batch) / (bandwidth * 1e6)
                                          : 0.0;
    const double launch_ms = decode_options.launch_us_per_layer * model.num_layers() / 1000.0;
    s.baseline_ms = weight_ms + state_ms + launch_ms;
    s.baseline_source =
        "estimate: weights " + fixed_text(static_cast<double>(weights.bytes_per_rank) / 1e9, 2) +
        " GB/rank at " + fixed_text(decode_options.bandwidth_efficiency * 100, 0) + "% of " +
        fixed_text(gpu.bandwidth_gbps, 0) + " GB/s = " + fixed_text(weight_ms, 2) + " ms + recurrent state " +
        fixed_text(state_ms, 3) + " ms + launches " + fixed_text(decode_options.launch_us_per_layer, 0) +
        " us x " + std::to_string(model.num_layers()) + " layers = " + fixed_text(launch_ms, 2) +
        " ms (give a measured --baseline-ms for a real figure)";
  }
  s.split_source =
      "split count: fill the device (about 2 programs per CU/SM, at least 256 tokens per split); "
      "vLLM unified attention 3D uses 16 segments";
  return s;
}

std::optional<std::string> decode_cliff_warning(const ModelSpec& model, const GpuSpec& gpu,
                                                const EngineOptions& options,
                                                const EngineDecision& decision) {
  // Engines without gate rules (exllamav2/v3) and models without attention layers have no
  // gates in the decision: no warning rather than an error.
  if (!decision.gates) return std::nullopt;
  const GateResult& gates = *decision.gates;
  if (gates.primary.selected.empty() || gates.primary.splits_context) return std::nullopt;
  // Decode at the longest context the engine admits (the decision's max_model_len).
  const std::uint64_t long_context = decision.length.tokens;
  if (long_context <= 1024) return std::nullopt;
  const DecodeScenario scenario = build_decode_scenario(model, gpu, options, decision, DecodeModelOptions{});
  const DecodeCurve curve = predict_decode(scenario, {1024, long_context});
  const double short_ms = curve.points[0].ms_per_token;
  const double long_ms = curve.points[1].ms_per_token;
  if (short_ms <= 0 || long_ms / short_ms <= 1.5) return std::nullopt;
  return "decode cliff: " + gates.engine + " runs " + gates.primary.selected +
         " (no context split: " + std::to_string(scenario.batch) + " x " +
         std::to_string(gates.primary.kv_heads_per_rank) + " programs) on " + gpu.family + "; predicted " +
         fixed_text(curve.points[0].tok_s, 1) + " tok/s at 1024 -> " + fixed_text(curve.points[1].tok_s, 1) +
         " tok/s at " + std::to_string(long_context) + " tokens (" + fixed_text(long_ms / short_ms, 1) +
         "x slower; non-attention time estimated from weights; calibration: " +
         (gpu.arch == "gfx1100" ? "cliff.md gfx1100 figures" : "estimate scaled from gfx1100") +
         "); see `kvsight gates` and `kvsight cliff --model " + model.id + " --gpu " + gpu.id + "`";
}

}  // namespace kvsight
