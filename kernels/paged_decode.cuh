#pragma once
// Paged-decode attention, single source for nvcc and hipcc.
//
// paged_decode_nosplit: one program per (KV head, sequence), serving every query
// head of the GQA group and walking the whole context serially with an online
// softmax: the structure of vLLM's Triton kernel_paged_attention_2d
// (vllm/attention/ops/chunked_prefill_paged_decode.py), whose time grows with
// context because only sequences x kv_heads programs exist (docs/reference/cliff.md).
//
// paged_decode_splitkv + paged_decode_reduce: the same walk over one slice of the
// context per program (grid z = split), writing unnormalised partial outputs
// with their running max and sum; the reduce merges them. That is vLLM
// paged_attention v2 (csrc/attention/paged_attention_v2.cu: partitions + reduce
// kernel), FlashInfer's merge state (include/flashinfer/attention/state.cuh) and
// vLLM PR #45916 (kernel_paged_attention_2d_splitkv + reduce). Keeping partials
// unnormalised avoids the divide/multiply round trip that vllm-xpu-kernels PR
// #204 found lossy.
//
// Layout: K and V [num_blocks, block_size, num_kv_heads, head_dim], block tables
// [num_seqs, max_blocks_per_seq]; q [num_seqs, q_heads, head_dim]; accumulation
// and output in fp32.
#include "dispatch.cuh"
#include "paged_decode_params.hpp"
#include "portability.cuh"

namespace kvsight::kernels {
inline namespace KVS_RUNTIME_NAMESPACE {

template <int HEAD_DIM>
struct DecodeShared {
  float q[kMaxGqa * HEAD_DIM];
  // K or V tile as raw 16-bit values; +2 elements per row makes the row stride
  // an odd number of 32-bit words, so threads reading different tokens at the
  // same column hit different banks.
  unsigned short kv[kTileTokens][HEAD_DIM + 2];
  float scores[kMaxGqa][kTileTokens];
  float running_max[kMaxGqa];
  float running_sum[kMaxGqa];
  float rescale[kMaxGqa];
};

// Stages tokens [tile_start, tile_start + count) of one KV head into shared
// memory with 16-byte loads (8 elements each); several loads per thread in flight.
template <int HEAD_DIM, int BLOCK_SIZE>
__device__ __forceinline__ void load_tile(unsigned short (*tile)[HEAD_DIM + 2], const unsigned short* cache,
                                          const int* block_table, int block_size_runtime, int num_kv_heads,
                                          int kv_head, int tile_start, int count) {
  const int block_size = BLOCK_SIZE > 0 ? BLOCK_SIZE : block_size_runtime;
  constexpr int kChunksPerRow = HEAD_DIM / 8;
  constexpr int kChunks = kTileTokens * kChunksPerRow;
#pragma unroll 4
  for (int chunk = threadIdx.x; chunk < kChunks; chunk += kThreadsPerProgram) {
    const int row = chunk / kChunksPerRow;
    const int column = (chunk % kChunksPerRow) * 8;
    if (row < count) {
      const int token = tile_start + row;
      const long long block = block_table[token / block_size];
      const long long offset =
          ((block * block_size + token % block_size) * num_kv_heads + kv_head) * HEAD_DIM;
      const uint4 value = *reinterpret_cast<const uint4*>(cache + offset + column);
      unsigned int* destination = reinterpret_cast<unsigned int*>(&tile[row][column]);
      destination[0] = value.x;
      destination[1] = value.y;
      destination[2] = value.z;
      destination[3] = value.w;
    }
  }
}

// Online softmax over tokens [begin, end) of one sequence and KV head. Leaves the
// unnormalised accumulators in acc (element e = threadIdx.x + i * threads of the
// [q_per_kv, HEAD_DIM] output) and the running max/sum in shared memory.
template <typename T, int HEAD_DIM, int BLOCK_SIZE>
__device__ __forceinline__ void attend_range(const PagedDecodeParams& p, DecodeShared<HEAD_DIM>& shared,
                                             float (&acc)[kMaxGqa * HEAD_DIM / kThreadsPerProgram], int seq,
                                             int kv_head, int begin, int end) {
  constexpr int kAccPerThread = kMaxGqa * HEAD_DIM / kThreadsPerProgram;
  constexpr int kWaves = kThreadsPerProgram / KVS_WAVE_SIZE;
  const int group = p.q_per_kv;
  const int q_heads = p.num_kv_heads * group;
  const int lane = threadIdx.x % KVS_WAVE_SIZE;
  const int wave = threadIdx.x / KVS_WAVE_SIZE;
  const unsigned short* q =
      static_cast<const unsigned short*>(p.q) +
      (static_cast<long long>(seq) * q_heads + static_cast<long long>(kv_head) * group) * HEAD_DIM;
  for (int e = threadIdx.x; e < group * HEAD_DIM; e += kThreadsPerProgram)
    shared.q[e] = Element<T>::to_float(q[e]);
  for (int g = threadIdx.x; g < group; g += kThreadsPerProgram) {
    shared.running_max[g] = -INFINITY;
    shared.running_sum[g] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kAccPerThread; ++i) acc[i] = 0.0f;
  const int* block_table = p.block_tables + static_cast<long long>(seq) * p.max_blocks_per_seq;
  const unsigned short* k_cache = static_cast<const unsigned short*>(p.k_cache);
  const unsigned short* v_cache = static_cast<const unsigned short*>(p.v_cache);
  __syncthreads();

  for (int tile_start = begin; tile_start < end; tile_start += kTileTokens) {
    const int count = min(kTileTokens, end - tile_start);
    load_tile<HEAD_DIM, BLOCK_SIZE>(shared.kv, k_cache, block_table, p.block_size, p.num_kv_heads, kv_head,
                                    tile_start, count);
    __syncthreads();
    // Scores: one (query head, token) pair per thread; lanes of a wave take
    // consecutive tokens of the same head (q read is a broadcast).
    for (int pair = threadIdx.x; pair < group * kTileTokens; pair += kThreadsPerProgram) {
      const int g = pair / kTileTokens;
      const int t = pair % kTileTokens;
      float score = -INFINITY;
      if (t < count) {
        const unsigned int* k_row = reinterpret_cast<const unsigned int*>(shared.kv[t]);
        const float* q_row = shared.q + g * HEAD_DIM;
        float dot = 0.0f;
#pragma unroll 8
        for (int w = 0; w < HEAD_DIM / 2; ++w) {
          const unsigned int two = k_row[w];
          dot += q_row[2 * w] * Element<T>::to_float(static_cast<unsigned short>(two & 0xffffu));
          dot += q_row[2 * w + 1] * Element<T>::to_float(static_cast<unsigned short>(two >> 16));
        }
        score = dot * p.scale;
      }
      shared.scores[g][t] = score;
    }
    __syncthreads();
    // V tile goes into the same staging buffer while the waves update the softmax.
    load_tile<HEAD_DIM, BLOCK_SIZE>(shared.kv, v_cache, block_table, p.block_size, p.num_kv_heads, kv_head,
                                    tile_start, count);
    for (int g = wave; g < group; g += kWaves) {
      const float score = lane < kTileTokens ? shared.scores[g][lane] : -INFINITY;
      const float old_max = shared.running_max[g];
      const float new_max = fmaxf(old_max, wave_max(score));
      const float weight = score == -INFINITY ? 0.0f : expf(score - new_max);
      if (lane < kTileTokens) shared.scores[g][lane] = weight;
      const float weight_sum = wave_sum(weight);
      if (lane == 0) {
        const float rescale = old_max == -INFINITY ? 0.0f : expf(old_max - new_max);
        shared.rescale[g] = rescale;
        shared.running_sum[g] = shared.running_sum[g] * rescale + weight_sum;
        shared.running_max[g] = new_max;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      const int e = threadIdx.x + i * kThreadsPerProgram;
      if (e < group * HEAD_DIM) {
        const int g = e / HEAD_DIM;
        const int d = e % HEAD_DIM;
        float value = acc[i] * shared.rescale[g];
        for (int t = 0; t < count; ++t) value += shared.scores[g][t] * Element<T>::to_float(shared.kv[t][d]);
        acc[i] = value;
      }
    }
    __syncthreads();
  }
}

template <typename T, int HEAD_DIM, int BLOCK_SIZE>
__global__ void __launch_bounds__(kThreadsPerProgram) paged_decode_nosplit(PagedDecodeParams p) {
  __shared__ DecodeShared<HEAD_DIM> shared;
  float acc[kMaxGqa * HEAD_DIM / kThreadsPerProgram];
  const int kv_head = blockIdx.x;
  const int seq = blockIdx.y;
  attend_range<T, HEAD_DIM, BLOCK_SIZE>(p, shared, acc, seq, kv_head, 0, p.seq_lens[seq]);
  const int group = p.q_per_kv;
  float* out = p.out + (static_cast<long long>(seq) * p.num_kv_heads * group +
                        static_cast<long long>(kv_head) * group) *
                           HEAD_DIM;
#pragma unroll
  for (int i = 0; i < kMaxGqa * HEAD_DIM / kThreadsPerProgram; ++i) {
    const int e = threadIdx.x + i * kThreadsPerProgram;
    if (e < group * HEAD_DIM) out[e] = acc[i] / shared.running_sum[e / HEAD_DIM];
  }
}

template <typename T, int HEAD_DIM, int BLOCK_SIZE>
__global__ void __launch_bounds__(kThreadsPerProgram) paged_decode_splitkv(PagedDecodeParams p) {
  __shared__ DecodeShared<HEAD_DIM> shared;
  float acc[kMaxGqa * HEAD_DIM / kThreadsPerProgram];
  const int kv_head = blockIdx.x;
  const int seq = blockIdx.y;
  const int split = blockIdx.z;
  const int seq_len = p.seq_lens[seq];
  const int begin = min(seq_len, split * p.tokens_per_split);
  const int end = min(seq_len, begin + p.tokens_per_split);
  attend_range<T, HEAD_DIM, BLOCK_SIZE>(p, shared, acc, seq, kv_head, begin, end);
  const int group = p.q_per_kv;
  const long long first_head =
      static_cast<long long>(seq) * p.num_kv_heads * group + static_cast<long long>(kv_head) * group;
#pragma unroll
  for (int i = 0; i < kMaxGqa * HEAD_DIM / kThreadsPerProgram; ++i) {
    const int e = threadIdx.x + i * kThreadsPerProgram;
    if (e < group * HEAD_DIM) {
      const long long head = first_head + e / HEAD_DIM;
      p.partial_out[(head * p.num_splits + split) * HEAD_DIM + e % HEAD_DIM] = acc[i];
    }
  }
  for (int g = threadIdx.x; g < group; g += kThreadsPerProgram) {
    p.partial_max[(first_head + g) * p.num_splits + split] = shared.running_max[g];
    p.partial_sum[(first_head + g) * p.num_splits + split] = shared.running_sum[g];
  }
}

// Merges the splits of one (query head, sequence): out = sum_s o_s e^(m_s - M) /
// sum_s l_s e^(m_s - M), M = max_s m_s. Empty splits carry m = -inf, l = 0.
__global__ void __launch_bounds__(kThreadsPerProgram) paged_decode_reduce(PagedDecodeParams p) {
  const long long head = static_cast<long long>(blockIdx.y) * p.num_kv_heads * p.q_per_kv + blockIdx.x;
  const float* maxima = p.partial_max + head * p.num_splits;
  const float* sums = p.partial_sum + head * p.num_splits;
  float global_max = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) global_max = fmaxf(global_max, maxima[s]);
  float total = 0.0f;
  for (int s = 0; s < p.num_splits; ++s)
    total += sums[s] > 0.0f ? sums[s] * expf(maxima[s] - global_max) : 0.0f;
  for (int d = threadIdx.x; d < p.head_dim; d += kThreadsPerProgram) {
    float value = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      if (sums[s] > 0.0f)
        value += p.partial_out[(head * p.num_splits + s) * p.head_dim + d] * expf(maxima[s] - global_max);
    }
    p.out[head * p.head_dim + d] = value / total;
  }
}

// Host launchers: runtime shape -> template instance. Throw std::invalid_argument
// listing the compiled set for a value outside it.
inline void launch_paged_decode_nosplit(const PagedDecodeParams& p) {
  const dim3 grid(p.num_kv_heads, p.num_seqs, 1);
  KVS_DISPATCH_DTYPE(p.dtype, T,
                     KVS_DISPATCH_HEAD_DIM(p.head_dim, HD, KVS_DISPATCH_BLOCK_SIZE(p.block_size, BS, {
                                             paged_decode_nosplit<T, HD, BS><<<grid, kThreadsPerProgram>>>(p);
                                           })));
}

inline void launch_paged_decode_splitkv(const PagedDecodeParams& p) {
  const dim3 grid(p.num_kv_heads, p.num_seqs, p.num_splits);
  KVS_DISPATCH_DTYPE(p.dtype, T,
                     KVS_DISPATCH_HEAD_DIM(p.head_dim, HD, KVS_DISPATCH_BLOCK_SIZE(p.block_size, BS, {
                                             paged_decode_splitkv<T, HD, BS><<<grid, kThreadsPerProgram>>>(p);
                                           })));
  const dim3 reduce_grid(p.num_kv_heads * p.q_per_kv, p.num_seqs, 1);
  paged_decode_reduce<<<reduce_grid, kThreadsPerProgram>>>(p);
}

}  // namespace KVS_RUNTIME_NAMESPACE
}  // namespace kvsight::kernels
