// vLLM's dummy-sampler and CUDA-graph terms, per release, from each release's own code
// (issue #28 item 1). docs/reference/vllm-profile-terms.md restates every rule below with
// the release, file and line it was read in; the line references here point there.
#include "vllm_overheads.hpp"

#include <algorithm>
#include <array>
#include <string_view>

#include "kvsight/checked.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/gpu.hpp"
#include "kvsight/model_spec.hpp"

namespace kvsight::vllm {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

bool any_of(const std::string& architecture, std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return architecture == n; });
}

// DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (config/vllm.py) of 0.25-0.28: the MoE architectures
// that take V2 as well as every dense model.
bool listed_v2_moe(const Version& v, const std::string& arch) {
  if (any_of(arch, {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})) return true;
  if (v.at_least(0, 26) &&
      any_of(arch, {"InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"}))
    return true;
  if (v.at_least(0, 27) && arch == "KimiK3ForConditionalGeneration") return true;
  return v.at_least(0, 28) && arch == "DeepseekV4ForCausalLM";
}

std::uint64_t next_power_of_2(std::uint64_t n) {
  std::uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}


// What torch reports as the device's multiprocessors (RDNA: work-group processors).
std::uint32_t runtime_sms(const GpuSpec& gpu) {
  return gpu.runtime_multiprocessors != 0 ? gpu.runtime_multiprocessors : gpu.multiprocessors;
}

// The PyTorch sort route of apply_top_k_top_p (logits16 2 + fp32 copy 4 + sorted values 4 +
// indices 8 + reverse indices 8 + CUB's spare key and value buffers 12 = 38 B); rows from 2 to
// 127 take a full-sort route that needs 12 B more.
double sort_bytes(std::uint64_t rows) { return rows == 1 || rows >= 128 ? 38.0 : 50.0; }

}  // namespace

unsigned compute_capability(const GpuSpec& gpu) {
  if (gpu.arch.rfind("sm_", 0) != 0) return 0;
  unsigned cc = 0;
  for (char c : gpu.arch.substr(3)) {
    if (c < '0' || c > '9') break;
    cc = cc * 10 + static_cast<unsigned>(c - '0');
  }
  return cc;
}

bool uses_v2_model_runner(const Version& v, const ModelSpec& model, const EngineOptions& options,
                          const GpuSpec* gpu) {
  if (v.at_least(0, 34)) return true;
  if (!v.at_least(0, 22)) return false;
  const std::string& arch = model.architecture;
  const bool moe = model.moe.is_moe();
  const bool quantized = !model.quantization.method.empty();
  if (!v.at_least(0, 23)) return arch == "Qwen3ForCausalLM" && !moe && !quantized;
  if (!v.at_least(0, 24))
    return any_of(arch, {"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}) && !moe && !quantized;
  if (!v.at_least(0, 25))
    return any_of(arch, {"Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM",
                         "GraniteMoeForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"});
  const bool speculative_ngram = options.vllm.speculative &&
                                 (options.vllm.speculative->method == "ngram" ||
                                  options.vllm.speculative->method == "ngram_gpu");
  if (!v.at_least(0, 29)) {
    if (model.attention_layer_count() == 0) return false;  // attention-free
    const bool listed = listed_v2_moe(v, arch);
    // 0.25-0.26 keep every hybrid on V1; 0.27-0.28 only the unlisted ones.
    if (model.is_hybrid() && (!v.at_least(0, 27) || !listed)) return false;
    return listed || !moe;
  }
  if (gpu != nullptr && gpu->vendor == "amd" && any_of(arch, {"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"}))
    return false;  // ROCM_DEFAULT_MRV1_ARCHITECTURES
  return !speculative_ngram;  // _get_v2_model_runner_unsupported_features
}

SamplerTerm sampler_term(const Version& v, bool v2_runner, const GpuSpec* gpu, std::uint64_t max_num_seqs,
                         std::uint64_t max_num_batched_tokens, std::uint64_t vocab_size) {
  SamplerTerm t;
  t.rows = std::min(max_num_seqs, max_num_batched_tokens);
  const double elements = static_cast<double>(t.rows) * static_cast<double>(vocab_size);
  const bool rocm = gpu != nullptr && gpu->vendor == "amd";
  const std::uint32_t sms = gpu != nullptr ? runtime_sms(*gpu) : 0;
  // TopKTopPSampler's Triton kernel keeps a [min(pow2(min(SMs, rows)), SMs), vocab] fp32
  // buffer (topk_topp_triton.py, from 0.17), allocated on the first call: inside the profile.
  // Without a catalog GPU the SM count is unknown and the buffer is left out (tens of MiB).
  const std::uint64_t programs = std::min<std::uint64_t>(sms, t.rows);
  const std::uint64_t triton_buffer =
      sms == 0 ? 0
               : checked_mul(checked_mul(std::min<std::uint64_t>(next_power_of_2(programs), sms), vocab_size,
                                         "sampler buffer"),
                             4, "sampler buffer");
  double low = 0, high = 0, predicted = 0;
  // Which of the predicted, low and high paths hold the Triton buffer.
  bool with_buffer = false, low_buffer = false, high_buffer = false;
  if (!v2_runner) {
    if (!v.at_least(0, 12)) {
      // VLLM_USE_FLASHINFER_SAMPLER unset means FlashInfer when its wheel is importable
      // (topk_topp_sampler.py 0.10-0.11); vLLM's pip wheel does not require it (the
      // vllm-openai image ships it). Predicted: the pip install, the PyTorch sort.
      predicted = high = sort_bytes(t.rows);
      low = rocm ? 26.0 : 14.0;
      t.path = rocm ? "PyTorch sort (ROCm)" : "PyTorch sort (FlashInfer not installed)";
      t.why = "bf16 logits 2 + fp32 copy 4 + sort values 4, indices 8, reverse indices 8, "
              "CUB spare buffers 12 = 38 B per element (50 below 128 rows); " +
              std::string(rocm ? "26 B if hipCUB needs no spare buffers"
                               : "14 B with the FlashInfer sampler (its wheel installed, e.g. the vllm-openai image)");
    } else if (!v.at_least(0, 17) || (t.rows < 8 && !v.at_least(0, 30))) {
      // 0.12-0.16: FlashInfer only with VLLM_USE_FLASHINFER_SAMPLER=1; the native path sorts.
      // 0.17-0.29: the Triton kernel only from 8 rows.
      predicted = high = sort_bytes(t.rows);
      low = 14.0;
      t.path = "PyTorch sort";
      t.why = "the native top-k/top-p sorts: logits 2 + 4, values 4, indices 8, reverse indices 8, CUB spare "
              "buffers 12 = 38 B per element (50 below 128 rows); 14 B with VLLM_USE_FLASHINFER_SAMPLER=1 (0.12-0.20 opt-in)";
    } else {
      // 0.17+: apply_top_k_top_p_triton masks the fp32 logits in place; then softmax probs
      // and the exponential noise q. From 0.21 a second call with a per-request generator
      // always takes this native path, so FlashInfer's 14 B never lowers the peak.
      predicted = low = high = 14.0;
      with_buffer = low_buffer = high_buffer = true;
      t.path = "Triton top-k/top-p";
      t.why = "bf16 logits 2 + fp32 copy 4 + softmax probs 4 + noise 4 = 14 B per element";
    }
  } else if (!v.at_least(0, 33)) {
    // The V2 runner's dummy run samples with the empty default state: no top-k/top-p.
    const bool copy = !v.at_least(0, 26) || (v.major == 0 && v.minor == 27);
    predicted = low = high = copy ? 6.0 : 2.0;
    t.path = "Gumbel-max";
    t.why = copy ? "default sampling state: bf16 logits 2 + fp32 copy 4 = 6 B per element"
                 : "default sampling state: the bf16 logits only, 2 B per element";
  } else {
    // 0.33+: a second pass with SamplingParams.for_sampler_warmup() (top-k 50, top-p 0.9):
    // FlashInfer's top_k_top_p_sampling_from_logits on CUDA (masked logits 4 + probs 4),
    // Triton in place otherwise (ROCm, <= 16 SMs, compute capability below 8.0).
    // A device without a known arch or SM count (--gpu-mem-gib) is taken as a CUDA one that passes.
    const unsigned cc = gpu != nullptr ? compute_capability(*gpu) : 0;
    const bool flashinfer = !rocm && (cc == 0 || (cc >= 80 && cc <= 121)) && (sms == 0 || sms > 16);
    if (flashinfer) {
      predicted = high = 14.0;
      low = 6.0;
      low_buffer = true;
      t.path = "FlashInfer top-k/top-p, warm-up pass";
      t.why = "bf16 logits 2 + fp32 copy 4 + masked logits 4 + probs 4 = 14 B per element; 6 B plus the "
              "Triton buffer with VLLM_USE_FLASHINFER_SAMPLER=0";
    } else {
      predicted = low = high = 6.0;
      with_buffer = low_buffer = high_buffer = true;
      t.path = "Triton top-k/top-p, warm-up pass";
      t.why = "bf16 logits 2 + fp32 copy 4 = 6 B per element, masked in place";
    }
  }
  t.bytes_per_element = predicted;
  t.low_bytes_per_element = low;
  t.high_bytes_per_element = high;
  t.triton_buffer_bytes = with_buffer ? triton_buffer : 0;
  t.predicted_bytes = static_cast<std::uint64_t>(elements * predicted) + t.triton_buffer_bytes;
  t.low_bytes = static_cast<std::uint64_t>(elements * low) + (low_buffer ? triton_buffer : 0);
  t.high_bytes = static_cast<std::uint64_t>(elements * high) + (high_buffer ? triton_buffer : 0);
  if (v2_runner && v.at_least(0, 27)) {
    // penalties.py PenaltiesState: output_bin_counts int32 [max_num_seqs, V] and
    // prompt_bin_mask int32 [max_num_seqs, ceil(V / 32)].
    const std::uint64_t counts = checked_mul(checked_mul(max_num_seqs, vocab_size, "penalties state"), 4,
                                             "penalties state");
    const std::uint64_t mask = checked_mul(checked_mul(max_num_seqs, (vocab_size + 31) / 32, "penalties state"), 4,
                                           "penalties state");
    t.penalties_state_bytes = checked_add(counts, mask, "penalties state");
  }
  return t;
}

std::uint32_t capture_size_count(std::uint32_t largest) {
  std::uint32_t n = 0;
  for (std::uint32_t s : {1u, 2u, 4u})
    if (s <= largest) ++n;
  for (std::uint32_t s = 8; s <= std::min(largest, 248u); s += 8) ++n;
  for (std::uint32_t s = 256; s <= largest; s += 16) ++n;
  return n;
}

GraphTerm graph_term(const Version& v, bool v2_runner, const EngineOptions& options, const GpuSpec* gpu,
                     std::uint64_t max_num_seqs, std::uint64_t max_num_batched_tokens,
                     double forward_bytes_per_token) {
  GraphTerm g;
  if (options.vllm.enforce_eager) {
    g.why = "none: --enforce-eager captures no CUDA graphs";
    return g;
  }
  if (!v.at_least(0, 20)) {
    g.why = "not subtracted: this version captures CUDA graphs after sizing the KV cache, out of the "
            "(1 - gpu_memory_utilization) slack (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS off before 0.20)";
    return g;
  }
  if (v2_runner && !v.at_least(0, 29)) {
    g.why = "not subtracted: the V2 model runner's profile_cudagraph_memory returns 0 before 0.29";
    return g;
  }
  const std::uint64_t spec =
      options.vllm.speculative ? 1 + static_cast<std::uint64_t>(options.vllm.speculative->num_speculative_tokens) : 1;
  // max_cudagraph_capture_size = min(2 x max_num_seqs x (1 + spec), 512), the sizes then cut
  // to max_num_batched_tokens (config/vllm.py _set_cudagraph_sizes); from 0.28 the cap is 1024
  // on the SM 10.x family (is_device_capability_family(100)).
  const unsigned cc = gpu != nullptr ? compute_capability(*gpu) : 0;
  const std::uint64_t cap = v.at_least(0, 28) && cc >= 100 && cc < 110 ? 1024 : 512;
  const std::uint64_t largest =
      std::min<std::uint64_t>({2 * max_num_seqs * spec, cap, std::max<std::uint64_t>(max_num_batched_tokens, 1)});
  g.largest_size = static_cast<std::uint32_t>(largest);
  g.piecewise_graphs = capture_size_count(g.largest_size);
  g.full_graphs = capture_size_count(static_cast<std::uint32_t>(std::min<std::uint64_t>(largest, max_num_seqs * spec)));
  g.subtracted = true;
  const double first = forward_bytes_per_token * static_cast<double>(largest);
  const double per_graph = static_cast<double>(g.piecewise_graphs - 1 + g.full_graphs - 1) * kMiB;
  g.predicted_bytes = static_cast<std::uint64_t>(first + per_graph);
  g.why = std::string(v2_runner ? "V2" : "V1") + " estimate, FULL_AND_PIECEWISE: the largest capture (" +
          std::to_string(largest) + " tokens of forward activations) + (" + std::to_string(g.piecewise_graphs) +
          " - 1 + " + std::to_string(g.full_graphs) +
          " - 1) graphs x 1 MiB, the code's floor per graph; each graph's real cost is measured at start-up "
          "(the log's 'Estimated CUDA graph memory' or 'CUDA graph pool memory ... (estimated)'); range: this "
          "floor to about 0.7 GiB, the estimates 0.2x logs print at TP 1 (what the captured kernels hold picks it; "
          "--cuda-graph-gib takes a logged one)";
  return g;
}

}  // namespace kvsight::vllm
