#pragma once
// What the cpu backend's paged-decode kernels share: the per-task state and
// the kernel variants the backend can pick (portable vector code, cloned for
// x86-64-v3; an AVX2 + FMA + F16C kernel for bf16 and fp16; an AVX-512 BF16
// kernel for bf16 where the CPU has it).
#include <cstdint>
#include <string>

#include "../../kernels/paged_decode_params.hpp"

namespace kvsight::probes::detail {

// Output of one task (sequence, KV head, split): unnormalised accumulators
// [q_per_kv][head_dim], running max and sum per query head.
struct TaskState {
  alignas(64) float acc[kernels::kMaxGqa * 256];
  float running_max[kernels::kMaxGqa];
  float running_sum[kernels::kMaxGqa];
};

// Element offsets (from the cache base) of the rows of tokens [start, start +
// count) of one sequence, plus first_element (the KV head's offset in a row):
// the block-table walk both cpu kernels share.
inline void row_offsets(const kernels::PagedDecodeParams& p, const std::int32_t* block_table, int start,
                        int count, long long first_element, long long* out) {
  const long long row_stride = static_cast<long long>(p.num_kv_heads) * p.head_dim;
  int block_index = start / p.block_size;
  int in_block = start % p.block_size;
  long long block = block_table[block_index];
  for (int t = 0; t < count; ++t) {
    out[t] = (block * p.block_size + in_block) * row_stride + first_element;
    if (++in_block == p.block_size && t + 1 < count) {
      in_block = 0;
      block = block_table[++block_index];
    }
  }
}

// Dimension order of a task's accumulators: 0 is natural; c means each run of
// c dimensions holds its c/2 even dimensions, then its c/2 odd ones (what
// widening bf16 pairs with a shift and a mask leaves). The portable bf16 path
// leaves 16, the AVX2 kernel's bf16 path 16, the AVX-512 kernel 32;
// write_task_output restores the order.
constexpr int kPortableBf16Interleave = 16;
constexpr int kAvx2Bf16Interleave = 16;
constexpr int kAvx512Bf16Interleave = 32;

// KV heads one task of the AVX-512 kernel walks together (cpu_backend.cpp).
int heads_per_task_for(int num_kv_heads, int head_dim, long long seqs_x_splits, std::uint32_t threads);

// True when this CPU and OS run AVX-512 F/BW/DQ/VL with the BF16 extension
// (Intel Cooper Lake / Sapphire Rapids and later, AMD Zen 4 and later).
bool cpu_has_avx512_bf16();

// The AVX-512 BF16 kernel for bf16 q/K/V: attends tokens [begin, end) of
// KV heads [first_kv_head, first_kv_head + kv_head_count) of one sequence,
// tile by tile with the heads in lockstep, and leaves states[h].acc in
// kAvx512Bf16Interleave order. Only call it when cpu_has_avx512_bf16().
void attend_avx512_bf16(const kernels::PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                        int begin, int end, TaskState* states);

// True when this CPU and OS run AVX2 with FMA and F16C (x86-64-v3: AMD
// Zen 1 and later, Intel Haswell and later).
bool cpu_has_avx2_f16c();

// The AVX2 + FMA + F16C kernel for bf16 and fp16 q/K/V (cpu_kernel_avx2.cpp):
// the same walk as attend_avx512_bf16, accumulators in natural order. Only
// call it when cpu_has_avx2_f16c().
void attend_avx2(const kernels::PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                 int begin, int end, TaskState* states);

}  // namespace kvsight::probes::detail
