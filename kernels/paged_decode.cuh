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
// Two walks of a program's tokens serve both kernels (DecodeWalker picks one per
// instance at compile time): on CUDA, where the GQA group's registers allow it, the
// warp-split walk of warp_walker.cuh (each warp its own chunks, issue #24 item 2);
// otherwise the shared-tile walk below (TileWalker).
//
// The shared-tile walk, built for bandwidth (issue #15; FlashInfer
// include/flashinfer/attention/decode.cuh for the ideas, docs/reference/kernels.md
// for the arithmetic):
//  - the physical offsets of a tile's 32 rows are computed once per tile, by 32
//    threads, one tile ahead, into shared memory: no K/V load waits on a
//    block-table load;
//  - all 16-byte copies of a tile (K and V: HEAD_DIM / 16 per thread, 8 at hd128,
//    16 at hd256) are issued before any is consumed, and the copies of tile i + 1
//    are in flight while tile i is consumed: cp.async into a second shared stage
//    on CUDA, registers on HIP (KVS_KV_STAGES, portability.cuh). On HIP that holds
//    because the loop's barriers are lds_barrier() (portability.cuh): with
//    __syncthreads() the compiler waited for every load in flight (s_waitcnt
//    vmcnt(0)) before each barrier, tile i + 1's included (issue #24); now the
//    only waits on those loads are the counted ones in store_next;
//  - the GQA group is a template parameter (1, 2, 4, 8, 16) so accumulators and
//    shared memory are sized to the group;
//  - block size 16 is compiled; any other runs with a FastDivider;
//  - K/V are the q type T or fp8 E4M3 bytes (KV = kvs_fp8_e4m3, vLLM's fp8 KV
//    cache), decoded after the copy (kernels/fp8_e4m3.hpp); the copies stay 16
//    bytes wide, 16 fp8 elements each, so an hd128 fp8 row is 8 copies, half
//    the 16-bit count; k_scale is folded into the score scale and v_scale into
//    the output (FlashInfer's decode wrapper does the same, paged_decode_params.hpp).
//
// Layout: K and V [num_blocks, block_size, num_kv_heads, head_dim], block tables
// [num_seqs, max_blocks_per_seq]; q [num_seqs, q_heads, head_dim]; accumulation
// and output in fp32.
#include "dispatch.cuh"
#include "fast_divider.hpp"
#include "paged_decode_params.hpp"
#include "portability.cuh"
#include "warp_walker.cuh"

#include <cstddef>
#include <type_traits>

namespace kvsight::kernels {
inline namespace KVS_RUNTIME_NAMESPACE {

// Rows of a K/V stage are padded by 16 bytes (8 16-bit or 16 fp8 elements):
// every row stays 16-byte aligned for cp.async and uint4 reads, and the row
// stride is HEAD_DIM x bytes / 4 + 4 words: 4 more than a multiple of 32 for
// 16-bit rows at head_dim 64, 128 and 256 and for fp8 rows at 128 and 256 (fp8
// hd64: 20 words, which still puts 8 consecutive rows on 8 different 4-bank
// groups: 0, 20, 8, 28, 16, 4, 24, 12 mod 32), so the 8 threads of a 16-byte
// shared-read phase that read the same column of 8 consecutive rows hit 8
// different 4-bank groups.
constexpr int kRowPadBytes = 16;

// Storage: the K/V element's unsigned integer (Element<KV>::Storage).
template <typename Storage, int HEAD_DIM, int GROUP>
struct DecodeShared {
  static constexpr int kRowPad = kRowPadBytes / static_cast<int>(sizeof(Storage));
  Storage k[KVS_KV_STAGES][kTileTokens][HEAD_DIM + kRowPad];
  Storage v[KVS_KV_STAGES][kTileTokens][HEAD_DIM + kRowPad];
  float q[GROUP * HEAD_DIM];
  // Element offset of each row of a tile in the K/V cache, for two tiles: the one
  // being copied and the next one (written one tile ahead).
  long long row_offset[2][kTileTokens];
  float scores[GROUP][kTileTokens];
  float running_max[GROUP];
  float running_sum[GROUP];
  float rescale[GROUP];
};

// The online softmax gives one lane of a wave to each token of a tile.
static_assert(kTileTokens <= 32, "a tile must fit the smallest wave (32 lanes)");
static_assert(kTileTokens <= kThreadsPerProgram, "one thread per tile row computes the row offsets");

// T: the q type; KV: the K/V element type (T, or kvs_fp8_e4m3).
template <typename T, typename KV, int HEAD_DIM, int GROUP, int BLOCK_SIZE>
struct TileWalker {
  static_assert(kTileTokens <= KVS_WAVE_SIZE, "a tile must fit the wave");
  using KvStorage = typename Element<KV>::Storage;
  using Shared = DecodeShared<KvStorage, HEAD_DIM, GROUP>;
  static constexpr int kPerWord = 4 / static_cast<int>(sizeof(KvStorage));  // elements per 32-bit word
  static constexpr int kPerChunk = 4 * kPerWord;                            // elements per 16-byte copy
  static constexpr int kChunksPerRow = HEAD_DIM / kPerChunk;  // 16-byte chunks of one K or V row
  static constexpr int kCopiesPerThread = kTileTokens * kChunksPerRow / kThreadsPerProgram;  // per matrix
  static_assert(kTileTokens * kChunksPerRow % kThreadsPerProgram == 0, "whole copies per thread");
  static constexpr int kAcc = accumulators_per_thread<HEAD_DIM, GROUP>();
  static_assert(offsetof(Shared, q) % 16 == 0, "the score loop reads q rows as float4");

  const PagedDecodeParams& p;
  const FastDivider block_divider;
  DecodeShared<KvStorage, HEAD_DIM, GROUP>& s;
  const int* block_table;
  const KvStorage* k_cache;
  const KvStorage* v_cache;
  int kv_head;
  // HIP: the next tile, held in registers while the current one is consumed.
  uint4 k_next[KVS_KV_STAGES == 1 ? kCopiesPerThread : 1];
  uint4 v_next[KVS_KV_STAGES == 1 ? kCopiesPerThread : 1];

  static __device__ __forceinline__ TileWalker make(const PagedDecodeParams& p, FastDivider divider, Shared& s,
                                                    const int* table, const KvStorage* k, const KvStorage* v,
                                                    int kv_head) {
    return TileWalker{p, divider, s, table, k, v, kv_head, {}, {}};
  }

  __device__ __forceinline__ long long offset_of(int token) const {
    std::uint32_t block_index = 0, within = 0;
    if constexpr (BLOCK_SIZE > 0) {
      block_index = static_cast<std::uint32_t>(token) / BLOCK_SIZE;
      within = static_cast<std::uint32_t>(token) % BLOCK_SIZE;
    } else {
      block_divider.divmod(static_cast<std::uint32_t>(token), block_index, within);
    }
    const long long block = block_table[block_index];
    const long long block_size = BLOCK_SIZE > 0 ? BLOCK_SIZE : p.block_size;
    return ((block * block_size + within) * p.num_kv_heads + kv_head) * HEAD_DIM;
  }

  // Threads 0..31: the row offsets of tokens [start, start + count) into slot.
  __device__ __forceinline__ void compute_offsets(int slot, int start, int count) {
    if (static_cast<int>(threadIdx.x) < count)
      s.row_offset[slot][threadIdx.x] = offset_of(start + threadIdx.x);
  }

  // Issues every 16-byte copy of one tile (K and V) before any is used.
  __device__ __forceinline__ void issue(int slot, int stage, int count) {
#pragma unroll
    for (int j = 0; j < kCopiesPerThread; ++j) {
      const int chunk = threadIdx.x + j * kThreadsPerProgram;
      const int row = chunk / kChunksPerRow;
      const int column = (chunk % kChunksPerRow) * kPerChunk;
      if constexpr (KVS_KV_STAGES > 1) {
        if (row < count) {
          const long long offset = s.row_offset[slot][row] + column;
          copy16_async(&s.k[stage][row][column], k_cache + offset);
          copy16_async(&s.v[stage][row][column], v_cache + offset);
        }
      } else {
        // HIP: no branch around the loads. A row past count (the last, partial
        // tile) loads row 0 again and store_next writes it into a row nobody reads
        // (scores and V stop at count). Loads behind a branch would leave the
        // compiler unsure how many of them were issued, so its wait before each
        // store in store_next would count as if only the loads of the first
        // taken branch were in flight (vmcnt(1) where 2 x copies - 1 are).
        const long long offset = s.row_offset[slot][row < count ? row : 0] + column;
        k_next[j] = *reinterpret_cast<const uint4*>(k_cache + offset);
        v_next[j] = *reinterpret_cast<const uint4*>(v_cache + offset);
      }
    }
  }

  // HIP: the registers of the next tile into the (single) stage, every row (rows
  // past the tile's count hold a copy of row 0 and are never read; see issue).
  // The compiler waits before each store for that store's load and the older
  // ones only: s_waitcnt vmcnt(2 x copies - 1) before the first, vmcnt(0) before
  // the last (docs/measurements.md, "HIP: counted waits").
  __device__ __forceinline__ void store_next() {
    if constexpr (KVS_KV_STAGES == 1) {
#pragma unroll
      for (int j = 0; j < kCopiesPerThread; ++j) {
        const int chunk = threadIdx.x + j * kThreadsPerProgram;
        const int row = chunk / kChunksPerRow;
        const int column = (chunk % kChunksPerRow) * kPerChunk;
        *reinterpret_cast<uint4*>(&s.k[0][row][column]) = k_next[j];
        *reinterpret_cast<uint4*>(&s.v[0][row][column]) = v_next[j];
      }
    }
  }

  // Online softmax over tokens [begin, end). Leaves the unnormalised accumulators
  // in acc (element e = threadIdx.x + i * threads of the [group, HEAD_DIM] output)
  // and the running max/sum in shared memory (valid after the final barrier).
  __device__ __forceinline__ void attend(float (&acc)[kAcc], int seq, int begin, int end) {
    constexpr int kWaves = kThreadsPerProgram / KVS_WAVE_SIZE;
    const int group = p.q_per_kv;
    const int q_heads = p.num_kv_heads * group;
    const int lane = threadIdx.x % KVS_WAVE_SIZE;
    const int wave = threadIdx.x / KVS_WAVE_SIZE;
    const unsigned short* q =
        static_cast<const unsigned short*>(p.q) +
        (static_cast<long long>(seq) * q_heads + static_cast<long long>(kv_head) * group) * HEAD_DIM;
    for (int e = threadIdx.x; e < group * HEAD_DIM; e += kThreadsPerProgram)
      s.q[e] = Element<T>::to_float(q[e]);
    // The softmax scale times K's dequantization scale (1 unless fp8).
    const float score_scale = p.scale * p.k_scale;
    for (int g = threadIdx.x; g < group; g += kThreadsPerProgram) {
      s.running_max[g] = -INFINITY;
      s.running_sum[g] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

    const int tiles = end > begin ? (end - begin + kTileTokens - 1) / kTileTokens : 0;
    if (tiles > 0) {
      compute_offsets(0, begin, min(kTileTokens, end - begin));
      __syncthreads();
      issue(0, 0, min(kTileTokens, end - begin));
      copy_commit();
      store_next();
    }
    for (int tile = 0; tile < tiles; ++tile) {
      const int stage = KVS_KV_STAGES > 1 ? tile & 1 : 0;
      const int tile_start = begin + tile * kTileTokens;
      const int count = min(kTileTokens, end - tile_start);
      const int next_start = tile_start + kTileTokens;
      const bool has_next = tile + 1 < tiles;
      const int next_count = has_next ? min(kTileTokens, end - next_start) : 0;
      if (has_next) compute_offsets((tile + 1) & 1, next_start, next_count);
      // (A) the next tile's offsets are visible, and nobody still reads the stage
      // the next tile goes into (it was consumed in the previous iteration).
      lds_barrier();
      if (has_next) issue((tile + 1) & 1, stage ^ (KVS_KV_STAGES > 1 ? 1 : 0), next_count);
      copy_commit();   // one group per iteration, empty on the last
      copy_wait<1>();  // all but the group just issued: this tile's copies landed
      // (B) every thread's copies of this tile are visible.
      lds_barrier();
      // Scores: one (query head, token) pair per thread; the lanes of a wave take
      // consecutive tokens of the same head (the q read is a broadcast).
      for (int pair = threadIdx.x; pair < group * kTileTokens; pair += kThreadsPerProgram) {
        const int g = pair / kTileTokens;
        const int t = pair % kTileTokens;
        float score = -INFINITY;
        if (t < count) {
          const uint4* k_row = reinterpret_cast<const uint4*>(s.k[stage][t]);
          // q as 16-byte reads, a K chunk's worth (2 or 4) at a time, and two
          // partial sums of explicit FMAs: with scalar q reads hipcc issued 2-float
          // reads, each waited for before the next, and with `+=` products it kept
          // the multiply and the add apart (docs/measurements.md, "HIP: the model").
          const float4* q_row = reinterpret_cast<const float4*>(s.q + g * HEAD_DIM);
          float dot[2] = {0.0f, 0.0f};
#pragma unroll 4
          for (int w = 0; w < kChunksPerRow; ++w) {
            const uint4 chunk = k_row[w];
            const unsigned int words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
            float q_chunk[kPerChunk];
#pragma unroll
            for (int j = 0; j < kPerChunk / 4; ++j) {
              const float4 four = q_row[w * (kPerChunk / 4) + j];
              q_chunk[4 * j] = four.x;
              q_chunk[4 * j + 1] = four.y;
              q_chunk[4 * j + 2] = four.z;
              q_chunk[4 * j + 3] = four.w;
            }
#pragma unroll
            for (int h = 0; h < 4; ++h) {
#pragma unroll
              for (int i = 0; i < kPerWord; ++i) {
                const float k = Element<KV>::to_float(element_of_word<KV>(words[h], i));
                dot[h & 1] = fmaf(q_chunk[kPerWord * h + i], k, dot[h & 1]);
              }
            }
          }
          score = (dot[0] + dot[1]) * score_scale;
        }
        s.scores[g][t] = score;
      }
      lds_barrier();  // (C)
      for (int g = wave; g < group; g += kWaves) {
        const float score = lane < kTileTokens ? s.scores[g][lane] : -INFINITY;
        const float old_max = s.running_max[g];
        const float new_max = fmaxf(old_max, wave_max(score));
        const float weight = score == -INFINITY ? 0.0f : expf(score - new_max);
        if (lane < kTileTokens) s.scores[g][lane] = weight;
        const float weight_sum = wave_sum(weight);
        if (lane == 0) {
          const float rescale = old_max == -INFINITY ? 0.0f : expf(old_max - new_max);
          s.rescale[g] = rescale;
          s.running_sum[g] = s.running_sum[g] * rescale + weight_sum;
          s.running_max[g] = new_max;
        }
      }
      lds_barrier();  // (D)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) {
        const int e = threadIdx.x + i * kThreadsPerProgram;
        if (e < group * HEAD_DIM) {
          const int g = e / HEAD_DIM;
          const int d = e % HEAD_DIM;
          float value = acc[i] * s.rescale[g];
          // A full tile (every tile but a program's last) runs a loop of known
          // length, 16 tokens an iteration: its shared-memory reads use immediate
          // offsets and 16 tokens' reads are in flight per wait. With the runtime
          // count alone, hipcc emitted one token per iteration, 10 instructions and
          // a full LDS round trip each (docs/measurements.md, "HIP: the model");
          // nvcc unrolled it 16-fold itself, the shape this keeps. The last,
          // partial tile's loop stays rolled: it runs once per program.
          const auto weighted_v = [&](int t) {
            return s.scores[g][t] * Element<KV>::to_float(s.v[stage][t][d]);
          };
          if (count == kTileTokens) {
#pragma unroll 16
            for (int t = 0; t < kTileTokens; ++t) value += weighted_v(t);
          } else {
#pragma unroll 1
            for (int t = 0; t < count; ++t) value += weighted_v(t);
          }
          acc[i] = value;
        }
      }
      if constexpr (KVS_KV_STAGES == 1) {
        if (has_next) {
          lds_barrier();  // (E) the single stage is consumed before the next tile lands in it
          store_next();
        }
      }
    }
    __syncthreads();  // running max/sum of every head visible to every thread
  }
};

// The walk an instance runs: the warp-split one (warp_walker.cuh) on CUDA where the
// group's registers allow it, the shared-tile one otherwise (HIP, and the groups
// above 8 for 16-bit K/V or above 4 for fp8).
#if KVS_HIP
template <typename T, typename KV, int HEAD_DIM, int GROUP, int BLOCK_SIZE>
using DecodeWalker = TileWalker<T, KV, HEAD_DIM, GROUP, BLOCK_SIZE>;
#else
template <typename T, typename KV, int HEAD_DIM, int GROUP, int BLOCK_SIZE>
using DecodeWalker = std::conditional_t<warp_walk_fits<KV, GROUP>(), WarpWalker<T, KV, HEAD_DIM, GROUP, BLOCK_SIZE>,
                                        TileWalker<T, KV, HEAD_DIM, GROUP, BLOCK_SIZE>>;
#endif

template <typename T, typename KV, int HEAD_DIM, int GROUP, int BLOCK_SIZE>
__global__ void __launch_bounds__(kThreadsPerProgram)
    paged_decode_nosplit(PagedDecodeParams p, FastDivider block_divider) {
  using Walker = DecodeWalker<T, KV, HEAD_DIM, GROUP, BLOCK_SIZE>;
  KVS_DYNAMIC_SHARED(shared_bytes);
  auto& shared = *reinterpret_cast<typename Walker::Shared*>(shared_bytes);
  const int kv_head = blockIdx.x;
  const int seq = blockIdx.y;
  Walker walker = Walker::make(p, block_divider, shared,
                               p.block_tables + static_cast<long long>(seq) * p.max_blocks_per_seq,
                               static_cast<const typename Walker::KvStorage*>(p.k_cache),
                               static_cast<const typename Walker::KvStorage*>(p.v_cache), kv_head);
  float acc[Walker::kAcc];
  walker.attend(acc, seq, 0, p.seq_lens[seq]);
  const int group = p.q_per_kv;
  float* out = p.out + (static_cast<long long>(seq) * p.num_kv_heads * group +
                        static_cast<long long>(kv_head) * group) *
                           HEAD_DIM;
#pragma unroll
  for (int i = 0; i < Walker::kAcc; ++i) {
    const int e = threadIdx.x + i * kThreadsPerProgram;
    if (e < group * HEAD_DIM) {
      const float sum = shared.running_sum[e / HEAD_DIM];
      out[e] = sum > 0.0f ? acc[i] * p.v_scale / sum : 0.0f;  // seq_len 0: zeros, not 0 / 0
    }
  }
}

template <typename T, typename KV, int HEAD_DIM, int GROUP, int BLOCK_SIZE>
__global__ void __launch_bounds__(kThreadsPerProgram)
    paged_decode_splitkv(PagedDecodeParams p, FastDivider block_divider) {
  using Walker = DecodeWalker<T, KV, HEAD_DIM, GROUP, BLOCK_SIZE>;
  KVS_DYNAMIC_SHARED(shared_bytes);
  auto& shared = *reinterpret_cast<typename Walker::Shared*>(shared_bytes);
  const int kv_head = blockIdx.x;
  const int seq = blockIdx.y;
  const int split = blockIdx.z;
  const int seq_len = p.seq_lens[seq];
  const int begin = min(seq_len, split * p.tokens_per_split);
  const int end = min(seq_len, begin + p.tokens_per_split);
  Walker walker = Walker::make(p, block_divider, shared,
                               p.block_tables + static_cast<long long>(seq) * p.max_blocks_per_seq,
                               static_cast<const typename Walker::KvStorage*>(p.k_cache),
                               static_cast<const typename Walker::KvStorage*>(p.v_cache), kv_head);
  float acc[Walker::kAcc];
  walker.attend(acc, seq, begin, end);
  const int group = p.q_per_kv;
  // In 32 bits first (sequences x heads <= 4096 x 1024 x 16 = 2^26): a 64-bit
  // product here kept its sign word alive across the loop (a 4-byte spill at hd256).
  const long long first_head = static_cast<long long>((seq * p.num_kv_heads + kv_head) * group);
#pragma unroll
  for (int i = 0; i < Walker::kAcc; ++i) {
    const int e = threadIdx.x + i * kThreadsPerProgram;
    if (e < group * HEAD_DIM) {
      const long long head = first_head + e / HEAD_DIM;
      // times v_scale (1 unless fp8): the reduce is linear in the partials.
      p.partial_out[(head * p.num_splits + split) * HEAD_DIM + e % HEAD_DIM] = acc[i] * p.v_scale;
    }
  }
  for (int g = threadIdx.x; g < group; g += kThreadsPerProgram) {
    p.partial_max[(first_head + g) * p.num_splits + split] = shared.running_max[g];
    p.partial_sum[(first_head + g) * p.num_splits + split] = shared.running_sum[g];
  }
}

// Block-wide max / sum over kThreadsPerProgram threads: waves first, then one
// value per wave through shared memory. Every thread gets the result.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float value, float* scratch) {
  constexpr int kWaves = kThreadsPerProgram / KVS_WAVE_SIZE;
  value = MAX ? wave_max(value) : wave_sum(value);
  const int lane = threadIdx.x % KVS_WAVE_SIZE;
  const int wave = threadIdx.x / KVS_WAVE_SIZE;
  if (lane == 0) scratch[wave] = value;
  __syncthreads();
  float total = scratch[0];
#pragma unroll
  for (int w = 1; w < kWaves; ++w) total = MAX ? fmaxf(total, scratch[w]) : total + scratch[w];
  __syncthreads();  // scratch may be reused at once
  return total;
}

// Merges the splits of one (query head, sequence): out = sum_s o_s e^(m_s - M) /
// sum_s l_s e^(m_s - M), M = max_s m_s; empty splits carry m = -inf, l = 0 and
// weigh 0. Parallel over splits as well as over head_dim (FlashInfer merges
// states the same way, attention/state.cuh): the weights are computed once into
// shared memory; then HEAD_DIM / 4 lanes each own 4 columns (16-byte loads) and
// the kThreadsPerProgram / (HEAD_DIM / 4) lane groups take every
// (threads / (HEAD_DIM / 4))-th split, so many independent loads are in flight;
// the groups' sums meet in shared memory.
template <int HEAD_DIM>
__global__ void __launch_bounds__(kThreadsPerProgram) paged_decode_reduce(PagedDecodeParams p) {
  constexpr int kLanesPerRow = HEAD_DIM / 4;
  constexpr int kSplitLanes = kThreadsPerProgram / kLanesPerRow;
  static_assert(kThreadsPerProgram % kLanesPerRow == 0, "whole rows per program");
  __shared__ float weights[kMaxSplits];
  __shared__ float scratch[kThreadsPerProgram / 32];
  __shared__ __align__(16) float sums[kSplitLanes][HEAD_DIM];
  const long long head = static_cast<long long>(blockIdx.y) * p.num_kv_heads * p.q_per_kv + blockIdx.x;
  const int splits = p.num_splits;
  const float* maxima = p.partial_max + head * splits;
  const float* lengths = p.partial_sum + head * splits;
  float local_max = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += kThreadsPerProgram) local_max = fmaxf(local_max, maxima[s]);
  const float global_max = block_reduce<true>(local_max, scratch);
  float local_total = 0.0f;
  for (int s = threadIdx.x; s < splits; s += kThreadsPerProgram) {
    const float length = lengths[s];
    const float weight = length > 0.0f ? expf(maxima[s] - global_max) : 0.0f;
    weights[s] = weight;
    local_total += weight * length;
  }
  const float total = block_reduce<false>(local_total, scratch);  // its barrier publishes weights[]
  const int column = (threadIdx.x % kLanesPerRow) * 4;
  const int split_lane = threadIdx.x / kLanesPerRow;
  const float4* rows = reinterpret_cast<const float4*>(p.partial_out + head * splits * HEAD_DIM + column);
  float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
  for (int s = split_lane; s < splits; s += kSplitLanes) {
    const float weight = weights[s];
    const float4 part = rows[static_cast<long long>(s) * (HEAD_DIM / 4)];
    if (weight > 0.0f) {  // an empty split's partial is never read into the sum
      value.x += weight * part.x;
      value.y += weight * part.y;
      value.z += weight * part.z;
      value.w += weight * part.w;
    }
  }
  *reinterpret_cast<float4*>(&sums[split_lane][column]) = value;
  __syncthreads();
  for (int d = threadIdx.x; d < HEAD_DIM; d += kThreadsPerProgram) {
    float merged = 0.0f;
#pragma unroll
    for (int lane_group = 0; lane_group < kSplitLanes; ++lane_group) merged += sums[lane_group][d];
    p.out[head * HEAD_DIM + d] = total > 0.0f ? merged / total : 0.0f;  // every split empty: zeros
  }
}

// Dynamic shared memory of an instance: its walk's Shared (block size and q type do not change it).
template <typename KV, int HEAD_DIM, int GROUP>
constexpr std::size_t decode_shared_bytes() {
  return sizeof(typename DecodeWalker<kvs_bf16, KV, HEAD_DIM, GROUP, kCompiledBlockSize>::Shared);
}

// ---- Host side.
#if !defined(KVS_SIMT_EMULATION)  // the emulation (tests/simt_emulation.hpp) launches kernels itself

// Throws std::invalid_argument (the backends turn it into an InputError naming
// "kernel") for parameters a kernel would read out of bounds with or silently
// get wrong.
inline void check_launch(const PagedDecodeParams& p, bool split) {
  auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (p.num_seqs < 1 || p.num_seqs > 65535)
    fail("num_seqs " + std::to_string(p.num_seqs) + "; allowed: 1..65535");
  if (p.num_kv_heads < 1) fail("num_kv_heads " + std::to_string(p.num_kv_heads) + "; allowed: >= 1");
  if (p.q_per_kv < 1 || p.q_per_kv > kMaxGqa)
    fail("GQA group (q_per_kv) " + std::to_string(p.q_per_kv) + "; allowed: 1.." + std::to_string(kMaxGqa));
  if (p.block_size < 1) fail("block_size " + std::to_string(p.block_size) + "; allowed: >= 1");
  if (p.max_blocks_per_seq < 1) fail("max_blocks_per_seq must be >= 1");
  if (!split) return;
  if (p.num_splits < 1 || p.num_splits > kMaxSplits)
    fail("num_splits " + std::to_string(p.num_splits) + "; allowed: 1.." + std::to_string(kMaxSplits));
  if (p.tokens_per_split < 1)
    fail("tokens_per_split " + std::to_string(p.tokens_per_split) + "; allowed: >= 1");
  // The splits must cover the longest context the block tables can hold: more
  // than (max_blocks_per_seq - 1) x block_size tokens, or a tail would be dropped.
  const long long covered = static_cast<long long>(p.num_splits) * p.tokens_per_split;
  const long long longest_floor = static_cast<long long>(p.max_blocks_per_seq - 1) * p.block_size;
  if (covered <= longest_floor || covered > (1ll << 31) - 1)
    fail("num_splits x tokens_per_split = " + std::to_string(covered) +
         " does not cover a context of more than " + std::to_string(longest_floor) +
         " tokens (or passes 2^31 - 1)");
}

// Raises a kernel's dynamic shared-memory limit once (CUDA needs it above 48 KiB).
template <typename Kernel>
inline void allow_shared(Kernel kernel, std::size_t bytes) {
  const cudaError_t error =
      cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string("setting the shared-memory limit of a paged-decode kernel to ") +
                             std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(error));
  }
}

template <typename T, typename KV, int HD, int GROUP, int BS, bool SPLIT>
struct DecodeInstance {
  static constexpr std::size_t kShared = decode_shared_bytes<KV, HD, GROUP>();
  static auto kernel() {
    if constexpr (SPLIT) {
      return &paged_decode_splitkv<T, KV, HD, GROUP, BS>;
    } else {
      return &paged_decode_nosplit<T, KV, HD, GROUP, BS>;
    }
  }
  static void prepare() {
    static const bool done = (allow_shared(kernel(), kShared), true);
    (void)done;
  }
  static void launch(const PagedDecodeParams& p, cudaStream_t stream) {
    prepare();
    const dim3 grid(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.num_seqs),
                    SPLIT ? static_cast<unsigned>(p.num_splits) : 1u);
    const FastDivider divider(static_cast<std::uint32_t>(p.block_size));
    if constexpr (SPLIT) {
      paged_decode_splitkv<T, KV, HD, GROUP, BS><<<grid, kThreadsPerProgram, kShared, stream>>>(p, divider);
    } else {
      paged_decode_nosplit<T, KV, HD, GROUP, BS><<<grid, kThreadsPerProgram, kShared, stream>>>(p, divider);
    }
  }
  static int ctas_per_multiprocessor() {
    prepare();
    int ctas = 0;
    const cudaError_t error =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel(), kThreadsPerProgram, kShared);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::runtime_error(std::string("occupancy query failed: ") + cudaGetErrorString(error));
    }
    return ctas;
  }
};

#define KVS_DISPATCH_DECODE(p, T, KV, HD, GROUP, BS, ...)            \
  KVS_DISPATCH_DTYPE((p).dtype, T,                                   \
                     KVS_DISPATCH_KV_TYPE(                           \
                         (p).kv_type, T, KV,                         \
                         KVS_DISPATCH_HEAD_DIM(                      \
                             (p).head_dim, HD,                       \
                             KVS_DISPATCH_GROUP((p).q_per_kv, GROUP, \
                                                KVS_DISPATCH_BLOCK_SIZE((p).block_size, BS, __VA_ARGS__)))))

// Host launchers: runtime shape -> template instance. Throw std::invalid_argument
// listing the compiled set for a value outside it.
inline void launch_paged_decode_nosplit(const PagedDecodeParams& p, cudaStream_t stream = 0) {
  check_launch(p, false);
  KVS_DISPATCH_DECODE(p, T, KV, HD, GROUP, BS,
                      { DecodeInstance<T, KV, HD, GROUP, BS, false>::launch(p, stream); });
}

inline void launch_paged_decode_splitkv(const PagedDecodeParams& p, cudaStream_t stream = 0) {
  check_launch(p, true);
  KVS_DISPATCH_DECODE(p, T, KV, HD, GROUP, BS,
                      { DecodeInstance<T, KV, HD, GROUP, BS, true>::launch(p, stream); });
  const dim3 reduce_grid(static_cast<unsigned>(p.num_kv_heads * p.q_per_kv),
                         static_cast<unsigned>(p.num_seqs), 1);
  KVS_DISPATCH_HEAD_DIM(p.head_dim, HD,
                        { paged_decode_reduce<HD><<<reduce_grid, kThreadsPerProgram, 0, stream>>>(p); });
}

// Programs (CTAs) of the split kernel for this shape that one SM/CU holds at once:
// the input of the split planner (planner/include/kvsight/split_plan.hpp).
inline int paged_decode_splitkv_ctas_per_multiprocessor(const PagedDecodeParams& p) {
  int ctas = 0;
  KVS_DISPATCH_DECODE(p, T, KV, HD, GROUP, BS,
                      { ctas = DecodeInstance<T, KV, HD, GROUP, BS, true>::ctas_per_multiprocessor(); });
  return ctas;
}

#endif  // !KVS_SIMT_EMULATION

}  // namespace KVS_RUNTIME_NAMESPACE
}  // namespace kvsight::kernels
