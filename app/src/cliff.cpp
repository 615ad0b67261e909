// The cliff use case (kvsight/app/cliff.hpp).
#include "kvsight/app/cliff.hpp"

#include <algorithm>

#include "kvsight/app/engine_setup.hpp"
#include "kvsight/dtype.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"
#include "kvsight/model.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

// A `probe sweep --format json` file is about 0.5 KB per point (du of one: 7 points
// x 2 kernels = 6.9 KB); 16 MiB is thousands of times that and still read in a blink.
// Larger, a FIFO or a device is refused before reading (kvsight/input_file.hpp).
constexpr std::uint64_t kMaxCalibrationBytes = 16ull << 20;

KernelCalibration read_calibration(const std::string& path, const GpuSpec& gpu) {
  return calibration_from_probe_json(read_input_file(path, "--calibration", kMaxCalibrationBytes), path, gpu);
}

CliffMeasurement measure(const CliffRequest& request, const probes::AttentionShape& shape) {
  if (request.backend != "cpu" && request.backend != "cuda" && request.backend != "hip")
    throw InputError("--backend", "'" + request.backend + "' is not a backend; allowed: cuda, hip, cpu");
  std::vector<std::uint64_t> contexts = request.measure_contexts;
  if (contexts.empty()) {
    // The cpu reference is slow: keep it small there.
    contexts = request.backend == "cpu" ? std::vector<std::uint64_t>{256, 512, 1024, 2048}
                                        : std::vector<std::uint64_t>{1024, 4096, 8192, 16384, 32768};
  }
  probes::ProbeOptions options;
  options.repeats = request.repeats;
  options.warmup = 1;
  if (request.progress) options.progress = request.progress;
  CliffMeasurement measured;
  measured.backend = request.backend;
  for (const char* kernel : {"nosplit", "splitkv"}) {
    measured.sweeps.push_back(probes::run_sweep(request.backend, kernel, shape, contexts, options));
    measured.device = measured.sweeps.back().device;
  }
  return measured;
}

// The published vLLM #50264 case (docs/reference/cliff.md "Setup"): Qwen3.6-27B at TP 2
// on gfx1100, batch 1: per rank 12 Q / 2 KV heads of head_dim 256, block 784.
void set_published_scenario(const CliffRequest& request, CliffOutcome& out,
                            std::vector<std::uint64_t>& contexts,
                            std::vector<std::uint64_t>& split_contexts) {
  out.scenario = vllm_50264_scenario();
  for (const PublishedPoint& p : vllm_50264_figures().collapse) contexts.push_back(p.context);
  for (const PublishedPoint& p : vllm_50264_figures().split) split_contexts.push_back(p.context);
  out.title = "Decode cliff, vLLM #50264: Qwen3.6-27B on 2 x RX 7900 XT (gfx1100), TP 2, batch 1, per rank";
  out.kernel = "triton_paged_attention_2d";
  out.model_id = "qwen3.6-27b";
  out.gpu_id = "rx7900xt";
  out.engine = "vllm";
  out.block_size = 784;
  out.q_heads_per_rank = 12;
  out.shape.head_dim = 256;
  out.shape.block_size = 784;
  out.shape.kv_heads = 2;
  out.shape.q_heads = 12;
  out.shape.batch = 1;
  out.shape.dtype = "bf16";
  out.gpu = find_gpu("rx7900xt");
  if (request.baseline_ms) {
    out.scenario.baseline_ms = *request.baseline_ms;
    out.scenario.baseline_source = "--baseline-ms (measured by the user)";
  }
  if (!request.contexts.empty()) contexts = split_contexts = request.contexts;
  if (!request.calibration_path.empty())
    out.scenario.calibration = read_calibration(request.calibration_path, out.gpu);
}

}  // namespace

ProbeDtypes probe_kv_dtype(const ModelSpec& model, const EngineDecision& decision) {
  ProbeDtypes out;
  const std::string q = canonical_torch_dtype(model.dtype, "torch_dtype");
  // Activations: the model's 16-bit type (an fp32 model runs the probes at bf16).
  out.dtype = q == "fp16" ? "fp16" : "bf16";
  const KvDtype& k = decision.kv_types.k;
  if (k.name == "bf16" || k.name == "fp16") {
    out.dtype = k.name;  // a 16-bit cache: q and K/V in it (same bytes either way)
    return out;
  }
  out.kv_dtype = "fp8_e4m3";
  if (k.name == "fp8_e4m3" && !decision.kv_types.fp8_ds_mla) return out;
  // The probe kernels decode 16-bit and fp8 E4M3 K/V (kernels/fp8_e4m3.hpp): another cache
  // type is probed at 1 B per element, which reads as many bytes as an 8-bit cache.
  const std::uint64_t row = 128;  // elements of one head row, for the byte ratio
  const double ratio = static_cast<double>(row) / static_cast<double>(k.row_bytes(row));
  out.note = "the probe kernels have no " + k.name + " K/V decode: probed at fp8_e4m3 (1 B per element), " +
             fixed_text(ratio, 2) + "x the bytes of a " + k.name + " row of " + std::to_string(row) +
             " elements";
  return out;
}

probes::AttentionShape probe_shape_for(const EngineDecision& decision, std::uint64_t batch,
                                       const ProbeDtypes& dtypes) {
  probes::AttentionShape shape;
  const LayerGroupGate& primary = decision.gates->primary;
  shape.head_dim = primary.head_size;
  // An engine without paged blocks (llama.cpp's cell pool): probe with 256-token blocks, its
  // cell padding.
  shape.block_size = std::max<std::uint32_t>(
      1, std::min<std::uint32_t>(4096, decision.block.paged ? decision.block.tokens : 256));
  shape.kv_heads = primary.kv_heads_per_rank;
  shape.q_heads =
      primary.kv_heads_per_rank *
      std::max<std::uint32_t>(1, primary.q_heads_per_rank / std::max<std::uint32_t>(1, shape.kv_heads));
  shape.batch = static_cast<std::uint32_t>(batch);
  shape.dtype = dtypes.dtype;
  shape.kv_dtype = dtypes.kv_dtype;
  return shape;
}

CliffOutcome run_cliff(const CliffRequest& request) {
  const bool scenario_mode = !request.scenario.empty();
  if (scenario_mode && request.scenario != "vllm-50264")
    throw InputError("--scenario", "'" + request.scenario + "' is not a scenario; allowed: vllm-50264");
  if (!scenario_mode && (request.model.empty() || request.gpu.empty()))
    throw InputError("--scenario", "give --scenario vllm-50264, or --model and --gpu");
  // The same engine checks as plan and gates (KV cache types, block size, constraints).
  const EngineSetup setup = setup_engine(request.options);
  const EngineOptions& options = setup.options;

  CliffOutcome out;
  out.scenario_mode = scenario_mode;
  out.engine = options.engine;
  std::vector<std::uint64_t> contexts, split_contexts;
  if (scenario_mode) {
    set_published_scenario(request, out, contexts, split_contexts);
  } else {
    const ModelSpec model = resolve_model(request.model);
    out.gpu = find_gpu(request.gpu);
    const EngineDecision decision = decide_with_gates(*setup.engine, model, out.gpu, options);
    const GateResult& gates = *decision.gates;
    if (gates.primary.selected.empty())
      throw InputError("--model", "no " + options.engine + " attention kernel admits " + model.id + " on " +
                                      out.gpu.id + "; see `kvsight gates`");
    DecodeModelOptions decode_options;
    if (request.baseline_ms) decode_options.baseline_ms = *request.baseline_ms;
    if (!request.calibration_path.empty())
      decode_options.calibration = read_calibration(request.calibration_path, out.gpu);
    out.scenario = build_decode_scenario(model, out.gpu, options, decision, decode_options);
    contexts = request.contexts.empty() ? std::vector<std::uint64_t>{1024, 2048, 4096, 8192, 16384, 32768}
                                        : request.contexts;
    split_contexts = contexts;
    out.title = "Decode vs context: " + model.id + " on " + out.gpu.id + " (" + out.gpu.arch + "), " +
                options.engine + ", TP " + std::to_string(options.tp) + ", batch " +
                std::to_string(out.scenario.batch) + ", per rank";
    out.kernel = gates.primary.selected;
    out.splits_context = gates.primary.splits_context;
    out.gate_errors = gates.errors;
    out.model_id = model.id;
    out.gpu_id = out.gpu.id;
    out.block_size = gates.block_size;
    out.q_heads_per_rank = gates.primary.q_heads_per_rank;
    const ProbeDtypes dtypes = probe_kv_dtype(model, decision);
    out.shape = probe_shape_for(decision, out.scenario.batch, dtypes);
    out.probe_dtype_note = dtypes.note;
  }

  out.curve = predict_decode(out.scenario, contexts, false);
  out.split_curve = predict_decode(out.scenario, split_contexts, true);
  const DecodeLayerGroup& primary = out.scenario.groups.front();
  out.call_1k_us = attention_call_us(out.scenario, primary, 1024, false);
  out.call_32k_us = attention_call_us(out.scenario, primary, 32768, false);
  out.growth = out.call_1k_us > 0 ? out.call_32k_us / out.call_1k_us : 0.0;
  out.split_call_32k_us = attention_call_us(out.scenario, primary, 32768, true, &out.split_splits_32k);
  out.per_call_slope_us = (out.call_32k_us - out.call_1k_us) / (32768.0 - 1024.0);
  if (!request.backend.empty()) out.measured = measure(request, out.shape);
  // The engine would refuse to start: the curve is still shown, the verdict is 1.
  out.verdict = out.gate_errors.empty() ? Verdict::ok : Verdict::check_failed;
  return out;
}

}  // namespace kvsight::app
