// The cpu backend's AVX2 + FMA + F16C paged-decode kernel, for bf16 and fp16
// q/K/V and for fp8 E4M3 K/V beside a bf16 or fp16 q: the same algorithm as
// attend_range in cpu_kernel_portable.cpp (each (sequence, KV head) walks its
// token range in tiles of 32 with an online softmax; split-KV partials are
// reduced by the backend), laid out as the AVX-512 BF16 kernel
// (cpu_kernel_avx512.cpp) at 8 lanes.
//
// Why it exists: on an x86-64 CPU without AVX-512 BF16 (AMD Zen 2/3, Intel
// before Sapphire Rapids) every probe took the portable kernel, which is
// bound by instructions at ~27-30% of `probe bandwidth` (issue #15 item 7).
// Here:
//  - fp16 K and V are widened 8 elements at a time in natural order with
//    VCVTPH2PS (F16C; exact, subnormals included). bf16 is widened 16 at a
//    time from one 32-byte load: a 16-bit left shift gives the 8 even
//    elements as fp32 and a mask of the high halves the 8 odd ones (both
//    exact), two single-uop ALU instructions where VPMOVZXWD + shift took two
//    loads, two shuffles and two shifts. The kernel is bound by its compute,
//    not by memory (docs/measurements.md: the tile reads alone run at ~15 GB/s
//    on one core, the whole kernel at ~6), so uops per element are the lever.
//    q is widened the same way, so each score's dot product pairs the same
//    elements; the accumulators of P x V come out in that even/odd order per
//    16 dimensions (kAvx2Bf16Interleave) and write_task_output restores it.
//  - fp8 E4M3 K and V (issue #24 item 5: the portable kernel's byte table ran
//    at 0.13-0.15 of the stream read) are widened 16 at a time through fp16
//    with integer steps and VCVTPH2PS (widen16, with the argument); the rest
//    is the fp16 path.
//  - each K vector feeds up to 4 query heads x 2 tokens of FMAs, and 8 dot
//    products are reduced to one vector of 8 scores with 6 VHADDPS + 2 lane
//    permutes (instead of a horizontal sum each).
//  - P x V keeps 4 query heads x 16 dimensions of accumulators in registers
//    across the tile's tokens, each V vector feeding 4 FMAs.
//  - one task runs several adjacent KV heads of a sequence (with 16-token
//    blocks and 8 KV heads a block is one contiguous 32 KiB run) and, on CPUs
//    where it pays (dense_tile_reads_pay, cpu_backend.cpp), first loads each
//    64-byte line of the tile's rows for all of them (four streams: K and V
//    of both halves of the tile), as the AVX-512 kernel does.
//  - while a tile is computed, the next tile's lines are prefetched towards
//    L2 a few at a time from inside the score and P x V loops
//    (NextTilePrefetch), so the DRAM misses of tile i+1 overlap the FMAs of
//    tile i instead of following them: +25-60% on the split-KV probe shape
//    (docs/measurements.md, 2026-12-02).
// Every function that uses the instructions carries the target attribute, so
// the rest of the binary stays baseline x86-64 and this code runs only after
// cpu_has_avx2_f16c() said so.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu_kernel.hpp"
#include "kvsight/error.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KVS_AVX2_KERNEL 1
#else
#define KVS_AVX2_KERNEL 0
#endif

namespace kvsight::probes::detail {

#if KVS_AVX2_KERNEL

bool cpu_has_avx2_f16c() {
  __builtin_cpu_init();
  // libgcc / compiler-rt check that the OS saves the YMM state (XCR0) for "avx".
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

#define KVS_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KVS_AVX2_INLINE KVS_AVX2 __attribute__((always_inline)) inline

namespace {

using kernels::kMaxGqa;
using kernels::PagedDecodeParams;

constexpr int kTile = 32;
static_assert(kernels::kTileTokens == kTile, "the cpu kernels use the device kernels' tile");
// Rows past the end of the last tile read this; their scores are masked.
alignas(64) const std::uint16_t kZeroRow[256] = {};

// 8 consecutive 16-bit values widened to fp32, natural order (q; bf16 only
// beside fp8 rows).
template <bool BF16>
KVS_AVX2_INLINE __m256 widen8(const std::uint16_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (BF16) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  } else {
    return _mm256_cvtph_ps(raw);
  }
}

// 16 consecutive elements of a row as two fp32 vectors, first and second:
//  - bf16: the 8 even-indexed elements (each 32-bit word's low half moved up)
//    and the 8 odd-indexed ones (the high halves, low bits cleared); exact,
//    bf16 is the top half of an fp32. q is widened in the same order.
//  - fp16: elements 0-7 and 8-15 (VCVTPH2PS, exact, subnormals included).
//  - fp8 E4M3: elements 0-7 and 8-15 times 2^-8 (kFp8ThroughFp16): each byte
//    S.EEEE.MMM becomes the fp16 S.0EEEE.MMM0000000, whose value is exactly
//    the E4M3 value / 2^8 (exponent bias 15 instead of 7), E4M3 subnormals
//    (m x 2^-9) landing on fp16 subnormals (m x 2^-17); the codes 0x7F / 0xFF
//    (NaN in E4M3, no infinities) get an all-ones exponent, a quiet NaN
//    (kernels/fp8_e4m3.hpp decodes them to NaN too). Then VCVTPH2PS as fp16:
//    7 integer instructions per 16 elements instead of a table lookup each.
struct Wide16 {
  __m256 first, second;
};
template <KvRows R>
KVS_AVX2_INLINE Wide16 widen16(const KvRowElement<R>* p) {
  if constexpr (R == KvRows::bf16) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(raw, 16)),
            _mm256_castsi256_ps(_mm256_and_si256(raw, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))))};
  } else if constexpr (R == KvRows::fp16) {
    return {widen8<false>(p), widen8<false>(p + 8)};
  } else {
    // byte << 7 is 0.S.EEEE.MMM.0000000; adding its bit 14 to itself carries
    // the sign into bit 15: S.0EEEE.MMM0000000.
    const __m256i byte = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i shifted = _mm256_slli_epi16(byte, 7);
    const __m256i finite = _mm256_add_epi16(shifted, _mm256_and_si256(shifted, _mm256_set1_epi16(0x4000)));
    const __m256i all_ones = _mm256_set1_epi16(0x3F80);  // EEEE.MMM all ones: NaN
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(shifted, all_ones), all_ones);
    const __m256i half = _mm256_or_si256(finite, _mm256_and_si256(nan, _mm256_set1_epi16(0x7C00)));
    return {_mm256_cvtph_ps(_mm256_castsi256_si128(half)),
            _mm256_cvtph_ps(_mm256_extracti128_si256(half, 1))};
  }
}

// exp of x <= 0, 8 lanes: the Cephes expf of the portable kernel's exp8
// (cpu_kernel_portable.cpp), relative error ~1e-7; x clamped at -87.3.
KVS_AVX2_INLINE __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_fmadd_ps(r, _mm256_set1_ps(1.9875691500e-4f), _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}

// The 8 sums of v[0..7] in order: hadd pairs within 128-bit lanes, then the
// two lanes added.
KVS_AVX2_INLINE __m256 reduce8(const __m256 (&v)[8]) {
  const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

KVS_AVX2_INLINE float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
KVS_AVX2_INLINE float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Loads every 64-byte line of the tile's rows (`elements` 16-bit values at each
// row offset, in K and in V) and discards them, four streams at once (K and V
// of the first and second half of the rows), as touch_tile in the AVX-512
// kernel (numbers there and in docs/measurements.md).
template <typename Element>
KVS_AVX2_INLINE void touch_tile(const Element* k_base, const Element* v_base, const long long* offsets,
                                int count, int elements) {
  constexpr int kLine = 64 / static_cast<int>(sizeof(Element));  // elements per 64-byte line
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  const int half = (count + 1) / 2;
  for (int t = 0; t < half; ++t) {
    const int u = t + half < count ? t + half : t;
    for (int e = 0; e < elements; e += kLine) {
      s0 = _mm256_or_si256(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k_base + offsets[t] + e)));
      s1 = _mm256_or_si256(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v_base + offsets[t] + e)));
      s2 = _mm256_or_si256(s2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k_base + offsets[u] + e)));
      s3 = _mm256_or_si256(s3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v_base + offsets[u] + e)));
    }
  }
  __asm__ volatile("" : : "x"(s0), "x"(s1), "x"(s2), "x"(s3));
}

// Scores of NH query heads (q rows of HEAD_DIM floats, scale folded in) over
// the tile's kTile rows (rows past count read kZeroRow): two tokens per pass.
template <int HEAD_DIM, KvRows R, int NH>
KVS_AVX2_INLINE void scores(const float* q, const KvRowElement<R>* const* k_rows, int count,
                            float (*out)[kTile], NextTilePrefetch& next) {
  for (int t = 0; t < count; t += 2) {
    next.issue();
    __m256 a[8];
    for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();
    const KvRowElement<R>* k0 = k_rows[t];
    const KvRowElement<R>* k1 = k_rows[t + 1];
    // q is in the order widen16 leaves K in (attend widens it so): q[d..d+7]
    // pairs with the first vector of K's 16, q[d+8..d+15] with the second.
    for (int d = 0; d < HEAD_DIM; d += 16) {
      const Wide16 x0 = widen16<R>(k0 + d);
      const Wide16 x1 = widen16<R>(k1 + d);
      for (int h = 0; h < NH; ++h) {
        const __m256 q0 = _mm256_load_ps(q + h * HEAD_DIM + d);
        const __m256 q1 = _mm256_load_ps(q + h * HEAD_DIM + d + 8);
        a[h] = _mm256_fmadd_ps(q0, x0.first, a[h]);
        a[4 + h] = _mm256_fmadd_ps(q0, x1.first, a[4 + h]);
        a[h] = _mm256_fmadd_ps(q1, x0.second, a[h]);
        a[4 + h] = _mm256_fmadd_ps(q1, x1.second, a[4 + h]);
      }
    }
    alignas(32) float sums[8];
    _mm256_store_ps(sums, reduce8(a));
    for (int h = 0; h < NH; ++h) {
      out[h][t] = sums[h];
      out[h][t + 1] = sums[4 + h];
    }
  }
}

// P x V for NH query heads (acc rows of HEAD_DIM floats) over a tile: 16
// dimensions at a time, NH x 2 accumulators in registers.
template <int HEAD_DIM, KvRows R, int NH>
KVS_AVX2_INLINE void weighted_values(float* acc, const float (*weights)[kTile], const float* rescale,
                                     const KvRowElement<R>* const* v_rows, int count,
                                     NextTilePrefetch& next) {
  for (int d = 0; d < HEAD_DIM; d += 16) {
    next.issue();
    __m256 a[NH][2];
    for (int h = 0; h < NH; ++h) {
      const __m256 r = _mm256_set1_ps(rescale[h]);
      a[h][0] = _mm256_mul_ps(_mm256_load_ps(acc + h * HEAD_DIM + d), r);
      a[h][1] = _mm256_mul_ps(_mm256_load_ps(acc + h * HEAD_DIM + d + 8), r);
    }
    for (int t = 0; t < count; ++t) {
      // bf16: a[h][0] gathers dimensions d, d+2, ..., d+14 and a[h][1] the
      // odd ones (kAvx2Bf16Interleave order); fp16 and fp8: natural order.
      const Wide16 v = widen16<R>(v_rows[t] + d);
      for (int h = 0; h < NH; ++h) {
        const __m256 w = _mm256_broadcast_ss(&weights[h][t]);
        a[h][0] = _mm256_fmadd_ps(w, v.first, a[h][0]);
        a[h][1] = _mm256_fmadd_ps(w, v.second, a[h][1]);
      }
    }
    for (int h = 0; h < NH; ++h) {
      _mm256_store_ps(acc + h * HEAD_DIM + d, a[h][0]);
      _mm256_store_ps(acc + h * HEAD_DIM + d + 8, a[h][1]);
    }
  }
}

// All heads of the group in blocks of 4, then the 1-3 left over.
template <int HEAD_DIM, KvRows R>
KVS_AVX2_INLINE void all_scores(const float* q, int group, const KvRowElement<R>* const* k_rows, int count,
                                float (*out)[kTile], NextTilePrefetch& next) {
  int g = 0;
  for (; g + 4 <= group; g += 4) scores<HEAD_DIM, R, 4>(q + g * HEAD_DIM, k_rows, count, out + g, next);
  switch (group - g) {
    case 3:
      return scores<HEAD_DIM, R, 3>(q + g * HEAD_DIM, k_rows, count, out + g, next);
    case 2:
      return scores<HEAD_DIM, R, 2>(q + g * HEAD_DIM, k_rows, count, out + g, next);
    case 1:
      return scores<HEAD_DIM, R, 1>(q + g * HEAD_DIM, k_rows, count, out + g, next);
    default:
      return;
  }
}
template <int HEAD_DIM, KvRows R>
KVS_AVX2_INLINE void all_values(float* acc, int group, const float (*weights)[kTile], const float* rescale,
                                const KvRowElement<R>* const* v_rows, int count, NextTilePrefetch& next) {
  int g = 0;
  for (; g + 4 <= group; g += 4)
    weighted_values<HEAD_DIM, R, 4>(acc + g * HEAD_DIM, weights + g, rescale + g, v_rows, count, next);
  switch (group - g) {
    case 3:
      return weighted_values<HEAD_DIM, R, 3>(acc + g * HEAD_DIM, weights + g, rescale + g, v_rows, count,
                                             next);
    case 2:
      return weighted_values<HEAD_DIM, R, 2>(acc + g * HEAD_DIM, weights + g, rescale + g, v_rows, count,
                                             next);
    case 1:
      return weighted_values<HEAD_DIM, R, 1>(acc + g * HEAD_DIM, weights + g, rescale + g, v_rows, count,
                                             next);
    default:
      return;
  }
}

// One tile of one KV head: scores, online softmax, P x V into state.
template <int HEAD_DIM, KvRows R>
KVS_AVX2_INLINE void attend_tile(const float* q, int group, const KvRowElement<R>* const* k_rows,
                                 const KvRowElement<R>* const* v_rows, int count, TaskState& state,
                                 NextTilePrefetch& next) {
  alignas(32) float weights[kMaxGqa][kTile];  // scores, then softmax weights
  float rescale[kMaxGqa];
  const int count2 = (count + 1) / 2 * 2;  // scores are computed in token pairs
  all_scores<HEAD_DIM, R>(q, group, k_rows, count2, weights, next);
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 valid[kTile / 8];  // all-ones lanes for tokens < count
  for (int b = 0; b < kTile / 8; ++b) {
    valid[b] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(count - 8 * b), lane));
  }
  for (int g = 0; g < group; ++g) {
    __m256 s[kTile / 8];
    __m256 m = minus_inf;
    for (int b = 0; b < kTile / 8; ++b) {
      s[b] = _mm256_blendv_ps(minus_inf, _mm256_load_ps(weights[g] + 8 * b), valid[b]);
      m = _mm256_max_ps(m, s[b]);
    }
    const float old_max = state.running_max[g];
    const float new_max = std::max(old_max, horizontal_max(m));
    const __m256 nm = _mm256_set1_ps(new_max);
    __m256 total = _mm256_setzero_ps();
    for (int b = 0; b < kTile / 8; ++b) {
      const __m256 w = _mm256_and_ps(exp8(_mm256_sub_ps(s[b], nm)), valid[b]);
      _mm256_store_ps(weights[g] + 8 * b, w);
      total = _mm256_add_ps(total, w);
    }
    const float r = old_max == -INFINITY ? 0.0f : std::exp(old_max - new_max);
    rescale[g] = r;
    state.running_sum[g] = state.running_sum[g] * r + horizontal_sum(total);
    state.running_max[g] = new_max;
  }
  all_values<HEAD_DIM, R>(state.acc, group, weights, rescale, v_rows, count, next);
}

// Q_BF16: q is bf16 (else fp16); bf16 rows always come with a bf16 q.
template <int HEAD_DIM, KvRows R, bool Q_BF16>
KVS_AVX2 void attend(const PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count, int begin,
                     int end, TaskState* states, bool dense_tile_reads) {
  static_assert(R != KvRows::bf16 || Q_BF16, "bf16 rows come with a bf16 q");
  static_assert(R != KvRows::fp16 || !Q_BF16, "fp16 rows come with an fp16 q");
  using Element = KvRowElement<R>;
  const Element* k_rows[kTile];
  const Element* v_rows[kTile];
  long long offsets[kTile];
  const int group = p.q_per_kv;
  // q of every head of the task in fp32, in the order widen16 leaves K in,
  // avx_task_q_scale folded in once.
  const std::size_t q_floats =
      static_cast<std::size_t>(kv_head_count) * static_cast<std::size_t>(group) * HEAD_DIM;
  float* q = task_q_scratch(q_floats);
  const auto* q_task = static_cast<const std::uint16_t*>(p.q) +
                       (static_cast<long long>(seq) * p.num_kv_heads + first_kv_head) * group * HEAD_DIM;
  const __m256 scale = _mm256_set1_ps(avx_task_q_scale<R>(p));
  if constexpr (R == KvRows::bf16) {
    for (std::size_t i = 0; i < q_floats; i += 16) {  // even/odd order, as K and V
      const Wide16 w = widen16<KvRows::bf16>(q_task + i);
      _mm256_store_ps(q + i, _mm256_mul_ps(w.first, scale));
      _mm256_store_ps(q + i + 8, _mm256_mul_ps(w.second, scale));
    }
  } else {
    for (std::size_t i = 0; i < q_floats; i += 8) {
      _mm256_store_ps(q + i, _mm256_mul_ps(widen8<Q_BF16>(q_task + i), scale));
    }
  }
  for (int h = 0; h < kv_head_count; ++h) {
    for (int g = 0; g < group; ++g) {
      states[h].running_max[g] = -INFINITY;
      states[h].running_sum[g] = 0.0f;
    }
    std::fill(states[h].acc, states[h].acc + group * HEAD_DIM, 0.0f);
  }
  const std::int32_t* block_table = p.block_tables + static_cast<long long>(seq) * p.max_blocks_per_seq;
  const auto* k_cache = static_cast<const Element*>(p.k_cache) + first_kv_head * HEAD_DIM;
  const auto* v_cache = static_cast<const Element*>(p.v_cache) + first_kv_head * HEAD_DIM;

  // Issue points per tile: each head's score pairs and P x V dimension steps,
  // per block of up to 4 query heads (scores / weighted_values).
  const int blocks = (group + 3) / 4;
  NextTilePrefetch next(p, block_table, k_cache, v_cache, kv_head_count * HEAD_DIM, sizeof(Element), end);
  for (int tile_start = begin; tile_start < end; tile_start += kTile) {
    const int count = std::min(kTile, end - tile_start);
    row_offsets(p, block_table, tile_start, count, 0, offsets);
    const int issue_points = kv_head_count * blocks * ((count + 1) / 2 + HEAD_DIM / 16);
    next.queue_after(tile_start, issue_points);
    if (dense_tile_reads) touch_tile(k_cache, v_cache, offsets, count, kv_head_count * HEAD_DIM);
    for (int t = count; t < kTile; ++t) k_rows[t] = reinterpret_cast<const Element*>(kZeroRow);
    for (int h = 0; h < kv_head_count; ++h) {
      for (int t = 0; t < count; ++t) {
        k_rows[t] = k_cache + offsets[t] + h * HEAD_DIM;
        v_rows[t] = v_cache + offsets[t] + h * HEAD_DIM;
      }
      attend_tile<HEAD_DIM, R>(q + static_cast<std::size_t>(h) * static_cast<std::size_t>(group) * HEAD_DIM,
                               group, k_rows, v_rows, count, states[h], next);
    }
    next.finish();
  }
  if constexpr (R == KvRows::fp8) unscale_fp8_accumulators(states, kv_head_count, group * HEAD_DIM);
}

template <KvRows R, bool Q_BF16>
void attend_rows(const PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count, int begin,
                 int end, TaskState* states, bool dense_tile_reads) {
  dispatch_head_dim(p.head_dim, [&](auto head_dim) {
    attend<decltype(head_dim)::value, R, Q_BF16>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                                 dense_tile_reads);
  });
}

}  // namespace

void attend_avx2(const PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count, int begin,
                 int end, TaskState* states, bool dense_tile_reads) {
  const bool bf16_q = p.dtype == kernels::ElementType::bf16;
  if (p.kv_type == kernels::KvType::fp8_e4m3) {
    if (bf16_q)
      return attend_rows<KvRows::fp8, true>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                            dense_tile_reads);
    return attend_rows<KvRows::fp8, false>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                           dense_tile_reads);
  }
  if (bf16_q)
    return attend_rows<KvRows::bf16, true>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                           dense_tile_reads);
  return attend_rows<KvRows::fp16, false>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                          dense_tile_reads);
}

KVS_AVX2 void widen_fp8x16_avx2(const std::uint8_t* bytes, float* out) {
  const Wide16 w = widen16<KvRows::fp8>(bytes);
  const __m256 unscale = _mm256_set1_ps(kFp8ThroughFp16);
  _mm256_storeu_ps(out, _mm256_mul_ps(w.first, unscale));
  _mm256_storeu_ps(out + 8, _mm256_mul_ps(w.second, unscale));
}

#else  // not x86-64 with GCC or clang: the portable kernel only

bool cpu_has_avx2_f16c() { return false; }

void attend_avx2(const kernels::PagedDecodeParams&, int, int, int, int, int, TaskState*, bool) {
  throw DeviceError("cpu: the AVX2 kernel is not compiled for this architecture");
}

void widen_fp8x16_avx2(const std::uint8_t*, float*) {
  throw DeviceError("cpu: the AVX2 kernel is not compiled for this architecture");
}

#endif

}  // namespace kvsight::probes::detail
