// The cpu backend's AVX-512 paged-decode kernels, for bf16 q/K/V (with the
// BF16 extension) and for fp16 (AVX-512 F/BW/DQ/VL): the same algorithm as
// attend_range in cpu_kernel_portable.cpp (each (sequence, KV head) walks its
// token range in tiles of 32 with an online softmax; split-KV partials are
// reduced by the backend) at 16 lanes.
//
// Why it exists: the portable 8-lane kernel spends ~370 instructions per
// (token, KV head) at GQA 4 and is bound by arithmetic, not by memory (see
// docs/measurements.md). Here:
//  - q.K uses VDPBF16PS on the raw bf16 data: 32 bf16 products per
//    instruction, no conversion of K at all. A product of two bf16 values is
//    exact in fp32 (8-bit significands), so the only rounding is the fp32
//    accumulation, as in the portable kernel (the instruction treats denormal
//    inputs as zero: bf16 values below 2^-126 do not occur in attention data).
//  - 16 dot products are reduced to one vector of 16 scores with 15 shuffle +
//    add steps (3 per score) instead of a horizontal sum each.
//  - P x V stays in fp32 (P is not rounded to bf16), as in the portable kernel
//    and the device kernels: V is widened with a shift (even elements) and a
//    mask (odd elements), which permutes each 32-dimension chunk into
//    [16 even | 16 odd] (kAvx512Bf16Interleave); write_task_output undoes it.
//  - up to 4 query heads x 64 dimensions of accumulators stay in registers
//    across a tile's tokens, each V vector feeding 4 FMAs.
//  - one task runs several adjacent KV heads of a sequence in lockstep, tile
//    by tile (each head keeps its own softmax state, so the results are those
//    of one task per head): with 16-token blocks and 8 KV heads a block is a
//    contiguous 32 KiB run instead of 256 B at a 2 KiB stride. The next
//    tile's lines are prefetched from inside the compute (NextTilePrefetch);
//    on CPUs where it pays (dense_tile_reads_pay, cpu_backend.cpp) the tile's
//    rows are first read with dense plain loads (touch_tile).
// fp16 (issue #15 item 7): K and V are widened 16 at a time with VCVTPH2PS
// (AVX-512 F; exact, subnormals included) in natural order; q is widened and
// scaled once per task. Scores take 4 tokens x up to 4 query heads per pass
// (16 accumulators), so each converted K vector feeds 4 FMAs, and reduce16
// folds the 16 dot products at once; the softmax, P x V and the tile walk are
// the bf16 kernel's.
// fp8 E4M3 K/V (issue #24 item 5), beside a bf16 or fp16 q, run in the fp16
// path: 32 bytes at a time become fp16 by the AVX2 kernel's integer steps
// (cpu_kernel_avx2.cpp widen16) on 32 lanes, then VCVTPH2PS (widen_chunk).
// Every function that uses the instructions carries a target attribute, so
// the rest of the binary stays baseline x86-64 and this code runs only after
// cpu_has_avx512() / cpu_has_avx512_bf16() said so. The bf16 tile, the only
// code with BF16 instructions, is its own (not inlined) function, so the fp16
// path never contains them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu_kernel.hpp"
#include "kvsight/error.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KVS_AVX512_KERNEL 1
#if !defined(__clang__)
// GCC 12's avx512fintrin.h seeds "undefined" vectors with `__m512i __Y = __Y;`,
// which -Wmaybe-uninitialized flags once inlined, and -Wuninitialized where the
// inlining leaves no other path (widen_fp8x32_avx512) (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#else
#define KVS_AVX512_KERNEL 0
#endif

namespace kvsight::probes::detail {

#if KVS_AVX512_KERNEL

bool cpu_has_avx512() {
  __builtin_cpu_init();
  // libgcc / compiler-rt also check that the OS saves the AVX-512 state (XCR0).
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

bool cpu_has_avx512_bf16() { return cpu_has_avx512() && __builtin_cpu_supports("avx512bf16"); }

#define KVS_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define KVS_AVX512_INLINE KVS_AVX512 __attribute__((always_inline)) inline
#define KVS_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))

namespace {

using kernels::kMaxGqa;
using kernels::PagedDecodeParams;

// Tokens per online-softmax step: kernels::kTileTokens, two vectors of scores.
constexpr int kTile = 32;
static_assert(kernels::kTileTokens == kTile, "the cpu kernels use the device kernels' tile");
// Rows past the end of the last tile read this instead of memory that may not
// exist; their scores are masked to -inf before the softmax.
alignas(64) const std::uint16_t kZeroRow[256] = {};

// A chunk of a row as fp32 vectors of 16, natural order: fp16 16 elements by
// VCVTPH2PS; fp8 E4M3 32 elements, times 2^-8 (kFp8ThroughFp16), by the AVX2
// kernel's widening (cpu_kernel_avx2.cpp widen16, with the argument) on 32
// lanes of 16 bits: S.EEEE.MMM becomes the fp16 S.0EEEE.MMM0000000, exactly the
// value / 2^8 with subnormals to subnormals, and NaN (0x7F, 0xFF) a quiet NaN;
// then VCVTPH2PS on each half. 32 at a time: the integer steps cost the same
// for 32 elements as for 16, and fp8 rows are decode-bound.
template <KvRows R>
constexpr int kChunk = R == KvRows::fp8 ? 32 : 16;
template <KvRows R>
KVS_AVX512_INLINE void widen_chunk(const KvRowElement<R>* p, __m512* out) {  // kChunk<R> / 16 vectors
  static_assert(R != KvRows::bf16, "bf16 rows are read raw (scores) or by shift and mask (P x V)");
  if constexpr (R == KvRows::fp16) {
    out[0] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    const __m512i byte = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i shifted = _mm512_slli_epi16(byte, 7);
    const __m512i finite = _mm512_add_epi16(shifted, _mm512_and_si512(shifted, _mm512_set1_epi16(0x4000)));
    const __m512i all_ones = _mm512_set1_epi16(0x3F80);
    const __mmask32 nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(shifted, all_ones), all_ones);
    const __m512i half =
        _mm512_mask_mov_epi16(finite, nan, _mm512_or_si512(finite, _mm512_set1_epi16(0x7C00)));
    out[0] = _mm512_cvtph_ps(_mm512_castsi512_si256(half));
    out[1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(half, 1));
  }
}

// exp of x <= 0, 16 lanes (Cephes expf: x = n ln 2 + r with ln 2 in two parts,
// degree-6 polynomial in r, 2^n by VSCALEFPS); relative error ~1e-7. x is
// clamped at -87.3 so the result stays normal; masked lanes are zeroed later.
KVS_AVX512_INLINE __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_fmadd_ps(r, _mm512_set1_ps(1.9875691500e-4f), _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

// s[i] holds 16 partial sums of token i's dot product; returns the 16 sums in
// token order. Four halving steps (128-bit lanes across registers, then
// within lanes) leave element 4L + k holding token 4k + L; one permute
// transposes that 4 x 4 order back.
KVS_AVX512_INLINE __m512 reduce16(const __m512 (&s)[16]) {
  __m512 a[8], b[4], c[2];
  for (int k = 0; k < 8; ++k) {  // lanes [x x y y] of tokens 2k, 2k+1: 8 partials each
    a[k] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * k], s[2 * k + 1], 0x44),
                         _mm512_shuffle_f32x4(s[2 * k], s[2 * k + 1], 0xEE));
  }
  for (int j = 0; j < 4; ++j) {  // lane L holds token 4j + L: 4 partials
    b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * j], a[2 * j + 1], 0xDD));
  }
  for (int i = 0; i < 2; ++i) {  // lane L: tokens 8i + L, 8i + 4 + L, 2 partials each
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xDD));
  }
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
  const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(transpose, sums);
}

// Loads every 64-byte line of the tile's rows (`elements` bf16 values at each
// row offset, in K and in V) and discards them: the tile is in L1/L2
// afterwards, and the arithmetic that follows does not wait on memory.
// Plain loads, issued densely, are what keeps enough misses in flight on this
// kind of core; the order is address order within four streams at once (K
// and V of the first and of the second half of the rows: with 16-token blocks,
// the tile's two blocks). Measured on the Zen 5 VM, 2 threads, ctx 32768,
// split-KV: software prefetches 1-4 tiles ahead (T0/T1/NTA, in bulk, per head
// or spread over the P x V loop) 18-29 GB/s; K then V, one stream: 25.9-31;
// K and V interleaved: 34-35; four streams: 34-39; eight: 33-34.
// On Intel (Emerald Rapids), with NextTilePrefetch already in flight, the
// pass costs 10-15 %: the tile does not fit L1, so it only moves each line
// from L2 to L1 twice (dense_tile_reads_pay, cpu_backend.cpp).
template <typename Element>
KVS_AVX512_INLINE void touch_tile(const Element* k_base, const Element* v_base, const long long* offsets,
                                  int count, int elements) {
  constexpr int kLine = 64 / static_cast<int>(sizeof(Element));  // elements per 64-byte line
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  const int half = (count + 1) / 2;
  for (int t = 0; t < half; ++t) {
    const int u = t + half < count ? t + half : t;  // an odd count reads its middle row twice
    for (int e = 0; e < elements; e += kLine) {
      s0 = _mm512_or_si512(s0, _mm512_loadu_si512(k_base + offsets[t] + e));
      s1 = _mm512_or_si512(s1, _mm512_loadu_si512(v_base + offsets[t] + e));
      s2 = _mm512_or_si512(s2, _mm512_loadu_si512(k_base + offsets[u] + e));
      s3 = _mm512_or_si512(s3, _mm512_loadu_si512(v_base + offsets[u] + e));
    }
  }
  // An empty asm that takes the results keeps the loads without storing anything.
  __asm__ volatile("" : : "v"(s0), "v"(s1), "v"(s2), "v"(s3));
}

// P x V for NH query heads (acc rows of HEAD_DIM floats; bf16: permuted
// order, fp16 and fp8: natural) over a tile: 64 dimensions at a time, NH x 4
// accumulators in registers.
template <int HEAD_DIM, int NH, KvRows R>
KVS_AVX512_INLINE void weighted_values(float* acc, const float (*weights)[kTile], const float* rescale,
                                       const KvRowElement<R>* const* v_rows, int count,
                                       NextTilePrefetch& next) {
  const __m512i high_half = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int d = 0; d < HEAD_DIM; d += 64) {
    next.issue();
    __m512 a[NH][4];
    for (int h = 0; h < NH; ++h) {
      const __m512 r = _mm512_set1_ps(rescale[h]);
      for (int i = 0; i < 4; ++i) a[h][i] = _mm512_mul_ps(_mm512_load_ps(acc + h * HEAD_DIM + d + 16 * i), r);
    }
    for (int t = 0; t < count; ++t) {
      __m512 v[4];
      if constexpr (R == KvRows::bf16) {
        const __m512i r0 = _mm512_loadu_si512(v_rows[t] + d);
        const __m512i r1 = _mm512_loadu_si512(v_rows[t] + d + 32);
        v[0] = _mm512_castsi512_ps(_mm512_slli_epi32(r0, 16));
        v[1] = _mm512_castsi512_ps(_mm512_and_si512(r0, high_half));
        v[2] = _mm512_castsi512_ps(_mm512_slli_epi32(r1, 16));
        v[3] = _mm512_castsi512_ps(_mm512_and_si512(r1, high_half));
      } else {
        for (int c = 0; c < 64; c += kChunk<R>) {
          widen_chunk<R>(v_rows[t] + d + c, v + c / 16);
        }
      }
      for (int h = 0; h < NH; ++h) {
        const __m512 w = _mm512_set1_ps(weights[h][t]);
        for (int i = 0; i < 4; ++i) a[h][i] = _mm512_fmadd_ps(w, v[i], a[h][i]);
      }
    }
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < 4; ++i) _mm512_store_ps(acc + h * HEAD_DIM + d + 16 * i, a[h][i]);
    }
  }
}

// Online softmax over a tile's scores (weights[g][0..count), scaled), then
// P x V into state: one max and one rescale per head per tile.
template <int HEAD_DIM, KvRows R>
KVS_AVX512_INLINE void softmax_and_values(int group, int count, float (*weights)[kTile],
                                          const KvRowElement<R>* const* v_rows, TaskState& state,
                                          NextTilePrefetch& next) {
  float rescale[kMaxGqa];
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  const int vectors = (count + 15) / 16;  // score vectors of 16 tokens in this tile
  // Lanes of the two score vectors that hold tokens of this tile.
  const auto lanes = [](int tokens) {
    return static_cast<__mmask16>(tokens >= 16 ? 0xFFFFu : tokens <= 0 ? 0u : (1u << tokens) - 1u);
  };
  const __mmask16 valid0 = lanes(count);
  const __mmask16 valid1 = lanes(count - 16);
  for (int g = 0; g < group; ++g) {
    const __m512 s0 = _mm512_mask_mov_ps(minus_inf, valid0, _mm512_load_ps(weights[g]));
    const __m512 s1 =
        vectors > 1 ? _mm512_mask_mov_ps(minus_inf, valid1, _mm512_load_ps(weights[g] + 16)) : minus_inf;
    const float old_max = state.running_max[g];
    const float new_max = std::max(old_max, _mm512_reduce_max_ps(_mm512_max_ps(s0, s1)));
    const __m512 m = _mm512_set1_ps(new_max);
    const __m512 w0 = _mm512_maskz_mov_ps(valid0, exp16(_mm512_sub_ps(s0, m)));
    const __m512 w1 = _mm512_maskz_mov_ps(valid1, exp16(_mm512_sub_ps(s1, m)));
    _mm512_store_ps(weights[g], w0);
    _mm512_store_ps(weights[g] + 16, w1);
    const float r = old_max == -INFINITY ? 0.0f : std::exp(old_max - new_max);
    rescale[g] = r;
    state.running_sum[g] = state.running_sum[g] * r + _mm512_reduce_add_ps(_mm512_add_ps(w0, w1));
    state.running_max[g] = new_max;
  }

  // P x V: blocks of 4 heads, then the 1-3 left over.
  int g = 0;
  for (; g + 4 <= group; g += 4)
    weighted_values<HEAD_DIM, 4, R>(state.acc + g * HEAD_DIM, weights + g, rescale + g, v_rows, count, next);
  float* acc_rest = state.acc + g * HEAD_DIM;
  switch (group - g) {
    case 3:
      weighted_values<HEAD_DIM, 3, R>(acc_rest, weights + g, rescale + g, v_rows, count, next);
      break;
    case 2:
      weighted_values<HEAD_DIM, 2, R>(acc_rest, weights + g, rescale + g, v_rows, count, next);
      break;
    case 1:
      weighted_values<HEAD_DIM, 1, R>(acc_rest, weights + g, rescale + g, v_rows, count, next);
      break;
    default:
      break;
  }
}

// One bf16 tile of one KV head: scores with VDPBF16PS on the raw bf16 q and
// K, then the softmax and P x V. Not inlined: the only function with BF16
// instructions (see the file comment).
template <int HEAD_DIM>
KVS_AVX512_BF16 __attribute__((noinline)) void attend_tile_bf16(const std::uint16_t* q, int group,
                                                                float scale_value,
                                                                const std::uint16_t* const* k_rows,
                                                                const std::uint16_t* const* v_rows, int count,
                                                                TaskState& state, NextTilePrefetch& next) {
  constexpr int kChunks = HEAD_DIM / 32;      // 512-bit vectors of bf16 per row
  alignas(64) float weights[kMaxGqa][kTile];  // scores, then softmax weights
  const __m512 scale = _mm512_set1_ps(scale_value);
  const int vectors = (count + 15) / 16;

  // Scores: 16 tokens of one head per pass, each K row read as bf16 pairs.
  for (int g = 0; g < group; ++g) {
    __m512i qv[kChunks];
    for (int c = 0; c < kChunks; ++c) qv[c] = _mm512_loadu_si512(q + g * HEAD_DIM + 32 * c);
    for (int b = 0; b < vectors; ++b) {
      next.issue();
      __m512 dots[16];
      for (int i = 0; i < 16; ++i) {
        const std::uint16_t* k_row = k_rows[16 * b + i];
        __m512 sum = _mm512_setzero_ps();
        for (int c = 0; c < kChunks; ++c) {
          sum = _mm512_dpbf16_ps(sum, reinterpret_cast<__m512bh>(qv[c]),
                                 reinterpret_cast<__m512bh>(_mm512_loadu_si512(k_row + 32 * c)));
        }
        dots[i] = sum;
      }
      _mm512_store_ps(weights[g] + 16 * b, _mm512_mul_ps(reduce16(dots), scale));
    }
  }
  softmax_and_values<HEAD_DIM, KvRows::bf16>(group, count, weights, v_rows, state, next);
}

// fp16 / fp8 scores of NH query heads (q rows of HEAD_DIM floats, scale folded
// in) over 4 tokens [t0, t0 + 4): each K vector is widened once and feeds NH
// FMAs; the NH x 4 dot products (index 4h + i) are folded by one reduce16.
template <int HEAD_DIM, int NH, KvRows R>
KVS_AVX512_INLINE void scores4(const float* q, const KvRowElement<R>* const* k_rows, int t0,
                               float (*out)[kTile], NextTilePrefetch& next) {
  next.issue();
  __m512 s[16];
  for (int i = 0; i < 16; ++i) s[i] = _mm512_setzero_ps();
  constexpr int kVectors = kChunk<R> / 16;
  for (int d = 0; d < HEAD_DIM; d += kChunk<R>) {
    __m512 k[4][kVectors];
    for (int i = 0; i < 4; ++i) widen_chunk<R>(k_rows[t0 + i] + d, k[i]);
    for (int h = 0; h < NH; ++h) {
      for (int j = 0; j < kVectors; ++j) {
        const __m512 qv = _mm512_load_ps(q + h * HEAD_DIM + d + 16 * j);
        for (int i = 0; i < 4; ++i) s[4 * h + i] = _mm512_fmadd_ps(qv, k[i][j], s[4 * h + i]);
      }
    }
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, reduce16(s));
  for (int h = 0; h < NH; ++h) {
    for (int i = 0; i < 4; ++i) out[h][t0 + i] = sums[4 * h + i];
  }
}

// One fp16 or fp8 tile of one KV head: scores of every 16-token vector the
// softmax reads (rows past count are kZeroRow, masked there), then softmax and
// P x V.
template <int HEAD_DIM, KvRows R>
KVS_AVX512_INLINE void attend_tile_widened(const float* q, int group, const KvRowElement<R>* const* k_rows,
                                           const KvRowElement<R>* const* v_rows, int count, TaskState& state,
                                           NextTilePrefetch& next) {
  alignas(64) float weights[kMaxGqa][kTile];
  const int tokens = (count + 15) / 16 * 16;
  for (int t0 = 0; t0 < tokens; t0 += 4) {
    int g = 0;
    for (; g + 4 <= group; g += 4) scores4<HEAD_DIM, 4, R>(q + g * HEAD_DIM, k_rows, t0, weights + g, next);
    switch (group - g) {
      case 3:
        scores4<HEAD_DIM, 3, R>(q + g * HEAD_DIM, k_rows, t0, weights + g, next);
        break;
      case 2:
        scores4<HEAD_DIM, 2, R>(q + g * HEAD_DIM, k_rows, t0, weights + g, next);
        break;
      case 1:
        scores4<HEAD_DIM, 1, R>(q + g * HEAD_DIM, k_rows, t0, weights + g, next);
        break;
      default:
        break;
    }
  }
  softmax_and_values<HEAD_DIM, R>(group, count, weights, v_rows, state, next);
}

// Q_BF16: q is bf16 (else fp16); bf16 rows come with a bf16 q, fp16 rows with
// an fp16 one, fp8 rows with either.
template <int HEAD_DIM, KvRows R, bool Q_BF16>
KVS_AVX512 void attend(const PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count, int begin,
                       int end, TaskState* states, bool dense_tile_reads) {
  static_assert(R != KvRows::bf16 || Q_BF16, "bf16 rows come with a bf16 q");
  static_assert(R != KvRows::fp16 || !Q_BF16, "fp16 rows come with an fp16 q");
  using Element = KvRowElement<R>;
  const Element* k_rows[kTile];
  const Element* v_rows[kTile];
  long long offsets[kTile];
  const int group = p.q_per_kv;
  const auto* q_task = static_cast<const std::uint16_t*>(p.q) +
                       (static_cast<long long>(seq) * p.num_kv_heads + first_kv_head) * group * HEAD_DIM;
  // fp16 / fp8 rows: q of every head of the task in fp32, natural order,
  // avx_task_q_scale folded in once.
  float* q_float = nullptr;
  if constexpr (R != KvRows::bf16) {
    const std::size_t q_floats =
        static_cast<std::size_t>(kv_head_count) * static_cast<std::size_t>(group) * HEAD_DIM;
    q_float = task_q_scratch(q_floats);
    const __m512 scale = _mm512_set1_ps(avx_task_q_scale<R>(p));
    for (std::size_t i = 0; i < q_floats; i += 16) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q_task + i));
      __m512 wide;
      if constexpr (Q_BF16) {
        wide = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
      } else {
        wide = _mm512_cvtph_ps(raw);
      }
      _mm512_store_ps(q_float + i, _mm512_mul_ps(wide, scale));
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

  // The next tile's lines go out from inside the compute (NextTilePrefetch,
  // cpu_kernel.hpp), spread over each head's issue points: per 16 scores of a
  // query head (bf16) or per 4 tokens of a block of 4 heads (fp16, fp8), and
  // per 64 dimensions of P x V per block of 4 heads.
  const int blocks = (group + 3) / 4;
  NextTilePrefetch next(p, block_table, k_cache, v_cache, kv_head_count * HEAD_DIM, sizeof(Element), end);
  for (int tile_start = begin; tile_start < end; tile_start += kTile) {
    const int count = std::min(kTile, end - tile_start);
    row_offsets(p, block_table, tile_start, count, 0, offsets);
    const int vectors = (count + 15) / 16;
    const int score_points = R == KvRows::bf16 ? group * vectors : blocks * vectors * 4;
    const int issue_points = kv_head_count * (score_points + blocks * (HEAD_DIM / 64));
    next.queue_after(tile_start, issue_points);
    // Where it pays, read the tile's rows of every head of the task in
    // address order before computing on them (see the file comment).
    if (dense_tile_reads) touch_tile(k_cache, v_cache, offsets, count, kv_head_count * HEAD_DIM);
    for (int t = count; t < kTile; ++t) k_rows[t] = reinterpret_cast<const Element*>(kZeroRow);
    for (int h = 0; h < kv_head_count; ++h) {
      for (int t = 0; t < count; ++t) {
        k_rows[t] = k_cache + offsets[t] + h * HEAD_DIM;
        v_rows[t] = v_cache + offsets[t] + h * HEAD_DIM;
      }
      if constexpr (R == KvRows::bf16) {
        attend_tile_bf16<HEAD_DIM>(q_task + static_cast<long long>(h) * group * HEAD_DIM, group, p.scale,
                                   k_rows, v_rows, count, states[h], next);
      } else {
        attend_tile_widened<HEAD_DIM, R>(
            q_float + static_cast<std::size_t>(h) * static_cast<std::size_t>(group) * HEAD_DIM, group, k_rows,
            v_rows, count, states[h], next);
      }
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

void attend_avx512_bf16(const PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count, int begin,
                        int end, TaskState* states, bool dense_tile_reads) {
  attend_rows<KvRows::bf16, true>(p, seq, first_kv_head, kv_head_count, begin, end, states, dense_tile_reads);
}

void attend_avx512_fp16(const PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count, int begin,
                        int end, TaskState* states, bool dense_tile_reads) {
  if (p.kv_type == kernels::KvType::fp8_e4m3) {
    if (p.dtype == kernels::ElementType::bf16)
      return attend_rows<KvRows::fp8, true>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                            dense_tile_reads);
    return attend_rows<KvRows::fp8, false>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                           dense_tile_reads);
  }
  attend_rows<KvRows::fp16, false>(p, seq, first_kv_head, kv_head_count, begin, end, states,
                                   dense_tile_reads);
}

KVS_AVX512 void widen_fp8x32_avx512(const std::uint8_t* bytes, float* out) {
  __m512 wide[2];
  widen_chunk<KvRows::fp8>(bytes, wide);
  _mm512_storeu_ps(out, _mm512_mul_ps(wide[0], _mm512_set1_ps(kFp8ThroughFp16)));
  _mm512_storeu_ps(out + 16, _mm512_mul_ps(wide[1], _mm512_set1_ps(kFp8ThroughFp16)));
}

#else  // not x86-64 with GCC or clang: the portable kernel only

bool cpu_has_avx512() { return false; }
bool cpu_has_avx512_bf16() { return false; }

void attend_avx512_bf16(const kernels::PagedDecodeParams&, int, int, int, int, int, TaskState*, bool) {
  throw DeviceError("cpu: the AVX-512 BF16 kernel is not compiled for this architecture");
}
void attend_avx512_fp16(const kernels::PagedDecodeParams&, int, int, int, int, int, TaskState*, bool) {
  throw DeviceError("cpu: the AVX-512 kernel is not compiled for this architecture");
}
void widen_fp8x32_avx512(const std::uint8_t*, float*) {
  throw DeviceError("cpu: the AVX-512 kernel is not compiled for this architecture");
}

#endif

}  // namespace kvsight::probes::detail
