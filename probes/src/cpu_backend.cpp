// The cpu backend: the same two algorithms as kernels/paged_decode.cuh (one task
// per (sequence, KV head) walking its context with an online softmax over tiles
// of kTileTokens; split-KV tasks per (sequence, KV head, split) plus a reduce),
// run on std::threads over 16-bit data. It lets every probe run and be tested on
// a machine with no GPU. Where the CPU has AVX-512 (with BF16 for bf16), data
// goes to the 16-lane kernels of cpu_kernel_avx512.cpp, else to the AVX2 kernel
// of cpu_kernel_avx2.cpp (--cpu-kernel chooses). The
// portable kernel here uses explicit 8-lane vectors (bf16 -> fp32 is
// a shift or a mask; fixed HEAD_DIM; scores for 2 heads x 4 tokens per pass with
// one shuffle reduction; a vector exp per tile) and the hot entry point is cloned
// for x86-64-v3 (AVX2 + FMA) with a baseline fallback.
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <sstream>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include "../../kernels/fp8_e4m3.hpp"
#include "backend.hpp"
#include "cpu_kernel.hpp"
#include "half.hpp"
#include "kvsight/error.hpp"

// -std=c++20 turns off FMA contraction; the kernels want a * b + c fused.
#pragma GCC optimize("fp-contract=fast")

namespace kvsight::probes::detail {
namespace {

using kernels::kMaxGqa;
using kernels::kTileTokens;
using kernels::PagedDecodeParams;

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kHugePage = 2u << 20;
#ifndef KVS_PREFETCH_TILES
#define KVS_PREFETCH_TILES 2
#endif

class HostBuffer final : public DeviceBuffer {
 public:
  explicit HostBuffer(std::uint64_t bytes) : bytes_(bytes) {
    data_ =
        ::operator new(std::max<std::uint64_t>(bytes, kAlignment), std::align_val_t(kHugePage), std::nothrow);
    if (data_ == nullptr) {
      throw DeviceError("cpu: allocation of " + std::to_string(bytes) + " bytes failed (out of host memory)");
    }
    // K/V blocks are read at random places: 2 MiB pages (where the kernel
    // allows transparent huge pages) spare a TLB miss at most block boundaries.
    if (bytes >= kHugePage) (void)madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  }
  ~HostBuffer() override { ::operator delete(data_, std::align_val_t(kHugePage)); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() const override { return data_; }
  std::uint64_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// fp16 -> fp32 through a 64K-entry table built from the exact conversion.
const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> values(65536);
    for (std::uint32_t bits = 0; bits < 65536; ++bits)
      values[bits] = fp16_to_float(static_cast<std::uint16_t>(bits));
    return values;
  }();
  return table.data();
}

// fp8 E4M3 -> fp32 through a 256-entry table of the kernels' own decode
// (kernels/fp8_e4m3.hpp), so the cpu backend reads a byte as the GPUs do.
const float* fp8_e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> values(256);
    for (std::uint32_t byte = 0; byte < 256; ++byte) values[byte] = kernels::fp8_e4m3_to_float(byte);
    return values;
  }();
  return table.data();
}

template <int HEAD_DIM, bool BF16>
[[gnu::always_inline]] inline void convert_row(const std::uint16_t* __restrict source, float* __restrict out,
                                               const float* __restrict table);

// Vec8 values never cross a non-inlined call, so the AVX-vs-SSE argument ABI
// note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC vector extensions: 8 floats, one AVX register in the x86-64-v3 clone and
// two SSE registers in the baseline one.
typedef float Vec8 __attribute__((vector_size(32)));
typedef std::uint32_t Vec8u32 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline Vec8 load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
[[gnu::always_inline]] inline void store8(float* p, Vec8 v) { std::memcpy(p, &v, sizeof(v)); }
[[gnu::always_inline]] inline float horizontal_sum(Vec8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// bf16 -> fp32 is a 16-bit shift (exact); fp16 goes through the exact table.
template <int HEAD_DIM, bool BF16>
[[gnu::always_inline]] inline void convert_row(const std::uint16_t* __restrict source, float* __restrict out,
                                               const float* __restrict table) {
  if constexpr (BF16) {
    // 16 values per step as 8 32-bit words: the low halves (even elements)
    // shifted up and the high halves (odd elements) masked give fp32 in a
    // permuted order: out[16c + i] = x[16c + 2i], out[16c + 8 + i] = x[16c + 2i + 1].
    // q, K and V all use it, so dot products are unchanged and the P x V
    // accumulators come out in that order (unpermute_bf16 restores it).
    for (int d = 0; d < HEAD_DIM; d += 16) {
      Vec8u32 words;
      std::memcpy(&words, source + d, sizeof(words));
      const Vec8u32 even = words << 16;
      const Vec8u32 odd = words & 0xFFFF0000u;
      std::memcpy(out + d, &even, sizeof(even));
      std::memcpy(out + d + 8, &odd, sizeof(odd));
    }
  } else {
    for (int d = 0; d < HEAD_DIM; ++d) out[d] = table[source[d]];
  }
}

// fp8 K/V rows: the byte table (fp8_e4m3_table), natural order. BF16 names the
// q dtype and does not matter here.
template <int HEAD_DIM, bool BF16>
[[gnu::always_inline]] inline void convert_row(const std::uint8_t* __restrict source, float* __restrict out,
                                               const float* __restrict table) {
  for (int d = 0; d < HEAD_DIM; ++d) out[d] = table[source[d]];
}

// q beside fp8 K/V: natural order (the fp8 rows are), bf16 by its exact shift.
template <int HEAD_DIM, bool BF16>
[[gnu::always_inline]] inline void convert_row_natural(const std::uint16_t* __restrict source,
                                                       float* __restrict out, const float* __restrict table) {
  for (int d = 0; d < HEAD_DIM; ++d) out[d] = BF16 ? bf16_to_float(source[d]) : table[source[d]];
}

typedef std::int32_t Vec8i __attribute__((vector_size(32)));

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

// FP8: K/V are fp8 E4M3 bytes (p.kv_type), q stays in the BF16-selected dtype.
template <int HEAD_DIM, bool BF16, bool FP8>
[[gnu::always_inline]] inline void attend_range(const PagedDecodeParams& p, int seq, int kv_head, int begin,
                                                int end, TaskState& state) {
  // q rows and scores are padded to an even head count (pairs of heads share
  // each K/V load); padded q rows are zero and padded weights are zero.
  alignas(kAlignment) float q[kMaxGqa][HEAD_DIM];
  alignas(kAlignment) float tile[kTileTokens][HEAD_DIM];
  alignas(kAlignment) float scores[kMaxGqa][kTileTokens];
  float rescales[kMaxGqa];
  using KvElement = std::conditional_t<FP8, std::uint8_t, std::uint16_t>;
  const float* table = BF16 ? nullptr : fp16_table();
  const float* kv_table = FP8 ? fp8_e4m3_table() : table;
  const int group = p.q_per_kv;
  const int padded_group = (group + 1) / 2 * 2;
  const auto* q_data =
      static_cast<const std::uint16_t*>(p.q) +
      (static_cast<long long>(seq) * p.num_kv_heads * group + static_cast<long long>(kv_head) * group) *
          HEAD_DIM;
  for (int g = group; g < padded_group; ++g) {
    std::fill(q[g], q[g] + HEAD_DIM, 0.0f);
    std::fill(scores[g], scores[g] + kTileTokens, 0.0f);
    rescales[g] = 0.0f;
  }
  // The softmax scale and K's dequantization scale (1 unless fp8) are folded into
  // q once (paged_decode_params.hpp: FlashInfer's sm_scale *= k_scale).
  const float scale = p.scale * p.k_scale;
  for (int g = 0; g < group; ++g) {
    if constexpr (FP8) {
      convert_row_natural<HEAD_DIM, BF16>(q_data + g * HEAD_DIM, q[g], table);
    } else {
      convert_row<HEAD_DIM, BF16>(q_data + g * HEAD_DIM, q[g], table);
    }
    for (int d = 0; d < HEAD_DIM; ++d) q[g][d] *= scale;
    state.running_max[g] = -INFINITY;
    state.running_sum[g] = 0.0f;
  }
  std::fill(state.acc, state.acc + padded_group * HEAD_DIM, 0.0f);
  const std::int32_t* block_table = p.block_tables + static_cast<long long>(seq) * p.max_blocks_per_seq;
  const auto* k_cache = static_cast<const KvElement*>(p.k_cache);
  const auto* v_cache = static_cast<const KvElement*>(p.v_cache);
  // Row offsets (elements from the cache base) of the current and the next
  // tile. The next tile's K and V rows are prefetched while this one is
  // computed: blocks sit at random places, so without it one thread waits on a
  // demand miss at every block boundary (measured: 1.2 GB/s per thread with
  // 16-token blocks against 2.4 GB/s with contiguous ones, before prefetching).
  long long offsets[2][kTileTokens];
  const long long head_element = static_cast<long long>(kv_head) * HEAD_DIM;
  const auto fill_offsets = [&](long long* out, int tile_start, int count) {
    row_offsets(p, block_table, tile_start, count, head_element, out);
  };
  constexpr int kLineElements = 64 / sizeof(KvElement);
  constexpr int kPrefetchTiles = KVS_PREFETCH_TILES;
  int current = 0;
  if (begin < end) fill_offsets(offsets[current], begin, std::min(kTileTokens, end - begin));

  for (int tile_start = begin; tile_start < end; tile_start += kTileTokens) {
    const int count = std::min(kTileTokens, end - tile_start);
    const int count4 = (count + 3) / 4 * 4;
    const long long* rows = offsets[current];
    const int next_start = tile_start + kTileTokens;
    if (next_start < end)
      fill_offsets(offsets[current ^ 1], next_start, std::min(kTileTokens, end - next_start));
    const int ahead_start = tile_start + kPrefetchTiles * kTileTokens;
    if (ahead_start < end) {
      const int ahead_count = std::min(kTileTokens, end - ahead_start);
      long long ahead[kTileTokens];
      fill_offsets(ahead, ahead_start, ahead_count);
      for (int t = 0; t < ahead_count; ++t) {
        for (int e = 0; e < HEAD_DIM; e += kLineElements) {
          __builtin_prefetch(k_cache + ahead[t] + e, 0, 2);
          __builtin_prefetch(v_cache + ahead[t] + e, 0, 2);
        }
      }
    }
    // K tile converted once; rows past count (last tile only) are zero.
    for (int t = 0; t < count; ++t) convert_row<HEAD_DIM, BF16>(k_cache + rows[t], tile[t], kv_table);
    for (int t = count; t < count4; ++t) std::fill(tile[t], tile[t] + HEAD_DIM, 0.0f);
    // Scores for two heads x four tokens at a time: 8 accumulators, each K
    // value loaded feeds two FMAs, one shuffle reduction per 8 dot products.
    for (int g = 0; g < padded_group; g += 2) {
      const float* __restrict qa = q[g];
      const float* __restrict qb = q[g + 1];
      for (int t = 0; t < count4; t += 4) {
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
    for (int t = 0; t < count; ++t) convert_row<HEAD_DIM, BF16>(v_cache + rows[t], tile[t], kv_table);
    // P x V for two heads x 32 dims at a time: 8 accumulators in registers
    // across the tile's tokens, each V value loaded feeds two FMAs.
    for (int g = 0; g < padded_group; g += 2) {
      const float ra = rescales[g], rb = rescales[g + 1];
      for (int d0 = 0; d0 < HEAD_DIM; d0 += 32) {
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
    current ^= 1;
  }
}

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

// Tokens [begin, end) of one task: the whole context, or split split_index.
struct TaskRange {
  int begin, end;
};
TaskRange task_range(const PagedDecodeParams& p, bool split, int seq, int split_index) {
  const int seq_len = p.seq_lens[seq];
  const int begin = split ? std::min(seq_len, split_index * p.tokens_per_split) : 0;
  const int end = split ? std::min(seq_len, begin + p.tokens_per_split) : seq_len;
  return {begin, end};
}

template <int HEAD_DIM, bool BF16, bool FP8>
[[gnu::always_inline]] inline void run_task(const PagedDecodeParams& p, bool split, int seq, int kv_head,
                                            int split_index, TaskState& state) {
  const TaskRange range = task_range(p, split, seq, split_index);
  attend_range<HEAD_DIM, BF16, FP8>(p, seq, kv_head, range.begin, range.end, state);
  // Only 16-bit bf16 rows are widened in even/odd order; fp8 rows and the q beside them are natural.
  write_task_output(p, split, seq, kv_head, split_index, state, BF16 && !FP8 ? kPortableBf16Interleave : 0);
}

// The q dtype x K/V storage instances of one head dimension (inlined into the
// cloned entry point below, so each clone gets them all).
template <int HEAD_DIM>
[[gnu::always_inline]] inline void run_task_types(const PagedDecodeParams& p, bool split, int seq,
                                                  int kv_head, int split_index, TaskState& state) {
  const bool bf16 = p.dtype == kernels::ElementType::bf16;
  if (p.kv_type == kernels::KvType::fp8_e4m3) {
    return bf16 ? run_task<HEAD_DIM, true, true>(p, split, seq, kv_head, split_index, state)
                : run_task<HEAD_DIM, false, true>(p, split, seq, kv_head, split_index, state);
  }
  return bf16 ? run_task<HEAD_DIM, true, false>(p, split, seq, kv_head, split_index, state)
              : run_task<HEAD_DIM, false, false>(p, split, seq, kv_head, split_index, state);
}

// The hot entry point, cloned for AVX2+FMA and a baseline x86-64 (GCC
// function multi-versioning picks one at load time).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KVS_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KVS_CPU_CLONES
#endif
KVS_CPU_CLONES void run_task_dispatch(const PagedDecodeParams& p, bool split, int seq, int kv_head,
                                      int split_index, TaskState& state) {
  dispatch_head_dim(p.head_dim, [&](auto head_dim) {
    run_task_types<decltype(head_dim)::value>(p, split, seq, kv_head, split_index, state);
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

// The backend's threads, started once when it opens (not per launch, so a
// timed launch holds no thread creation) and joined by the destructor.
// run(count, work) runs work(i) for i in [0, count) on the workers and the
// calling thread (dynamic assignment). If the OS refuses a thread (EAGAIN
// under a process or address-space limit), the constructor joins the ones
// it started and throws: a pool is never destroyed with running threads
// (issue #14 item 6: std::terminate before).
class ThreadPool {
 public:
  explicit ThreadPool(std::uint32_t threads) {
    workers_.reserve(threads - 1);
    for (std::uint32_t i = 1; i < threads; ++i) {
      try {
        workers_.emplace_back([this] { serve(); });
      } catch (const std::system_error& error) {
        stop();
        throw DeviceError("cpu: could not start thread " + std::to_string(i + 1) + " of " +
                          std::to_string(threads) + " (" + error.what() +
                          "); lower --threads (this machine has " +
                          std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
                          " hardware threads) or raise the process's thread / address-space limit");
      }
    }
  }
  ~ThreadPool() { stop(); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  std::uint32_t size() const { return static_cast<std::uint32_t>(workers_.size()) + 1; }

  template <typename Work>
  void run(long long count, const Work& work) {
    if (workers_.empty() || count <= 1) {
      for (long long i = 0; i < count; ++i) work(i);
      return;
    }
    const std::function<void(long long)> job = [&work](long long i) { work(i); };
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      count_ = count;
      next_.store(0);
      busy_ = workers_.size();
      ++generation_;
    }
    wake_.notify_all();
    drain(job, count);
    std::exception_ptr failure;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return busy_ == 0; });
      job_ = nullptr;
      failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
  }

 private:
  void drain(const std::function<void(long long)>& job, long long count) {
    for (long long i = next_.fetch_add(1); i < count; i = next_.fetch_add(1)) job(i);
  }
  void serve() {
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void(long long)>* job = nullptr;
      long long count = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
        count = count_;
      }
      std::exception_ptr failure;
      try {
        drain(*job, count);
      } catch (...) {
        failure = std::current_exception();
        next_.store(count);  // the others stop taking work
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure && !failure_) failure_ = failure;
      if (--busy_ == 0) done_.notify_one();
    }
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(long long)>* job_ = nullptr;
  long long count_ = 0;
  std::atomic<long long> next_{0};
  std::size_t busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
};

std::string read_first(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::uint64_t parse_cache_size(const std::string& text) {
  if (text.empty()) return 0;
  std::uint64_t value = std::strtoull(text.c_str(), nullptr, 10);
  if (text.back() == 'K') value *= 1024;
  if (text.back() == 'M') value *= 1024 * 1024;
  return value;
}

DeviceInfo describe_cpu(std::uint32_t threads) {
  DeviceInfo info;
  info.backend = "cpu";
  info.name = "cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && info.name == "cpu") info.name = value;
    if (key == "cpu MHz" && info.clock_mhz == 0) info.clock_mhz = std::atof(value.c_str());
  }
  struct utsname machine {};
  info.arch = uname(&machine) == 0 ? machine.machine : "unknown";
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t kib = 0;
    std::string unit;
    meminfo >> kib >> unit;
    if (key == "MemTotal:") info.memory_total = kib * 1024;
    if (key == "MemAvailable:") info.memory_free = kib * 1024;
  }
  // Under an address-space limit (ulimit -v) only what is left of it can be
  // allocated: the probes' budget (a fraction of memory_free) then refuses a
  // shape up front with --max-mem named, instead of a failed allocation
  // mid-run (issue #14 item 6). Left: the limit less this process's mappings
  // (VmSize) less one default stack per thread still to start.
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    std::uint64_t mapped = 0;
    std::ifstream status("/proc/self/status");
    for (std::string key; status >> key;) {
      std::uint64_t kib = 0;
      if (key == "VmSize:" && status >> kib) mapped = kib * 1024;
      status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    rlimit stack{};
    const std::uint64_t stack_bytes =
        getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY ? stack.rlim_cur : (8u << 20);
    const std::uint64_t reserved = mapped + static_cast<std::uint64_t>(threads) * stack_bytes;
    const std::uint64_t limit = address_space.rlim_cur;
    info.memory_free = std::min<std::uint64_t>(info.memory_free, limit > reserved ? limit - reserved : 0);
  }
  // Largest cache level that sysfs lists for cpu0.
  int best_level = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_first(base + "level");
    if (level.empty()) continue;
    const int level_number = std::atoi(level.c_str());
    if (level_number >= best_level) {
      best_level = level_number;
      info.last_level_cache = parse_cache_size(read_first(base + "size"));
    }
  }
  info.multiprocessors = threads;
  info.wave_size = 1;
  return info;
}

// Which paged-decode kernel the backend runs for one dtype.
enum class CpuKernel { portable, avx2, avx512_bf16, avx512_fp16 };
// The kernel of each dtype (--cpu-kernel). fp8 K/V (either q dtype) always take
// the portable kernel: the AVX2 and AVX-512 kernels read 16-bit rows only.
struct CpuKernels {
  CpuKernel bf16 = CpuKernel::portable;
  CpuKernel fp16 = CpuKernel::portable;
  CpuKernel fp8_e4m3 = CpuKernel::portable;
};

// Name of the portable kernel's clone this CPU gets.
std::string portable_kernel_name() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  return __builtin_cpu_supports("x86-64-v3") ? "portable (x86-64-v3 clone)" : "portable (baseline clone)";
#else
  return "portable";
#endif
}

constexpr const char* kCpuKernelChoices = "auto, avx512-bf16, avx512-fp16, avx2, portable";

// --cpu-kernel: auto gives each dtype the fastest kernel this CPU runs
// (bf16: avx512-bf16, else avx2, else portable; fp16: avx512-fp16, else
// avx2, else portable); avx512-bf16 forces it for bf16 and avx512-fp16 for
// fp16 (the other dtype as auto); avx2 forces the AVX2 kernel for both;
// portable the portable one for both. avx512-fp16 is VCVTPH2PS at 16 lanes
// (AVX-512 F), not the AVX512-FP16 arithmetic extension.
CpuKernels choose_cpu_kernel(const std::string& requested) {
  const bool avx2 = cpu_has_avx2_f16c();
  const CpuKernel best_avx2 = avx2 ? CpuKernel::avx2 : CpuKernel::portable;
  const CpuKernel best_bf16 = cpu_has_avx512_bf16() ? CpuKernel::avx512_bf16 : best_avx2;
  const CpuKernel best_fp16 = cpu_has_avx512() && avx2 ? CpuKernel::avx512_fp16 : best_avx2;
  if (requested == "auto") return {best_bf16, best_fp16, CpuKernel::portable};
  if (requested == "portable") return {CpuKernel::portable, CpuKernel::portable, CpuKernel::portable};
  if (requested == "avx2") {
    if (!avx2) {
      throw InputError("--cpu-kernel",
                       "avx2 needs AVX2 with FMA and F16C (x86-64-v3: AMD Zen and later, Intel Haswell and "
                       "later), which this CPU lacks; allowed here: auto, portable");
    }
    return {CpuKernel::avx2, CpuKernel::avx2, CpuKernel::portable};
  }
  if (requested == "avx512-bf16") {
    if (!cpu_has_avx512_bf16()) {
      throw InputError("--cpu-kernel",
                       std::string("avx512-bf16 needs AVX-512 with the BF16 extension (AMD Zen 4 and later, "
                                   "Intel Cooper Lake / Sapphire Rapids and later), which this CPU lacks; "
                                   "allowed here: auto, ") +
                           (avx2 ? "avx2, " : "") + "portable");
    }
    return {CpuKernel::avx512_bf16, best_fp16, CpuKernel::portable};
  }
  if (requested == "avx512-fp16") {
    if (!cpu_has_avx512() || !avx2) {
      throw InputError(
          "--cpu-kernel",
          std::string("avx512-fp16 needs AVX-512 F/BW/DQ/VL (Intel Skylake-SP and later server "
                      "parts, AMD Zen 4 and later), which this CPU lacks; allowed here: auto, ") +
              (avx2 ? "avx2, " : "") + "portable");
    }
    return {best_bf16, CpuKernel::avx512_fp16, CpuKernel::portable};
  }
  throw InputError("--cpu-kernel", "'" + requested + "' unknown; allowed: " + kCpuKernelChoices);
}

std::string cpu_kernel_name(CpuKernel kernel) {
  switch (kernel) {
    case CpuKernel::avx2:
      return "avx2";
    case CpuKernel::avx512_bf16:
      return "avx512-bf16";
    case CpuKernel::avx512_fp16:
      return "avx512-fp16";
    default:
      return portable_kernel_name();
  }
}
// What probe info and every probe result show: the kernel of each dtype.
std::string cpu_kernel_name(const CpuKernels& kernels) {
  return "bf16: " + cpu_kernel_name(kernels.bf16) + "; fp16: " + cpu_kernel_name(kernels.fp16) +
         "; fp8_e4m3 K/V: " + cpu_kernel_name(kernels.fp8_e4m3);
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::uint32_t threads, CpuKernels kernel)
      : threads_(threads), kernel_(kernel), info_(describe_cpu(threads)), pool_(threads) {
    info_.cpu_kernel = cpu_kernel_name(kernel);
  }
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<DeviceBuffer> allocate(std::uint64_t bytes) override {
    return std::make_unique<HostBuffer>(bytes);
  }
  void upload(DeviceBuffer& destination, const void* source, std::uint64_t bytes) override {
    std::memcpy(destination.data(), source, bytes);
  }
  void download(void* destination, const DeviceBuffer& source, std::uint64_t bytes) override {
    std::memcpy(destination, source.data(), bytes);
  }
  double time_attention(bool split, const PagedDecodeParams& p) override {
    const auto start = std::chrono::steady_clock::now();
    const int splits = split ? p.num_splits : 1;
    // A task is (sequence, group of adjacent KV heads, split). The AVX-512
    // kernel takes several heads per task: the heads of a token are adjacent
    // in the paged layout, so a task reads each block as one contiguous run,
    // as a GPU does when all heads' programs run at once (one head alone
    // reads 256 B at a 2 KiB stride). The AVX2 kernel does the same; the
    // portable kernel takes one.
    const CpuKernel kernel = kernel_for(p);
    const bool wide = kernel != CpuKernel::portable;
    const int heads = wide ? heads_per_task_for(p.num_kv_heads, p.head_dim,
                                                static_cast<long long>(p.num_seqs) * splits, threads_)
                           : 1;
    const int head_groups = p.num_kv_heads / heads;
    const long long tasks = static_cast<long long>(p.num_seqs) * head_groups * splits;
    pool_.run(tasks, [&](long long task) {
      thread_local std::vector<TaskState> states;
      if (states.size() < static_cast<std::size_t>(heads)) states.resize(static_cast<std::size_t>(heads));
      const int split_index = static_cast<int>(task % splits);
      const int first_head = static_cast<int>((task / splits) % head_groups) * heads;
      const int seq = static_cast<int>(task / splits / head_groups);
      if (!wide) {
        run_task_dispatch(p, split, seq, first_head, split_index, states[0]);
        return;
      }
      const TaskRange range = task_range(p, split, seq, split_index);
      if (kernel == CpuKernel::avx512_bf16) {
        attend_avx512_bf16(p, seq, first_head, heads, range.begin, range.end, states.data());
      } else if (kernel == CpuKernel::avx512_fp16) {
        attend_avx512_fp16(p, seq, first_head, heads, range.begin, range.end, states.data());
      } else {
        attend_avx2(p, seq, first_head, heads, range.begin, range.end, states.data());
      }
      // The order the kernel leaves its accumulators in (cpu_kernel.hpp).
      int interleave = 0;
      if (kernel == CpuKernel::avx512_bf16) {
        interleave = kAvx512Bf16Interleave;
      } else if (p.dtype == kernels::ElementType::bf16) {
        interleave = kAvx2Bf16Interleave;
      }
      for (int h = 0; h < heads; ++h) {
        write_task_output(p, split, seq, first_head + h, split_index, states[static_cast<std::size_t>(h)],
                          interleave);
      }
    });
    if (split) {
      const long long q_heads = static_cast<long long>(p.num_seqs) * p.num_kv_heads * p.q_per_kv;
      pool_.run(q_heads, [&](long long head) { reduce_head(p, head); });
    }
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count();
  }
  std::uint32_t stream_read_parts() const override { return threads_; }
  // The kernel this launch's q dtype and K/V storage get (CpuKernels).
  CpuKernel kernel_for(const PagedDecodeParams& p) const {
    if (p.kv_type == kernels::KvType::fp8_e4m3) return kernel_.fp8_e4m3;
    return p.dtype == kernels::ElementType::bf16 ? kernel_.bf16 : kernel_.fp16;
  }
  double time_stream_read(const DeviceBuffer& source, std::uint64_t bytes, DeviceBuffer& parts) override {
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t words = bytes / 4;
    const auto* data = static_cast<const std::uint32_t*>(source.data());
    auto* out = static_cast<std::uint32_t*>(parts.data());
    pool_.run(threads_, [&](long long part) {
      const std::uint64_t first = words * static_cast<std::uint64_t>(part) / threads_;
      const std::uint64_t last = words * static_cast<std::uint64_t>(part + 1) / threads_;
      out[part] = sum_words(data + first, last - first);
    });
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count();
  }
  double time_stream_copy(const DeviceBuffer& source, DeviceBuffer& destination,
                          std::uint64_t bytes) override {
    const auto start = std::chrono::steady_clock::now();
    const auto* from = static_cast<const char*>(source.data());
    auto* to = static_cast<char*>(destination.data());
    pool_.run(threads_, [&](long long part) {
      const std::uint64_t first = bytes * static_cast<std::uint64_t>(part) / threads_;
      const std::uint64_t last = bytes * static_cast<std::uint64_t>(part + 1) / threads_;
      std::memcpy(to + first, from + first, last - first);
    });
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count();
  }

 private:
  // Wrapping 32-bit sum: exact and order-independent, as the GPU stream_read.
  static KVS_CPU_CLONES std::uint32_t sum_words(const std::uint32_t* data, std::uint64_t count) {
    std::uint32_t partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::uint64_t i = 0;
    for (; i + 8 <= count; i += 8) {
      for (int j = 0; j < 8; ++j) partial[j] += data[i + j];
    }
    std::uint32_t sum = 0;
    for (; i < count; ++i) sum += data[i];
    for (int j = 0; j < 8; ++j) sum += partial[j];
    return sum;
  }
  std::uint32_t threads_;
  CpuKernels kernel_;
  DeviceInfo info_;
  ThreadPool pool_;
};

std::uint32_t default_threads(std::uint32_t requested) {
  if (requested > 0) return requested;
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? hardware : 1;
}

}  // namespace

// KV heads one task walks together: the largest divisor of the KV head count
// that still gives every thread two tasks (else 1: one head per task, as the
// portable kernel), with at most 2048 row elements per task (a 32-token tile
// of K and V for all of them, 256 KiB of bf16, stays in a core's L2).
int heads_per_task_for(int num_kv_heads, int head_dim, long long seqs_x_splits, std::uint32_t threads) {
  for (int heads = num_kv_heads; heads > 1; --heads) {
    if (num_kv_heads % heads != 0 || static_cast<long long>(heads) * head_dim > 2048) continue;
    if (seqs_x_splits * (num_kv_heads / heads) >= 2LL * threads) return heads;
  }
  return 1;
}

BackendInfo cpu_discover() {
  BackendInfo out;
  out.name = "cpu";
  out.compiled = true;
  out.status = "ok";
  out.devices.push_back(describe_cpu(default_threads(0)));
  out.devices.back().cpu_kernel = cpu_kernel_name(choose_cpu_kernel("auto"));
  return out;
}

std::unique_ptr<Backend> cpu_open(std::uint32_t threads, const std::string& kernel) {
  return std::make_unique<CpuBackend>(default_threads(threads), choose_cpu_kernel(kernel));
}

}  // namespace kvsight::probes::detail
