#pragma once
// Plain parameters of the paged-decode kernels, shared by the device kernels
// (kernels/*.cuh) and the cpu backend (probes/src/cpu_kernel_*.cpp), which runs the
// same two algorithms. No device header here: g++ includes this file.
#include <cstdint>
#include <string>

namespace kvsight::kernels {

// Tokens of K/V staged per step. vLLM's Triton kernel_paged_attention_2d uses
// TILE_SIZE = min(block_size, 128) for a power-of-two block and 32 otherwise
// (vllm/attention/ops/chunked_prefill_paged_decode.py); one fixed tile of 32
// serves every block size here (the non-power-of-two case of that kernel).
constexpr int kTileTokens = 32;
// The head dims the kernels are instantiated for: KVS_DISPATCH_HEAD_DIM (kernels/dispatch.cuh)
// on the GPU, dispatch_head_dim (probes/src/cpu_kernel.hpp) on the cpu; both switch over this
// list. vLLM's head sizes of note: 64 and 128 (ROCm custom kernel), 256 (the cliff's
// Qwen3.6, docs/reference/cliff.md).
constexpr int kHeadDims[] = {64, 128, 256};
// The one block size with its own instance (vLLM's default, vllm/config/cache.py);
// every other size 1..4096 runs the runtime instance (KVS_DISPATCH_BLOCK_SIZE).
constexpr int kCompiledBlockSize = 16;

constexpr bool is_compiled_head_dim(long long head_dim) {
  for (const int h : kHeadDims)
    if (h == head_dim) return true;
  return false;
}
// "64, 128, 256": the list for messages and --help.
inline std::string head_dims_text() {
  std::string text;
  for (const int h : kHeadDims) text += (text.empty() ? "" : ", ") + std::to_string(h);
  return text;
}
// "16 (compiled instance) or any other size 1..4096 (runtime path, e.g. 784)".
inline std::string block_sizes_text() {
  return std::to_string(kCompiledBlockSize) +
         " (compiled instance) or any other size 1..4096 (runtime path, e.g. 784)";
}
// Threads per program (thread block). 128 = vLLM paged_attention v1/v2's
// NUM_THREADS (csrc/attention/paged_attention_v1.cu).
constexpr int kThreadsPerProgram = 128;
// Output elements of a program's [group, head_dim] block each thread holds after
// a walk (element e = thread + i x kThreadsPerProgram): the walks' common layout.
template <int HEAD_DIM, int GROUP>
constexpr int accumulators_per_thread() {
  return (GROUP * HEAD_DIM + kThreadsPerProgram - 1) / kThreadsPerProgram;
}
// Largest GQA group one program serves (vLLM ROCm custom kernel admits GQA 1..16,
// vllm/platforms/rocm.py use_rocm_custom_paged_attention).
constexpr int kMaxGqa = 16;
// Most splits one call may use: the probe's --splits limit (probes/src/run_setup.cpp
// validate_options); the reduce keeps one weight per split in shared memory
// (4096 x 4 B = 16 KiB, docs/reference/kernels.md).
constexpr int kMaxSplits = 4096;

enum class ElementType : int { fp16 = 0, bf16 = 1 };

// How K and V are stored: in the q dtype (`dtype`), or as fp8 E4M3 bytes with one
// float scale per tensor, value = fp8_e4m3_to_float(byte) x k_scale (v_scale), as
// vLLM's fp8 KV cache (kernels/fp8_e4m3.hpp; docs/reference/kernels.md "fp8 E4M3 K/V").
enum class KvType : int { same_as_q = 0, fp8_e4m3 = 1 };

struct PagedDecodeParams {
  const void* q = nullptr;                     // [num_seqs, num_kv_heads * q_per_kv, head_dim], fp16/bf16
  const void* k_cache = nullptr;               // [num_blocks, block_size, num_kv_heads, head_dim], kv_type
  const void* v_cache = nullptr;               // same layout as k_cache
  const std::int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  const std::int32_t* seq_lens = nullptr;      // [num_seqs]
  float* out = nullptr;                        // [num_seqs, q_heads, head_dim], fp32
  // Split-KV scratch: unnormalised partial outputs and their softmax state
  // (FlashInfer attention/state.cuh keeps (o, m, d) the same way).
  float* partial_out = nullptr;  // [num_seqs, q_heads, num_splits, head_dim]
  float* partial_max = nullptr;  // [num_seqs, q_heads, num_splits]
  float* partial_sum = nullptr;  // [num_seqs, q_heads, num_splits]
  int num_seqs = 0;
  int num_kv_heads = 0;
  int q_per_kv = 1;
  int head_dim = 0;
  int block_size = 0;
  int max_blocks_per_seq = 0;
  int num_splits = 1;
  int tokens_per_split = 0;               // split s covers tokens [s * tokens_per_split, ...)
  float scale = 1.0f;                     // 1 / sqrt(head_dim)
  ElementType dtype = ElementType::bf16;  // q, and K/V when kv_type is same_as_q
  KvType kv_type = KvType::same_as_q;
  // Per-tensor dequantization scales of fp8 K and V (1 otherwise). The kernels
  // fold them where FlashInfer's decode wrapper does (flashinfer/decode.py:
  // sm_scale *= k_scale, out *= v_scale): q x (scale x k_scale) . k equals
  // (q x scale) . (k x k_scale), and sum w (v x v_scale) = v_scale x sum w v.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

}  // namespace kvsight::kernels
