#pragma once
// The split-KV plan: how many slices of the context each (sequence, KV head)
// program is cut into. One function, used by the probes (with the occupancy the
// runtime reports for the split kernel) and by the decode model (with the
// calibration's figure), so that a prediction and a measurement split alike.
//
// Rule (docs/reference/kernels.md "Split planner"; the aim of FlashInfer's host
// scheduler, include/flashinfer/attention/scheduler.cuh, which sizes the grid to
// num_blocks_per_sm x num_sm):
//   programs = batch x kv_heads, slots = multiprocessors x ctas_per_multiprocessor;
//   programs >= slots: no split (the device is already full; a split adds a reduce);
//   else splits = floor(slots / programs) (one full wave, never a partial second);
//   tokens_per_split = ceil(context / splits) rounded up to the 32-token tile and
//   at least 256 tokens; splits = ceil(context / tokens_per_split) (no empty split
//   at the longest context), at most 4096.
#include <cstdint>

namespace kvsight {

struct SplitPlanInput {
  std::uint32_t multiprocessors = 0;          // SMs / CUs (cpu: hardware threads); 0 counts as 1
  std::uint32_t ctas_per_multiprocessor = 1;  // programs of the split kernel one SM/CU holds; 0 counts as 1
  std::uint64_t batch = 1;                    // sequences
  std::uint32_t kv_heads = 1;                 // KV heads per rank
  std::uint64_t context = 0;                  // tokens of the longest sequence
};

struct SplitPlan {
  std::uint32_t splits = 1;
  std::uint64_t tokens_per_split = 0;  // split s covers tokens [s x tokens_per_split, ...)
  std::uint64_t programs = 0;          // batch x kv_heads
  std::uint64_t slots = 0;             // multiprocessors x ctas_per_multiprocessor
};

// Tokens the kernels stage per step (kernels/paged_decode_params.hpp kTileTokens).
inline constexpr std::uint64_t kSplitTileTokens = 32;
// Shortest split: vLLM's ROCm custom paged attention partitions the context in
// 256 tokens (csrc/rocm/attention.cu), paged_attention v2 in 512
// (csrc/attention/paged_attention_v2.cu). At 256 tokens a split reads 256 x 2 x
// head_dim x 2 B of K/V (128 KiB at head_dim 128) against group x head_dim x 4 B of
// partial output written and read back (16 KiB at GQA 16): the reduce stays small.
inline constexpr std::uint64_t kSplitMinTokens = 256;
// Most splits: the kernels' limit (kernels/paged_decode_params.hpp kMaxSplits).
inline constexpr std::uint32_t kSplitMaxSplits = 4096;

SplitPlan plan_splits(const SplitPlanInput& input);

}  // namespace kvsight
