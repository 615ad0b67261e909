// The portable paged-decode kernel of the cpu backend (cpu_backend.cpp runs it): the
// same two algorithms as kernels/paged_decode.cuh (each (sequence, KV head) walks its
// context with an online softmax over tiles of kTileTokens; split-KV tasks per
// (sequence, KV head, split) plus a reduce) over 16-bit or fp8 data, several adjacent
// KV heads of a sequence per task in lockstep, as the AVX2 and AVX-512 kernels. It
// uses explicit 8-lane vectors (cpu_vec8.hpp: bf16 -> fp32 is a shift or a mask, fp16
// an exact integer decode; fixed HEAD_DIM; scores for 2 heads x 4 tokens per pass with
// one shuffle reduction; a vector exp per tile), prefetches the next tile from inside
// the compute (NextTilePrefetch), and the hot entry point is cloned for x86-64-v3
// (AVX2 + FMA) with a baseline fallback. It runs everything where the CPU lacks AVX2
// (cpu_kernel_avx2.cpp), and whatever --cpu-kernel portable asks for.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../../kernels/fp8_e4m3.hpp"
#include "cpu_kernel.hpp"
#include "cpu_vec8.hpp"
#include "half.hpp"

// -std=c++20 turns off FMA contraction; the kernels want a * b + c fused.
#pragma GCC optimize("fp-contract=fast")
// Vec8 values never cross a non-inlined call, so the AVX-vs-SSE argument ABI
// note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kvsight::probes::detail {
namespace {

using kernels::kMaxGqa;
using kernels::kTileTokens;
using kernels::PagedDecodeParams;

// Row widening to fp32. bf16: a 16-bit shift or a mask (exact), 16 values per
// step as 8 32-bit words: the low halves (even elements) shifted up and the
// high halves (odd elements) masked give fp32 in a permuted order:
// out[16c + i] = x[16c + 2i], out[16c + 8 + i] = x[16c + 2i + 1]. q, K and V
// all use it, so dot products are unchanged and the P x V accumulators come
// out in that order (write_task_output restores it). fp16: widen_fp16x8
// (cpu_vec8.hpp), natural order.
template <int HEAD_DIM, bool BF16>
[[gnu::always_inline]] inline void convert_row(const std::uint16_t* __restrict source,
                                               float* __restrict out) {
  if constexpr (BF16) {
    for (int d = 0; d < HEAD_DIM; d += 16) {
      Vec8u32 words;
      std::memcpy(&words, source + d, sizeof(words));
      const Vec8u32 even = words << 16;
      const Vec8u32 odd = words & 0xFFFF0000u;
      std::memcpy(out + d, &even, sizeof(even));
      std::memcpy(out + d + 8, &odd, sizeof(odd));
    }
  } else {
    for (int d = 0; d < HEAD_DIM; d += 8) store8(out + d, widen_fp16x8(source + d));
  }
}

// fp8 E4M3 -> fp32 through a 256-entry table of the kernels' own decode
// (kernels/fp8_e4m3.hpp), so the cpu backend reads a byte as the GPUs do. A
// table-free vector decode (as for fp16) was tried and measured no faster
// (docs/measurements.md, 2026-12-06): the table is 1 KiB and stays in L1.
const float* fp8_e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> values(256);
    for (std::uint32_t byte = 0; byte < 256; ++byte) values[byte] = kernels::fp8_e4m3_to_float(byte);
    return values;
  }();
  return table.data();
}

// fp8 K/V rows: the byte table, natural order (fp8_table is fp8_e4m3_table()).
// BF16 names the q dtype and does not matter here.
template <int HEAD_DIM, bool BF16>
[[gnu::always_inline]] inline void convert_row(const std::uint8_t* __restrict source, float* __restrict out,
                                               const float* __restrict fp8_table) {
  for (int d = 0; d < HEAD_DIM; ++d) out[d] = fp8_table[source[d]];
}
// 16-bit K/V rows (above); fp8_table is unused.
template <int HEAD_DIM, bool BF16>
[[gnu::always_inline]] inline void convert_row(const std::uint16_t* __restrict source, float* __restrict out,
                                               const float*) {
  convert_row<HEAD_DIM, BF16>(source, out);
}

// A q row in the order of the K rows beside it: convert_row's, except bf16 q
// beside fp8 rows (natural order), widened by its exact shift.
template <int HEAD_DIM, bool BF16, bool FP8>
[[gnu::always_inline]] inline void convert_q_row(const std::uint16_t* __restrict source,
                                                 float* __restrict out) {
  if constexpr (BF16 && FP8) {
    for (int d = 0; d < HEAD_DIM; ++d) out[d] = bf16_to_float(source[d]);
  } else {
    convert_row<HEAD_DIM, BF16>(source, out);
  }
}

[[gnu::always_inline]] inline float horizontal_sum(Vec8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// exp for the softmax weights, 8 lanes at once (Cephes expf: range reduction by
// ln 2 in two parts, degree-6 polynomial, 2^n through the exponent bits);
// relative error ~1e-7, far inside the reference bound. Inputs are <= 0 here;
// they are clamped to [-87.3, 88.3] so 2^n stays a normal number.
[[gnu::always_inline]] inline Vec8 exp8(Vec8 x) {
  x = x < -87.3f ? Vec8{} - 87.3f : x;
  x = x > 88.3f ? Vec8{} + 88.3f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  Vec8 n = (x * 1.44269504088896341f + magic) - magic;
  Vec8 r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Vec8 y = r * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const Vec8i bits = (__builtin_convertvector(n, Vec8i) + 127) << 23;
  Vec8 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

// Sums of four dot-product partials each for two heads: a[i], b[i] are 8-lane
// partial sums of token i; returns {sum a0, .., sum a3, sum b0, .., sum b3}.
[[gnu::always_inline]] inline Vec8 reduce4x2(Vec8 a0, Vec8 a1, Vec8 a2, Vec8 a3, Vec8 b0, Vec8 b1, Vec8 b2,
                                             Vec8 b3) {
  const Vec8i even = {0, 8, 2, 10, 4, 12, 6, 14}, odd = {1, 9, 3, 11, 5, 13, 7, 15};
  const Vec8i low = {0, 1, 8, 9, 4, 5, 12, 13}, high = {2, 3, 10, 11, 6, 7, 14, 15};
  const Vec8i first = {0, 1, 2, 3, 8, 9, 10, 11}, second = {4, 5, 6, 7, 12, 13, 14, 15};
  const Vec8 a01 = __builtin_shuffle(a0, a1, even) + __builtin_shuffle(a0, a1, odd);
  const Vec8 a23 = __builtin_shuffle(a2, a3, even) + __builtin_shuffle(a2, a3, odd);
  const Vec8 a = __builtin_shuffle(a01, a23, low) + __builtin_shuffle(a01, a23, high);
  const Vec8 b01 = __builtin_shuffle(b0, b1, even) + __builtin_shuffle(b0, b1, odd);
  const Vec8 b23 = __builtin_shuffle(b2, b3, even) + __builtin_shuffle(b2, b3, odd);
  const Vec8 b = __builtin_shuffle(b01, b23, low) + __builtin_shuffle(b01, b23, high);
  return __builtin_shuffle(a, b, first) + __builtin_shuffle(a, b, second);
}

// One tile of one KV head: K widened into `tile`, the scores of the group's
// heads, the online softmax, V widened into `tile`, P x V into state.acc.
// q: padded_group rows of HEAD_DIM floats (padded rows zero, so their scores
// and weights are zero); rows: the tile's row offsets at this head.
template <int HEAD_DIM, bool BF16, typename KvElement>
[[gnu::always_inline]] inline void attend_tile(const float (*__restrict q)[HEAD_DIM], int group,
                                               int padded_group, const KvElement* k_cache,
                                               const KvElement* v_cache, const long long* rows, int count,
                                               const float* fp8_table, float (*__restrict tile)[HEAD_DIM],
                                               float (*__restrict scores)[kTileTokens], float* rescales,
                                               TaskState& state, NextTilePrefetch& next) {
  const int count4 = (count + 3) / 4 * 4;
  // K tile converted once; rows past count (last tile only) are zero.
  for (int t = 0; t < count; ++t) convert_row<HEAD_DIM, BF16>(k_cache + rows[t], tile[t], fp8_table);
  for (int t = count; t < count4; ++t) std::fill(tile[t], tile[t] + HEAD_DIM, 0.0f);
  // Scores for two heads x four tokens at a time: 8 accumulators, each K
  // value loaded feeds two FMAs, one shuffle reduction per 8 dot products.
  for (int g = 0; g < padded_group; g += 2) {
    const float* __restrict qa = q[g];
    const float* __restrict qb = q[g + 1];
    for (int t = 0; t < count4; t += 4) {
      next.issue();
      Vec8 a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
      for (int d = 0; d < HEAD_DIM; d += 8) {
        const Vec8 va = load8(qa + d), vb = load8(qb + d);
        const Vec8 k0 = load8(tile[t] + d), k1 = load8(tile[t + 1] + d);
        const Vec8 k2 = load8(tile[t + 2] + d), k3 = load8(tile[t + 3] + d);
        a0 += va * k0;
        a1 += va * k1;
        a2 += va * k2;
        a3 += va * k3;
        b0 += vb * k0;
        b1 += vb * k1;
        b2 += vb * k2;
        b3 += vb * k3;
      }
      const Vec8 sums = reduce4x2(a0, a1, a2, a3, b0, b1, b2, b3);
      std::memcpy(&scores[g][t], &sums, 4 * sizeof(float));
      std::memcpy(&scores[g + 1][t], reinterpret_cast<const float*>(&sums) + 4, 4 * sizeof(float));
    }
  }
  // One max / rescale per head per tile; weights with a vector exp.
  for (int g = 0; g < group; ++g) {
    float tile_max = -INFINITY;
    for (int t = 0; t < count; ++t) tile_max = std::max(tile_max, scores[g][t]);
    const float old_max = state.running_max[g];
    const float new_max = std::max(old_max, tile_max);
    float weight_sum = 0.0f;
    if (count == kTileTokens) {
      Vec8 total = {};
      for (int t = 0; t < kTileTokens; t += 8) {
        const Vec8 w = exp8(load8(&scores[g][t]) - new_max);
        store8(&scores[g][t], w);
        total += w;
      }
      weight_sum = horizontal_sum(total);
    } else {
      for (int t = 0; t < count; ++t) {
        scores[g][t] = std::exp(scores[g][t] - new_max);
        weight_sum += scores[g][t];
      }
      for (int t = count; t < kTileTokens; ++t) scores[g][t] = 0.0f;
    }
    const float rescale = old_max == -INFINITY ? 0.0f : std::exp(old_max - new_max);
    rescales[g] = rescale;
    state.running_sum[g] = state.running_sum[g] * rescale + weight_sum;
    state.running_max[g] = new_max;
  }
  for (int t = 0; t < count; ++t) convert_row<HEAD_DIM, BF16>(v_cache + rows[t], tile[t], fp8_table);
  // P x V for two heads x 32 dims at a time: 8 accumulators in registers
  // across the tile's tokens, each V value loaded feeds two FMAs.
  for (int g = 0; g < padded_group; g += 2) {
    const float ra = rescales[g], rb = rescales[g + 1];
    for (int d0 = 0; d0 < HEAD_DIM; d0 += 32) {
      next.issue();
      float* __restrict acc_a = state.acc + g * HEAD_DIM + d0;
      float* __restrict acc_b = state.acc + (g + 1) * HEAD_DIM + d0;
      Vec8 a0 = load8(acc_a) * ra, a1 = load8(acc_a + 8) * ra;
      Vec8 a2 = load8(acc_a + 16) * ra, a3 = load8(acc_a + 24) * ra;
      Vec8 b0 = load8(acc_b) * rb, b1 = load8(acc_b + 8) * rb;
      Vec8 b2 = load8(acc_b + 16) * rb, b3 = load8(acc_b + 24) * rb;
      for (int t = 0; t < count; ++t) {
        const float wa = scores[g][t], wb = scores[g + 1][t];
        const float* __restrict v = tile[t] + d0;
        const Vec8 v0 = load8(v), v1 = load8(v + 8), v2 = load8(v + 16), v3 = load8(v + 24);
        a0 += wa * v0;
        a1 += wa * v1;
        a2 += wa * v2;
        a3 += wa * v3;
        b0 += wb * v0;
        b1 += wb * v1;
        b2 += wb * v2;
        b3 += wb * v3;
      }
      store8(acc_a, a0);
      store8(acc_a + 8, a1);
      store8(acc_a + 16, a2);
      store8(acc_a + 24, a3);
      store8(acc_b, b0);
      store8(acc_b + 8, b1);
      store8(acc_b + 16, b2);
      store8(acc_b + 24, b3);
    }
  }
}

// Tokens [begin, end) of KV heads [first_kv_head, first_kv_head + kv_head_count)
// of one sequence, tile by tile with the heads in lockstep (each its own
// softmax state, so the results are those of one task per head): the heads
// of a token are adjacent in the paged layout, so a tile is read as
// contiguous runs (one head alone reads 256 B at a 2 KiB stride; at the
// headline shape that alone held the kernel to 0.44 of the stream read
// against 0.67 with contiguous rows, docs/measurements.md). FP8: K/V are fp8
// E4M3 bytes (p.kv_type), q stays in the BF16-selected dtype.
template <int HEAD_DIM, bool BF16, bool FP8>
[[gnu::always_inline]] inline void attend_heads(const PagedDecodeParams& p, int seq, int first_kv_head,
                                                int kv_head_count, int begin, int end, TaskState* states) {
  // q rows and scores are padded to an even head count (pairs of heads share
  // each K/V load); padded q rows are zero and padded weights are zero.
  using QRows = float[HEAD_DIM];
  alignas(kAlignment) float tile[kTileTokens][HEAD_DIM];
  alignas(kAlignment) float scores[kMaxGqa][kTileTokens];
  float rescales[kMaxGqa];
  using KvElement = std::conditional_t<FP8, std::uint8_t, std::uint16_t>;
  const float* fp8_table = FP8 ? fp8_e4m3_table() : nullptr;
  const int group = p.q_per_kv;
  const int padded_group = (group + 1) / 2 * 2;
  // q of every head of the task in fp32 (padded_group rows per KV head).
  auto* q = reinterpret_cast<QRows*>(
      task_q_scratch(static_cast<std::size_t>(kv_head_count) * padded_group * HEAD_DIM));
  const auto* q_data = static_cast<const std::uint16_t*>(p.q) +
                       (static_cast<long long>(seq) * p.num_kv_heads + first_kv_head) * group * HEAD_DIM;
  for (int g = group; g < padded_group; ++g) rescales[g] = 0.0f;
  const float scale = task_q_scale(p);  // folded into q once
  for (int h = 0; h < kv_head_count; ++h) {
    QRows* q_head = q + h * padded_group;
    TaskState& state = states[h];
    for (int g = 0; g < group; ++g) {
      const std::uint16_t* source = q_data + (static_cast<long long>(h) * group + g) * HEAD_DIM;
      convert_q_row<HEAD_DIM, BF16, FP8>(source, q_head[g]);
      for (int d = 0; d < HEAD_DIM; ++d) q_head[g][d] *= scale;
      state.running_max[g] = -INFINITY;
      state.running_sum[g] = 0.0f;
    }
    for (int g = group; g < padded_group; ++g) std::fill(q_head[g], q_head[g] + HEAD_DIM, 0.0f);
    std::fill(state.acc, state.acc + padded_group * HEAD_DIM, 0.0f);
  }
  const std::int32_t* block_table = p.block_tables + static_cast<long long>(seq) * p.max_blocks_per_seq;
  const long long first_element = static_cast<long long>(first_kv_head) * HEAD_DIM;
  const auto* k_cache = static_cast<const KvElement*>(p.k_cache) + first_element;
  const auto* v_cache = static_cast<const KvElement*>(p.v_cache) + first_element;
  // Row offsets (elements from the task's first head) of this tile. The next
  // tile's K and V rows are prefetched while this one is computed, a few lines
  // from each step of the score and P x V loops (NextTilePrefetch): blocks sit
  // at random places, so without it a thread waits on a demand miss at every
  // block boundary.
  long long rows[kTileTokens];
  constexpr int kElementBytes = static_cast<int>(sizeof(KvElement));
  NextTilePrefetch next(p, block_table, k_cache, v_cache, kv_head_count * HEAD_DIM, kElementBytes, end);
  // Issue points per tile: each head's score passes and P x V steps, per pair of heads.
  const int issue_points = kv_head_count * padded_group / 2 * (kTileTokens / 4 + HEAD_DIM / 32);
  for (int tile_start = begin; tile_start < end; tile_start += kTileTokens) {
    const int count = std::min(kTileTokens, end - tile_start);
    row_offsets(p, block_table, tile_start, count, 0, rows);
    next.queue_after(tile_start, issue_points);
    for (int h = 0; h < kv_head_count; ++h) {
      attend_tile<HEAD_DIM, BF16>(q + h * padded_group, group, padded_group, k_cache + h * HEAD_DIM,
                                  v_cache + h * HEAD_DIM, rows, count, fp8_table, tile, scores, rescales,
                                  states[h], next);
    }
    next.finish();
  }
}

}  // namespace

// Writes a finished task: its partial (split-KV) or its normalised output,
// times V's dequantization scale (1 unless fp8: FlashInfer's out *= v_scale,
// paged_decode_params.hpp; the reduce is linear in the partials, so scaling them
// scales the merged output). interleave: the order state.acc is in (see
// kPortableBf16Interleave).
void write_task_output(const PagedDecodeParams& p, bool split, int seq, int kv_head, int split_index,
                       const TaskState& state, int interleave) {
  const int group = p.q_per_kv;
  const int head_dim = p.head_dim;
  const long long first_head =
      static_cast<long long>(seq) * p.num_kv_heads * group + static_cast<long long>(kv_head) * group;
  alignas(kAlignment) float natural[256];
  for (int g = 0; g < group; ++g) {
    const float* acc = state.acc + g * head_dim;
    if (interleave > 0) {
      const int half = interleave / 2;
      for (int c = 0; c < head_dim; c += interleave) {
        for (int i = 0; i < half; ++i) {
          natural[c + 2 * i] = acc[c + i];
          natural[c + 2 * i + 1] = acc[c + half + i];
        }
      }
      acc = natural;
    }
    if (split) {
      const long long slot = (first_head + g) * p.num_splits + split_index;
      float* partial = p.partial_out + slot * head_dim;
      for (int d = 0; d < head_dim; ++d) partial[d] = acc[d] * p.v_scale;
      p.partial_max[slot] = state.running_max[g];
      p.partial_sum[slot] = state.running_sum[g];
    } else {
      float* out = p.out + (first_head + g) * head_dim;
      const float inverse = p.v_scale / state.running_sum[g];
      for (int d = 0; d < head_dim; ++d) out[d] = acc[d] * inverse;
    }
  }
}

TaskRange task_range(const PagedDecodeParams& p, bool split, int seq, int split_index) {
  const int seq_len = p.seq_lens[seq];
  const int begin = split ? std::min(seq_len, split_index * p.tokens_per_split) : 0;
  const int end = split ? std::min(seq_len, begin + p.tokens_per_split) : seq_len;
  return {begin, end};
}

namespace {

// The q dtype x K/V storage instances of one head dimension (inlined into the
// cloned entry point below, so each clone gets them all).
template <int HEAD_DIM>
[[gnu::always_inline]] inline void attend_types(const PagedDecodeParams& p, int seq, int first_kv_head,
                                                int kv_head_count, int begin, int end, TaskState* states) {
  const bool bf16 = p.dtype == kernels::ElementType::bf16;
  if (p.kv_type == kernels::KvType::fp8_e4m3) {
    return bf16 ? attend_heads<HEAD_DIM, true, true>(p, seq, first_kv_head, kv_head_count, begin, end, states)
                : attend_heads<HEAD_DIM, false, true>(p, seq, first_kv_head, kv_head_count, begin, end,
                                                      states);
  }
  return bf16
             ? attend_heads<HEAD_DIM, true, false>(p, seq, first_kv_head, kv_head_count, begin, end, states)
             : attend_heads<HEAD_DIM, false, false>(p, seq, first_kv_head, kv_head_count, begin, end, states);
}

}  // namespace

// The hot entry point, cloned for AVX2+FMA and a baseline x86-64 (KVS_CPU_CLONES,
// cpu_kernel.hpp).
KVS_CPU_CLONES void attend_portable(const PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                                    int begin, int end, TaskState* states) {
  // The lambda is inlined too, so the clone's target reaches attend_types (dispatch_head_dim).
  dispatch_head_dim(
      p.head_dim, [&](auto head_dim) __attribute__((always_inline)) {
        attend_types<decltype(head_dim)::value>(p, seq, first_kv_head, kv_head_count, begin, end, states);
      });
}

void reduce_head(const PagedDecodeParams& p, long long head) {
  const float* maxima = p.partial_max + head * p.num_splits;
  const float* sums = p.partial_sum + head * p.num_splits;
  float global_max = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) global_max = std::max(global_max, maxima[s]);
  float total = 0.0f;
  float* out = p.out + head * p.head_dim;
  std::fill(out, out + p.head_dim, 0.0f);
  for (int s = 0; s < p.num_splits; ++s) {
    if (!(sums[s] > 0.0f)) continue;  // empty split: m = -inf, l = 0
    const float weight = std::exp(maxima[s] - global_max);
    total += sums[s] * weight;
    const float* partial = p.partial_out + (head * p.num_splits + s) * p.head_dim;
    for (int d = 0; d < p.head_dim; ++d) out[d] += partial[d] * weight;
  }
  const float inverse = 1.0f / total;
  for (int d = 0; d < p.head_dim; ++d) out[d] *= inverse;
}

// Name of the portable kernel's clone this CPU gets.
std::string portable_kernel_name() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  return __builtin_cpu_supports("x86-64-v3") ? "portable (x86-64-v3 clone)" : "portable (baseline clone)";
#else
  return "portable";
#endif
}

}  // namespace kvsight::probes::detail
