#pragma once
// What the cpu backend's paged-decode kernels share: the per-task state and
// the kernel variants the backend can pick (portable vector code, cloned for
// x86-64-v3; an AVX2 + FMA + F16C kernel for bf16 and fp16; AVX-512 kernels,
// for bf16 where the CPU has the BF16 extension and for fp16 with AVX-512 F).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../../kernels/paged_decode_params.hpp"
#include "kvsight/error.hpp"

namespace kvsight::probes::detail {

// Alignment of the kernels' tiles and of the backend's buffers: one cache line.
constexpr std::size_t kAlignment = 64;

// A hot entry point cloned for x86-64-v3 (AVX2 + FMA) and a baseline x86-64 (GCC
// function multi-versioning picks one at load time): the portable kernel's
// attend_portable and the backend's stream read.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KVS_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KVS_CPU_CLONES
#endif

// This thread's scratch for a task's q in fp32: `floats` floats, aligned to
// kAlignment (so every kernel's aligned vector loads of q hold), grown as
// needed and reused by the thread's later tasks (a thread runs one task at a
// time, whatever its kernel).
inline float* task_q_scratch(std::size_t floats) {
  thread_local std::vector<float> buffer;
  constexpr std::size_t slack = kAlignment / sizeof(float);
  if (buffer.size() < floats + slack) buffer.resize(floats + slack);
  float* q = buffer.data();
  while (reinterpret_cast<std::uintptr_t>(q) % kAlignment != 0) ++q;
  return q;
}

// How a task's K and V rows are stored, for the AVX kernels' templates: bf16 or
// fp16 (q's dtype), or fp8 E4M3 bytes beside a bf16 or fp16 q
// (kernels::KvType::fp8_e4m3).
enum class KvRows { bf16, fp16, fp8 };
template <KvRows R>
using KvRowElement = std::conditional_t<R == KvRows::fp8, std::uint8_t, std::uint16_t>;

// The AVX kernels widen an fp8 E4M3 byte through binary16, S.EEEE.MMM ->
// S.0EEEE.MMM0000000, which is exactly the value / 2^8 (docs/reference/
// cpu-kernels.md "fp8 E4M3 K/V"). They multiply q's scale by this (K's share)
// and each task's accumulators at its end (V's, unscale_fp8_accumulators):
// exact, a power of two.
constexpr float kFp8ThroughFp16 = 256.0f;

// Output of one task (sequence, KV head, split): unnormalised accumulators
// [q_per_kv][head_dim], running max and sum per query head.
struct TaskState {
  alignas(64) float acc[kernels::kMaxGqa * 256];
  float running_max[kernels::kMaxGqa];
  float running_sum[kernels::kMaxGqa];
};

// What every kernel multiplies q by once per task: the softmax scale and K's
// dequantization scale (1 unless fp8) folded together (paged_decode_params.hpp:
// FlashInfer's sm_scale *= k_scale).
inline float task_q_scale(const kernels::PagedDecodeParams& p) { return p.scale * p.k_scale; }

// task_q_scale for an AVX kernel reading rows R: fp8 rows, widened through
// binary16, also take K's share of kFp8ThroughFp16.
template <KvRows R>
float avx_task_q_scale(const kernels::PagedDecodeParams& p) {
  return R == KvRows::fp8 ? task_q_scale(p) * kFp8ThroughFp16 : task_q_scale(p);
}

// V's share of kFp8ThroughFp16: the first `floats` accumulators of each of a
// task's heads times 2^8.
inline void unscale_fp8_accumulators(TaskState* states, int kv_head_count, int floats) {
  for (int h = 0; h < kv_head_count; ++h) {
    for (int i = 0; i < floats; ++i) states[h].acc[i] *= kFp8ThroughFp16;
  }
}

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

// The next tile's rows, fetched towards L2 (PREFETCHT2 on x86-64, what
// __builtin_prefetch with locality 1 emits; PRFM PLDL2KEEP on AArch64) a few
// 64-byte lines at a time from inside this tile's compute loops, so that its
// DRAM misses are in flight while the FMAs run; the next tile's first touch
// then finds them in L2. Every cpu kernel uses it. Spread evenly: whole slices
// at once (per head, or a tile in bulk) kept too many misses queued behind
// each other and halved the speed (docs/measurements.md; the portable kernel's
// bulk prefetch two tiles ahead ran at 0.36 of the stream read, issue #24).
class NextTilePrefetch {
 public:
  // k, v: the caches at the task's first head; row_elements: K/V elements of
  // one row of the task's heads (a multiple of 64 bytes); element_bytes: bytes
  // of one element (row offsets count elements); end: the task's last token + 1.
  NextTilePrefetch(const kernels::PagedDecodeParams& p, const std::int32_t* block_table, const void* k,
                   const void* v, int row_elements, int element_bytes, int end)
      : p_(p),
        table_(block_table),
        k_(static_cast<const char*>(k)),
        v_(static_cast<const char*>(v)),
        row_bytes_(static_cast<long long>(row_elements) * element_bytes),
        lines_per_row_(row_elements * element_bytes / 64),
        element_bytes_(element_bytes),
        end_(end) {}

  // Queues the rows of the tile after the one at tile_start, to go out over
  // the issue_points issue() calls the kernel makes while computing this tile.
  void queue_after(int tile_start, int issue_points) {
    const int next_start = tile_start + kernels::kTileTokens;
    rows_ = next_start < end_ ? std::min(kernels::kTileTokens, end_ - next_start) : 0;
    if (rows_ > 0) row_offsets(p_, table_, next_start, rows_, 0, offsets_);
    for (int r = 0; r < rows_; ++r) offsets_[r] *= element_bytes_;
    row_ = 0;
    byte_ = row_end_ = 0;  // the first issue() starts row 0
    const int points = issue_points > 0 ? issue_points : 1;
    per_call_ = (rows_ * lines_per_row_ + points - 1) / points;
  }

  // A few lines (per_call_) of K and V; the cursor walks a row's lines by
  // adding 64 to one byte offset that both caches share.
  __attribute__((always_inline)) void issue() {
    for (int n = per_call_; n > 0; --n) {
      if (byte_ == row_end_) {
        if (row_ == rows_) return;
        byte_ = offsets_[row_++];
        row_end_ = byte_ + row_bytes_;
      }
      __builtin_prefetch(k_ + byte_, 0, 1);
      __builtin_prefetch(v_ + byte_, 0, 1);
      byte_ += 64;
    }
  }
  // Issues what the tile's compute left (when its issue points were fewer than counted).
  void finish() {
    per_call_ = rows_ * lines_per_row_;
    issue();
  }

 private:
  const kernels::PagedDecodeParams& p_;
  const std::int32_t* table_;
  const char* k_;
  const char* v_;
  long long row_bytes_;
  int lines_per_row_;
  int element_bytes_;
  int end_;
  long long offsets_[kernels::kTileTokens];  // byte offsets of the queued rows (element offsets until scaled)
  int rows_ = 0, per_call_ = 0;
  int row_ = 0;                       // the next row to start
  long long byte_ = 0, row_end_ = 0;  // cursor: the next line's byte offset, and the end of its row
};

// The head dimensions the x86 kernels are instantiated for: calls
// f(std::integral_constant<int, HEAD_DIM>{}), or refuses --head-dim. Always
// inlined: inside a target_clones function (KVS_CPU_CLONES) only what is inlined
// is compiled for the clone's target; a called dispatch_head_dim, and the lambda
// it calls, would be compiled for the baseline (issue #24 item 5: the portable
// kernel ran its baseline SSE2 code in both clones).
template <typename F>
[[gnu::always_inline]] inline void dispatch_head_dim(int head_dim, F&& f) {
  using kernels::kHeadDims;
  static_assert(sizeof(kHeadDims) / sizeof(int) == 3, "one case per compiled head dim");
  switch (head_dim) {
    case kHeadDims[0]:
      return f(std::integral_constant<int, kHeadDims[0]>{});
    case kHeadDims[1]:
      return f(std::integral_constant<int, kHeadDims[1]>{});
    case kHeadDims[2]:
      return f(std::integral_constant<int, kHeadDims[2]>{});
    default:
      throw InputError("--head-dim",
                       std::to_string(head_dim) + " not supported; allowed: " + kernels::head_dims_text());
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

// Tokens [begin, end) of one task: the whole context, or split split_index.
struct TaskRange {
  int begin, end;
};
TaskRange task_range(const kernels::PagedDecodeParams& p, bool split, int seq, int split_index);

// Writes a finished task's accumulators (every kernel's): its partial (split-KV)
// or its normalised output; interleave is the order state.acc is in (above).
void write_task_output(const kernels::PagedDecodeParams& p, bool split, int seq, int kv_head, int split_index,
                       const TaskState& state, int interleave);

// The portable kernel (cpu_kernel_portable.cpp), for any q dtype and K/V storage,
// cloned for x86-64-v3: the same walk as attend_avx512_bf16 below, accumulators
// in kPortableBf16Interleave order for 16-bit bf16 K/V, natural otherwise.
void attend_portable(const kernels::PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                     int begin, int end, TaskState* states);

// The split-KV reduce of one query head's partials into its output.
void reduce_head(const kernels::PagedDecodeParams& p, long long head);

// Name of the portable kernel's clone this CPU gets ("portable (x86-64-v3 clone)").
std::string portable_kernel_name();

// KV heads one task of any cpu kernel walks together (cpu_backend.cpp).
int heads_per_task_for(int num_kv_heads, int head_dim, long long seqs_x_splits, std::uint32_t threads);

// True when this CPU and OS run AVX-512 F/BW/DQ/VL (Intel Skylake-SP and
// later server parts, AMD Zen 4 and later).
bool cpu_has_avx512();

// True when they also run the BF16 extension (Intel Cooper Lake / Sapphire
// Rapids and later, AMD Zen 4 and later).
bool cpu_has_avx512_bf16();

// Whether the AVX2 and AVX-512 kernels first read each tile's rows with
// dense plain loads (touch_tile) before computing on them, besides
// prefetching the next tile (NextTilePrefetch). Decided per CPU vendor by
// measurement (cpu_backend.cpp, dense_tile_reads_pay).

// The AVX-512 BF16 kernel for bf16 q/K/V: attends tokens [begin, end) of
// KV heads [first_kv_head, first_kv_head + kv_head_count) of one sequence,
// tile by tile with the heads in lockstep, and leaves states[h].acc in
// kAvx512Bf16Interleave order. Only call it when cpu_has_avx512_bf16().
void attend_avx512_bf16(const kernels::PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                        int begin, int end, TaskState* states, bool dense_tile_reads);

// The AVX-512 kernel for fp16 q/K/V, and for fp8 E4M3 K/V beside a bf16 or
// fp16 q (widened through fp16, as the AVX2 kernel does) (cpu_kernel_avx512.cpp):
// the same walk, accumulators in natural order. Only call it when
// cpu_has_avx512().
void attend_avx512_fp16(const kernels::PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                        int begin, int end, TaskState* states, bool dense_tile_reads);

// True when this CPU and OS run AVX2 with FMA and F16C (x86-64-v3: AMD
// Zen 1 and later, Intel Haswell and later).
bool cpu_has_avx2_f16c();

// The AVX2 + FMA + F16C kernel (cpu_kernel_avx2.cpp) for bf16 and fp16 q/K/V
// and for fp8 E4M3 K/V beside either q: the same walk as attend_avx512_bf16,
// accumulators in kAvx2Bf16Interleave order for bf16 K/V, natural otherwise.
// Only call it when cpu_has_avx2_f16c().
void attend_avx2(const kernels::PagedDecodeParams& p, int seq, int first_kv_head, int kv_head_count,
                 int begin, int end, TaskState* states, bool dense_tile_reads);

// The AVX2 kernel's fp8 E4M3 widening of 16 bytes, its 2^-8 taken back out:
// the 16 values as fp32, for the unit test of every code. Only call it when
// cpu_has_avx2_f16c().
void widen_fp8x16_avx2(const std::uint8_t* bytes, float* out);
// The same for the AVX-512 kernel's widening, 32 bytes. Only call it when
// cpu_has_avx512().
void widen_fp8x32_avx512(const std::uint8_t* bytes, float* out);

}  // namespace kvsight::probes::detail
