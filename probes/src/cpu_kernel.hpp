#pragma once
// What the cpu backend's paged-decode kernels share: the per-task state and
// the kernel variants the backend can pick (portable vector code, cloned for
// x86-64-v3; an AVX-512 BF16 kernel where the CPU has it).
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

// KV heads one task of the AVX-512 kernel walks together (cpu_backend.cpp).
int heads_per_task_for(int num_kv_heads, int head_dim, long long seqs_x_splits, std::uint32_t threads);

// True when this CPU and OS run AVX-512 F/BW/DQ/VL with the BF16 extension
// (Intel Cooper Lake / Sapphire Rapids and later, AMD Zen 4 and later).
bool cpu_has_avx512_bf16();

// The AVX-512 BF16 kernel for bf16 q/K/V: attends tokens [begin, end) of
// KV heads [first_kv_head, first_kv_head + kv_head_count) of one sequence,
// tile by tile with the heads in lockstep, and leaves states[h].acc in natural
// dimension order. Only call it when cpu_has_avx512_bf16().
void attend_avx512_bf16(const kernels::PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                        int begin, int end, TaskState* states);

}  // namespace kvsight::probes::detail
