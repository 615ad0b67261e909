#pragma once
// Two terms of vLLM's start-up memory profile, each read from the release's own code per
// version range (issue #28 item 1; docs/reference/vllm-profile-terms.md restates every rule
// with its file and line):
//
//   - the dummy sampler run of profile_run, whose peak is inside the measured torch peak;
//   - the CUDA-graph memory estimate, subtracted from the KV budget from 0.20.
//
// Which model runner runs (V1 or V2) decides both, so its default is here too. Internal to
// the planner (VllmEngine's memory_budget, tests/test_vllm_overheads.cpp).
#include <cstdint>
#include <string>

#include "common.hpp"

namespace kvsight {
struct EngineOptions;
struct GpuSpec;
struct ModelSpec;
}  // namespace kvsight

namespace kvsight::vllm {

using engine_detail::Version;

// "sm_90" -> 90; 0 for a device that is not an NVIDIA one (ROCm gfx..., unknown).
unsigned compute_capability(const GpuSpec& gpu);

// VllmConfig.use_v2_model_runner's default (config/vllm.py): V1 before 0.22; the listed
// architectures 0.22-0.24; every dense, non-hybrid generate model and the listed MoE ones
// 0.25-0.28; every model from 0.29 (except ngram speculation and two DeepSeek architectures
// on ROCm); the only runner in 0.34. VLLM_USE_V2_MODEL_RUNNER is not an input.
bool uses_v2_model_runner(const Version& version, const ModelSpec& model, const EngineOptions& options,
                          const GpuSpec* gpu);

// The dummy sampler run's peak (gpu_model_runner.py _dummy_sampler_run and the sampler it
// calls): rows x vocab x bytes_per_element plus the Triton top-k/top-p kernel's per-program
// buffer, which is allocated inside the profile. low/high bound the install's choices (a
// FlashInfer wheel before 0.12, the row count's sort route); `predicted` is the default
// install's.
struct SamplerTerm {
  std::uint64_t rows = 0;               // min(max_num_seqs, max_num_batched_tokens)
  double bytes_per_element = 0.0;       // at the peak, per logits element
  double low_bytes_per_element = 0.0;
  double high_bytes_per_element = 0.0;
  std::uint64_t triton_buffer_bytes = 0;  // min(pow2(min(SMs, rows)), SMs) x vocab x 4 B
  std::uint64_t predicted_bytes = 0;
  std::uint64_t low_bytes = 0;
  std::uint64_t high_bytes = 0;
  // The V2 runner's PenaltiesState (output_bin_counts int32 + prompt_bin_mask bits):
  // max_num_seqs x vocab x 4.125 B, allocated before the profile and so counted as non-KV
  // memory only from 0.27, whose budget measures everything the process consumed.
  std::uint64_t penalties_state_bytes = 0;
  std::string path;  // what runs: "PyTorch sort", "Triton top-k/top-p", "FlashInfer", ...
  std::string why;   // the rule with its source
};
SamplerTerm sampler_term(const Version& version, bool v2_runner, const GpuSpec* gpu, std::uint64_t max_num_seqs,
                         std::uint64_t max_num_batched_tokens, std::uint64_t vocab_size);

// The CUDA-graph memory vLLM subtracts from the KV budget (gpu_worker.py, from 0.20 with
// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default): per mode the largest capture's
// cost plus (graphs - 1) x max(second capture, 1 MiB). The code fixes the graph counts and the
// 1 MiB floor; the captures' costs are measured at start-up. `predicted` is the floor with the
// largest capture costed as the forward's activations at the largest capture size.
struct GraphTerm {
  bool subtracted = false;
  std::uint32_t piecewise_graphs = 0;  // capture sizes <= the largest (cudagraph_capture_sizes)
  std::uint32_t full_graphs = 0;       // decode sizes <= max_num_seqs x (1 + speculative tokens)
  std::uint32_t largest_size = 0;      // max_cudagraph_capture_size
  std::uint64_t predicted_bytes = 0;
  std::string why;
};
// forward_bytes_per_token: the activation peak per batched token (the same estimate the
// profile's forward uses), which costs the largest capture.
// gpu may be null; from 0.28 an SM 10.x device captures up to 1024 tokens.
GraphTerm graph_term(const Version& version, bool v2_runner, const EngineOptions& options, const GpuSpec* gpu,
                     std::uint64_t max_num_seqs, std::uint64_t max_num_batched_tokens,
                     double forward_bytes_per_token);

// cudagraph_capture_sizes' default count for a largest size (config/vllm.py
// _set_cudagraph_sizes, 0.12+): [1, 2, 4], 8..248 step 8, 256..largest step 16, each <= largest.
std::uint32_t capture_size_count(std::uint32_t largest);

}  // namespace kvsight::vllm
