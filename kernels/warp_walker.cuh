#pragma once
// The warp-split walk of a paged-decode program (CUDA; issue #24 item 2).
//
// Why: the shared-tile walk (TileWalker, paged_decode.cuh) has every warp read the
// whole K tile from shared memory and V 16 bits a lane at a time, so at the
// headline shape an SM needs more issue slots and shared-memory wavefronts per
// tile than HBM needs cycles to deliver it (docs/measurements.md, "Issue and
// shared memory per tile": 56-77 % of H200 HBM predicted, 37-54 % at the cliff
// shape). Here each warp owns a quarter of the program's tokens and reads each
// byte of K and V from shared memory once, with 16-byte loads:
//  - the program's tokens are cut into chunks of 8 KiB of K and V (kChunkTokens
//    rows); warp w takes chunks w, w + 4, w + 8, ... and walks them alone: its own
//    two shared-memory stages, its own cp.async groups, __syncwarp() only, no
//    block barrier until the walk is over (FlashInfer's decode splits a tile's
//    tokens across warps the same way, include/flashinfer/attention/decode.cuh,
//    bdz; docs/reference/kernels.md "Warp-split decode");
//  - a row of head_dim elements is kLanesPerRow lanes x 16 bytes; a warp step
//    covers kRowsPerStep = 32 / kLanesPerRow rows with one LDS.128 per lane;
//  - q (times the score scale and log2 e) and the output accumulators of the
//    lane's 16-byte column, for every head of the GQA group, stay in registers:
//    a K element is decoded once and used by every head, a V element likewise;
//  - the group's dot products are summed across a row's lanes by a reduce-scatter
//    (each butterfly step halves the heads a lane keeps): group - 1 shuffles, then
//    log2(kLanesPerRow / group) more, instead of group x log2(kLanesPerRow);
//  - softmax is online per chunk, not per token: one max, one rescale of the
//    accumulators per chunk; exp2 of log2-scaled scores (MUFU.EX2);
//  - at the end the warps' states (max, sum, accumulators) merge through shared
//    memory into the TileWalker's output layout, so the kernels' epilogues and the
//    reduce are unchanged.
// Registers bound the group: q and the accumulators are 2 x group x (16 / bytes of a
// K/V element) floats a lane, so the walk serves group x elements-per-16-bytes <= 64
// (group <= 8 for 16-bit K/V, <= 4 for fp8); larger groups keep the shared-tile walk
// (DecodeWalker, paged_decode.cuh). HIP keeps the shared-tile walk too: its counted
// waits are proven for that loop (docs/measurements.md, "HIP: counted waits") and a
// 64-lane wave needs another lane map.
#include <cmath>

#include "fast_divider.hpp"
#include "paged_decode_params.hpp"
#include "portability.cuh"

#if !KVS_HIP
namespace kvsight::kernels {
inline namespace KVS_RUNTIME_NAMESPACE {

constexpr int kWarpsPerProgram = kThreadsPerProgram / 32;
constexpr int kStepsPerChunk = 8;  // LDS.128 of K (and of V) per lane per chunk: 8 x 512 B = 4 KiB each

template <typename KvStorage, int HEAD_DIM>
struct WarpLanes {
  static constexpr int kPerChunk = 16 / static_cast<int>(sizeof(KvStorage));  // elements per 16 bytes
  static constexpr int kLanesPerRow = HEAD_DIM / kPerChunk;                   // 4 .. 32
  static constexpr int kRowsPerStep = 32 / kLanesPerRow;                      // 1 .. 8
  static constexpr int kChunkTokens = kStepsPerChunk * kRowsPerStep;          // 8 .. 64
  static_assert(kLanesPerRow >= 1 && kLanesPerRow <= 32 && 32 % kLanesPerRow == 0, "a row is 1..32 lanes");
};

template <typename KvStorage, int HEAD_DIM, int GROUP>
struct WarpShared {
  using Lanes = WarpLanes<KvStorage, HEAD_DIM>;
  struct Stages {
    KvStorage k[2][Lanes::kChunkTokens][HEAD_DIM];
    KvStorage v[2][Lanes::kChunkTokens][HEAD_DIM];
    long long row_offset[2][Lanes::kChunkTokens];  // element offsets of two chunks' rows
  };
  // The stages while the warps walk; the warps' scaled accumulators once they are done.
  union {
    Stages warp[kWarpsPerProgram];
    float merged[kWarpsPerProgram][GROUP][HEAD_DIM];
  };
  float warp_max[kWarpsPerProgram][GROUP];  // log2 units
  float warp_sum[kWarpsPerProgram][GROUP];
  float running_max[GROUP];  // natural units, as TileWalker's
  float running_sum[GROUP];
};

// Whether the warp-split walk serves this instance (registers: see the top of the file).
template <typename KV, int GROUP>
constexpr bool warp_walk_fits() {
  return GROUP * (16 / static_cast<int>(sizeof(typename Element<KV>::Storage))) <= 64;
}

template <typename T, typename KV, int HEAD_DIM, int GROUP, int BLOCK_SIZE>
struct WarpWalker {
  using KvStorage = typename Element<KV>::Storage;
  using Shared = WarpShared<KvStorage, HEAD_DIM, GROUP>;
  using Lanes = WarpLanes<KvStorage, HEAD_DIM>;
  static constexpr int kPerChunk = Lanes::kPerChunk;
  static constexpr int kLanesPerRow = Lanes::kLanesPerRow;
  static constexpr int kRowsPerStep = Lanes::kRowsPerStep;
  static constexpr int kChunkTokens = Lanes::kChunkTokens;
  static constexpr int kPerWord = 4 / static_cast<int>(sizeof(KvStorage));
  // After the reduce-scatter a row's lanes hold head (lane % kLanesPerRow) / kLanesPerHead.
  static constexpr int kLanesPerHead = kLanesPerRow / GROUP;
  static constexpr int kOffsetsPerLane = (kChunkTokens + 31) / 32;
  static constexpr int kAcc = accumulators_per_thread<HEAD_DIM, GROUP>();
  static_assert(warp_walk_fits<KV, GROUP>(), "the group's q and accumulators must fit in registers");
  static_assert(kLanesPerHead >= 1, "a row has a lane per head");
  static_assert(sizeof(typename Element<T>::Storage) == 2, "q is 16-bit");

  const PagedDecodeParams& p;
  const FastDivider block_divider;
  Shared& s;
  const int* block_table;
  const KvStorage* k_cache;
  const KvStorage* v_cache;
  int kv_head;

  static __device__ __forceinline__ WarpWalker make(const PagedDecodeParams& p, FastDivider divider, Shared& s,
                                                    const int* table, const KvStorage* k, const KvStorage* v,
                                                    int kv_head) {
    return WarpWalker{p, divider, s, table, k, v, kv_head};
  }

  __device__ __forceinline__ void split_token(int token, std::uint32_t& block_index, std::uint32_t& within) const {
    if constexpr (BLOCK_SIZE > 0) {
      block_index = static_cast<std::uint32_t>(token) / BLOCK_SIZE;
      within = static_cast<std::uint32_t>(token) % BLOCK_SIZE;
    } else {
      block_divider.divmod(static_cast<std::uint32_t>(token), block_index, within);
    }
  }

  // The block numbers of a chunk's rows this lane resolves (rows lane, lane + 32):
  // loaded here, stored as offsets by store_offsets after the current chunk's math,
  // so the block-table latency hides behind it.
  __device__ __forceinline__ void load_blocks(int lane, int start, int count, int (&blocks)[kOffsetsPerLane]) const {
#pragma unroll
    for (int j = 0; j < kOffsetsPerLane; ++j) {
      const int row = lane + 32 * j;
      std::uint32_t block_index = 0, within = 0;
      if (row < count) split_token(start + row, block_index, within);
      blocks[j] = row < count ? block_table[block_index] : 0;
    }
  }

  __device__ __forceinline__ void store_offsets(int lane, long long (&slot)[kChunkTokens], int start, int count,
                                                const int (&blocks)[kOffsetsPerLane]) const {
    const long long block_size = BLOCK_SIZE > 0 ? BLOCK_SIZE : p.block_size;
#pragma unroll
    for (int j = 0; j < kOffsetsPerLane; ++j) {
      const int row = lane + 32 * j;
      if (row < count) {
        std::uint32_t block_index = 0, within = 0;
        split_token(start + row, block_index, within);
        slot[row] = ((blocks[j] * block_size + within) * p.num_kv_heads + kv_head) * HEAD_DIM;
      }
    }
  }

  // Every 16-byte copy of a chunk's K and V rows, one commit group; rows past count
  // are zero-filled (no global read) so that a weight of 0 never meets a NaN.
  __device__ __forceinline__ void issue(typename Shared::Stages& mine, int stage, int slot, int lane,
                                        int count) const {
    const int row_in_step = lane / kLanesPerRow;
    const int column = (lane % kLanesPerRow) * kPerChunk;
#pragma unroll
    for (int step = 0; step < kStepsPerChunk; ++step) {
      const int row = step * kRowsPerStep + row_in_step;
      const bool valid = row < count;
      const long long offset = mine.row_offset[slot][valid ? row : 0] + column;
      copy16_async_or_zero(&mine.k[stage][row][column], k_cache + offset, valid);
      copy16_async_or_zero(&mine.v[stage][row][column], v_cache + offset, valid);
    }
  }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(KVS_SIMT_EMULATION)
  static constexpr bool kHardwareFp8 = sizeof(KvStorage) == 1;
#else
  static constexpr bool kHardwareFp8 = false;
#endif

  static __device__ __forceinline__ void decode(const uint4& chunk, float (&out)[kPerChunk]) {
    const unsigned int words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
    if constexpr (kHardwareFp8) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(KVS_SIMT_EMULATION)
      // sm_89+: two fp8 E4M3 bytes to two fp16 in one cvt.rn.f16x2.e4m3x2 (the low byte to the
      // low half), then to fp32. Exact like kernels/fp8_e4m3.hpp's decode for every finite byte
      // (an E4M3 value is an fp16 value); NaN stays NaN. About a quarter of its instructions per
      // element (docs/reference/kernels.md, "fp8 E4M3 K/V").
#pragma unroll
      for (int h = 0; h < 4; ++h) {
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          const __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2(
              static_cast<__nv_fp8x2_storage_t>(words[h] >> (16 * pair)), __NV_E4M3);
          const float2 values = __half22float2(__half2(halves));
          out[h * 4 + pair * 2] = values.x;
          out[h * 4 + pair * 2 + 1] = values.y;
        }
      }
#endif
    } else {
#pragma unroll
      for (int h = 0; h < 4; ++h) {
#pragma unroll
        for (int i = 0; i < kPerWord; ++i)
          out[h * kPerWord + i] = Element<KV>::to_float(element_of_word<KV>(words[h], i));
      }
    }
  }

  // Sums each head's partial dot product over a row's kLanesPerRow lanes. Step m
  // (m = kLanesPerRow / 2, / 4, ...) while a lane holds n > 1 heads: the lane with
  // bit m set keeps the upper n / 2 and sends the lower, its partner the reverse.
  // Then plain butterflies over the remaining bits. Returns the sum for head
  // (lane % kLanesPerRow) / kLanesPerHead.
  static __device__ __forceinline__ float reduce_scatter(float (&d)[GROUP], int lane) {
#pragma unroll
    for (int n = GROUP, mask = kLanesPerRow / 2; n > 1; n /= 2, mask /= 2) {
      const bool upper = (lane & mask) != 0;
#pragma unroll
      for (int i = 0; i < n / 2; ++i) {
        const float keep = upper ? d[i + n / 2] : d[i];
        const float send = upper ? d[i] : d[i + n / 2];
        d[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
      }
    }
    float sum = d[0];
#pragma unroll
    for (int mask = kLanesPerHead / 2; mask > 0; mask /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, mask);
    return sum;
  }

  // Online softmax over tokens [begin, end): the TileWalker's contract. Leaves the
  // unnormalised accumulators in acc (element e = threadIdx.x + i x threads of the
  // [group, HEAD_DIM] output) and s.running_max / running_sum (natural units),
  // valid after the final barrier.
  __device__ __forceinline__ void attend(float (&acc)[kAcc], int seq, int begin, int end) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int row_in_step = lane / kLanesPerRow;
    const int column = (lane % kLanesPerRow) * kPerChunk;
    const int first_lane_of_row = row_in_step * kLanesPerRow;
    auto& mine = s.warp[warp];

    // q of this lane's column for every head, times scale x k_scale x log2(e):
    // scores come out in log2 units, ready for exp2.
    const int group = p.q_per_kv;
    const float score_scale = p.scale * p.k_scale * 1.4426950408889634f;
    const unsigned short* q_heads = static_cast<const unsigned short*>(p.q) +
                                    (static_cast<long long>(seq) * p.num_kv_heads * group +
                                     static_cast<long long>(kv_head) * group) *
                                        HEAD_DIM +
                                    column;
    float q[GROUP][kPerChunk];
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
#pragma unroll
      for (int i = 0; i < kPerChunk; ++i)
        q[g][i] = g < group ? Element<T>::to_float(q_heads[g * HEAD_DIM + i]) * score_scale : 0.0f;
    }
    float out[GROUP][kPerChunk];
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
#pragma unroll
      for (int i = 0; i < kPerChunk; ++i) out[g][i] = 0.0f;
    }
    float run_max = -INFINITY;  // this lane's head, log2 units, equal on every lane of the head
    float run_sum = 0.0f;       // this lane's head, over this lane's rows only (rows merge at the end)

    const int tokens = end > begin ? end - begin : 0;
    const int chunks = (tokens + kChunkTokens - 1) / kChunkTokens;
    const int my_chunks = chunks > warp ? (chunks - warp + kWarpsPerProgram - 1) / kWarpsPerProgram : 0;
    auto chunk_start = [&](int i) { return begin + (warp + i * kWarpsPerProgram) * kChunkTokens; };
    auto chunk_count = [&](int i) { return min(kChunkTokens, end - chunk_start(i)); };

    int blocks[kOffsetsPerLane];
    if (my_chunks > 0) {
      load_blocks(lane, chunk_start(0), chunk_count(0), blocks);
      store_offsets(lane, mine.row_offset[0], chunk_start(0), chunk_count(0), blocks);
      __syncwarp();
      issue(mine, 0, 0, lane, chunk_count(0));
    }
    copy_commit();
    if (my_chunks > 1) {
      load_blocks(lane, chunk_start(1), chunk_count(1), blocks);
      store_offsets(lane, mine.row_offset[1], chunk_start(1), chunk_count(1), blocks);
    }
    __syncwarp();

    for (int i = 0; i < my_chunks; ++i) {
      const int stage = i & 1;
      if (i + 1 < my_chunks) issue(mine, stage ^ 1, stage ^ 1, lane, chunk_count(i + 1));
      copy_commit();  // one group per chunk, empty on the last
      const bool has_after_next = i + 2 < my_chunks;
      if (has_after_next) load_blocks(lane, chunk_start(i + 2), chunk_count(i + 2), blocks);
      copy_wait<1>();  // all but the group just issued: this chunk's rows landed
      __syncwarp();    // and every lane's copies are visible

      const int start = chunk_start(i);
      // Scores: kStepsPerChunk steps of kRowsPerStep rows; a lane ends each with the
      // score of (its head, its row).
      float weight[kStepsPerChunk];
#pragma unroll
      for (int step = 0; step < kStepsPerChunk; ++step) {
        const int row = step * kRowsPerStep + row_in_step;
        float k[kPerChunk];
        decode(*reinterpret_cast<const uint4*>(&mine.k[stage][row][column]), k);
        float dot[GROUP];
#pragma unroll
        for (int g = 0; g < GROUP; ++g) {
          float sum = 0.0f;
#pragma unroll
          for (int e = 0; e < kPerChunk; ++e) sum += q[g][e] * k[e];
          dot[g] = sum;
        }
        const float score = reduce_scatter(dot, lane);
        weight[step] = start + row < end ? score : -INFINITY;
      }
      // The chunk's max per head: over this lane's steps, then over the rows.
      float chunk_max = weight[0];
#pragma unroll
      for (int step = 1; step < kStepsPerChunk; ++step) chunk_max = fmaxf(chunk_max, weight[step]);
#pragma unroll
      for (int mask = kLanesPerRow; mask < 32; mask *= 2)
        chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, mask));
      const float new_max = fmaxf(run_max, chunk_max);
      const float rescale = run_max == -INFINITY ? 0.0f : exp2f(run_max - new_max);
      float weight_sum = 0.0f;
#pragma unroll
      for (int step = 0; step < kStepsPerChunk; ++step) {
        weight[step] = weight[step] == -INFINITY ? 0.0f : exp2f(weight[step] - new_max);
        weight_sum += weight[step];
      }
      run_sum = run_sum * rescale + weight_sum;
      run_max = new_max;
#pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        const float head_rescale = __shfl_sync(0xffffffffu, rescale, first_lane_of_row + g * kLanesPerHead);
#pragma unroll
        for (int e = 0; e < kPerChunk; ++e) out[g][e] *= head_rescale;
      }
      // V: each lane its row's element columns, every head's weight from the lane holding it.
#pragma unroll
      for (int step = 0; step < kStepsPerChunk; ++step) {
        const int row = step * kRowsPerStep + row_in_step;
        float v[kPerChunk];
        decode(*reinterpret_cast<const uint4*>(&mine.v[stage][row][column]), v);
#pragma unroll
        for (int g = 0; g < GROUP; ++g) {
          const float w = __shfl_sync(0xffffffffu, weight[step], first_lane_of_row + g * kLanesPerHead);
#pragma unroll
          for (int e = 0; e < kPerChunk; ++e) out[g][e] += w * v[e];
        }
      }
      if (has_after_next) store_offsets(lane, mine.row_offset[stage], chunk_start(i + 2), chunk_count(i + 2), blocks);
      __syncwarp();  // this stage and offset slot are free for chunk i + 2
    }

    // Rows of the warp: one state per head (the max is already common to them).
#pragma unroll
    for (int mask = kLanesPerRow; mask < 32; mask *= 2) {
      run_sum += __shfl_xor_sync(0xffffffffu, run_sum, mask);
#pragma unroll
      for (int g = 0; g < GROUP; ++g) {
#pragma unroll
        for (int e = 0; e < kPerChunk; ++e) out[g][e] += __shfl_xor_sync(0xffffffffu, out[g][e], mask);
      }
    }
    if (lane < kLanesPerRow && lane % kLanesPerHead == 0) {
      s.warp_max[warp][lane / kLanesPerHead] = run_max;
      s.warp_sum[warp][lane / kLanesPerHead] = run_sum;
    }
    __syncthreads();  // every warp is done with its stages (merged[] reuses them); maxima published
    if (lane < kLanesPerRow) {
#pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        float program_max = s.warp_max[0][g];
#pragma unroll
        for (int w = 1; w < kWarpsPerProgram; ++w) program_max = fmaxf(program_max, s.warp_max[w][g]);
        const float own = s.warp_max[warp][g];
        const float factor = own == -INFINITY ? 0.0f : exp2f(own - program_max);
#pragma unroll
        for (int e = 0; e < kPerChunk; ++e) s.merged[warp][g][column + e] = out[g][e] * factor;
      }
    }
    for (int g = threadIdx.x; g < GROUP; g += kThreadsPerProgram) {
      float program_max = s.warp_max[0][g];
      for (int w = 1; w < kWarpsPerProgram; ++w) program_max = fmaxf(program_max, s.warp_max[w][g]);
      float sum = 0.0f;
      for (int w = 0; w < kWarpsPerProgram; ++w) {
        const float own = s.warp_max[w][g];
        sum += own == -INFINITY ? 0.0f : s.warp_sum[w][g] * exp2f(own - program_max);
      }
      s.running_max[g] = program_max * 0.6931471805599453f;  // log2 units -> natural
      s.running_sum[g] = sum;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const int e = threadIdx.x + i * kThreadsPerProgram;
      float value = 0.0f;
      if (e < GROUP * HEAD_DIM) {
#pragma unroll
        for (int w = 0; w < kWarpsPerProgram; ++w) value += s.merged[w][e / HEAD_DIM][e % HEAD_DIM];
      }
      acc[i] = value;
    }
  }
};

}  // namespace KVS_RUNTIME_NAMESPACE
}  // namespace kvsight::kernels
#endif  // !KVS_HIP
