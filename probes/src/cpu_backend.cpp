// The cpu backend: the paged-decode algorithms of kernels/paged_decode.cuh and
// the stream kernels on std::threads (cpu_thread_pool.hpp) over host memory, so
// every probe runs and is tested on a machine with no GPU. Each launch goes to
// the kernel chosen for its dtype (--cpu-kernel): the 16-lane kernels of
// cpu_kernel_avx512.cpp where the CPU has AVX-512 (with BF16 for bf16), else the
// AVX2 kernel of cpu_kernel_avx2.cpp, else the portable kernel of
// cpu_kernel_portable.cpp; its device is the CPU (cpu_discovery.cpp).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "cpu_discovery.hpp"
#include "cpu_kernel.hpp"
#include "cpu_thread_pool.hpp"
#include "kvsight/error.hpp"

namespace kvsight::probes::detail {
namespace {

using kernels::PagedDecodeParams;

constexpr std::size_t kHugePage = 2u << 20;

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

// Which paged-decode kernel the backend runs for one dtype.
enum class CpuKernel { portable, avx2, avx512_bf16, avx512_fp16 };
// The kernel of each dtype (--cpu-kernel). fp8 K/V (either q dtype) take the
// kernel fp16 takes: the AVX2 and AVX-512 fp16 kernels widen E4M3 through fp16
// (cpu_kernel_avx2.cpp widen16) and then run as for fp16.
struct CpuKernels {
  CpuKernel bf16 = CpuKernel::portable;
  CpuKernel fp16 = CpuKernel::portable;
  CpuKernel fp8_e4m3 = CpuKernel::portable;
  bool dense_tile_reads = true;  // the AVX2 / AVX-512 kernels' touch_tile (dense_tile_reads_pay)
};

// Whether the AVX2 and AVX-512 kernels should read each tile densely before
// computing on it, on top of the next-tile prefetch, on this CPU. Measured,
// per vendor (docs/measurements.md):
//  - Intel (Emerald Rapids, 2026-12-06, interleaved A/B at issue #24's
//    headline shape): without the dense pass avx512-bf16 0.88 against 0.76 of
//    the stream read, avx512-fp16 0.83 against 0.78, avx2 0.77 / 0.81 against
//    0.74 / 0.71. A task's tile (up to 256 KiB) does not fit L1, so the dense
//    pass only moves every line from L2 to L1 twice, and its loads compete with
//    the kernel's own for the load ports.
//  - AMD (Zen 5, 2026-12-01): dense plain loads 34-39 GB/s against 18-29 for
//    software prefetches alone (before NextTilePrefetch spread them over the
//    compute; the pair of them has not been measured on an AMD CPU), so AMD
//    and any other vendor keep the dense pass until it is.
bool dense_tile_reads_pay() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return !__builtin_cpu_is("intel");
#else
  return true;
#endif
}

constexpr const char* kCpuKernelChoices = "auto, avx512-bf16, avx512-fp16, avx2, portable";

// --cpu-kernel: auto gives each dtype the fastest kernel this CPU runs
// (bf16: avx512-bf16, else avx2, else portable; fp16 and fp8 K/V:
// avx512-fp16, else avx2, else portable); avx512-bf16 forces it for bf16 and
// avx512-fp16 for fp16 and fp8 K/V (the others as auto); avx2 forces the
// AVX2 kernel for all three; portable the portable one for all three.
// avx512-fp16 is VCVTPH2PS at 16 lanes (AVX-512 F), not the AVX512-FP16
// arithmetic extension.
CpuKernels choose_kernel_per_dtype(const std::string& requested) {
  const bool avx2 = cpu_has_avx2_f16c();
  const CpuKernel best_avx2 = avx2 ? CpuKernel::avx2 : CpuKernel::portable;
  const CpuKernel best_bf16 = cpu_has_avx512_bf16() ? CpuKernel::avx512_bf16 : best_avx2;
  const CpuKernel best_fp16 = cpu_has_avx512() && avx2 ? CpuKernel::avx512_fp16 : best_avx2;
  if (requested == "auto") return {best_bf16, best_fp16, best_fp16};
  if (requested == "portable") return {CpuKernel::portable, CpuKernel::portable, CpuKernel::portable};
  if (requested == "avx2") {
    if (!avx2) {
      throw InputError("--cpu-kernel",
                       "avx2 needs AVX2 with FMA and F16C (x86-64-v3: AMD Zen and later, Intel Haswell and "
                       "later), which this CPU lacks; allowed here: auto, portable");
    }
    return {CpuKernel::avx2, CpuKernel::avx2, CpuKernel::avx2};
  }
  if (requested == "avx512-bf16") {
    if (!cpu_has_avx512_bf16()) {
      throw InputError("--cpu-kernel",
                       std::string("avx512-bf16 needs AVX-512 with the BF16 extension (AMD Zen 4 and later, "
                                   "Intel Cooper Lake / Sapphire Rapids and later), which this CPU lacks; "
                                   "allowed here: auto, ") +
                           (avx2 ? "avx2, " : "") + "portable");
    }
    return {CpuKernel::avx512_bf16, best_fp16, best_fp16};
  }
  if (requested == "avx512-fp16") {
    if (!cpu_has_avx512() || !avx2) {
      throw InputError(
          "--cpu-kernel",
          std::string("avx512-fp16 needs AVX-512 F/BW/DQ/VL (Intel Skylake-SP and later server "
                      "parts, AMD Zen 4 and later), which this CPU lacks; allowed here: auto, ") +
              (avx2 ? "avx2, " : "") + "portable");
    }
    return {best_bf16, CpuKernel::avx512_fp16, CpuKernel::avx512_fp16};
  }
  throw InputError("--cpu-kernel", "'" + requested + "' unknown; allowed: " + kCpuKernelChoices);
}

CpuKernels choose_cpu_kernel(const std::string& requested) {
  CpuKernels kernels = choose_kernel_per_dtype(requested);
  kernels.dense_tile_reads = dense_tile_reads_pay();
  return kernels;
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
         "; fp8_e4m3 K/V: " + cpu_kernel_name(kernels.fp8_e4m3) +
         (kernels.dense_tile_reads ? "; tile reads: dense + prefetch" : "; tile reads: prefetch");
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
    // A task is (sequence, group of adjacent KV heads, split). Every kernel
    // takes several heads per task: the heads of a token are adjacent in the
    // paged layout, so a task reads each block as one contiguous run, as a GPU
    // does when all heads' programs run at once (one head alone reads 256 B at
    // a 2 KiB stride).
    const CpuKernel kernel = kernel_for(p);
    const int heads =
        heads_per_task_for(p.num_kv_heads, p.head_dim, static_cast<long long>(p.num_seqs) * splits, threads_);
    const int head_groups = p.num_kv_heads / heads;
    const long long tasks = static_cast<long long>(p.num_seqs) * head_groups * splits;
    // The order each kernel leaves its accumulators in (cpu_kernel.hpp).
    const bool bf16_rows = p.dtype == kernels::ElementType::bf16 && p.kv_type != kernels::KvType::fp8_e4m3;
    int interleave = 0;
    if (kernel == CpuKernel::avx512_bf16) {
      interleave = kAvx512Bf16Interleave;
    } else if (kernel == CpuKernel::avx2 && bf16_rows) {
      interleave = kAvx2Bf16Interleave;
    } else if (kernel == CpuKernel::portable && bf16_rows) {
      interleave = kPortableBf16Interleave;
    }
    const bool dense = kernel_.dense_tile_reads;
    pool_.run(tasks, [&](long long task) {
      thread_local std::vector<TaskState> states;
      if (states.size() < static_cast<std::size_t>(heads)) states.resize(static_cast<std::size_t>(heads));
      const int split_index = static_cast<int>(task % splits);
      const int first_head = static_cast<int>((task / splits) % head_groups) * heads;
      const int seq = static_cast<int>(task / splits / head_groups);
      const TaskRange range = task_range(p, split, seq, split_index);
      if (kernel == CpuKernel::avx512_bf16) {
        attend_avx512_bf16(p, seq, first_head, heads, range.begin, range.end, states.data(), dense);
      } else if (kernel == CpuKernel::avx512_fp16) {
        attend_avx512_fp16(p, seq, first_head, heads, range.begin, range.end, states.data(), dense);
      } else if (kernel == CpuKernel::avx2) {
        attend_avx2(p, seq, first_head, heads, range.begin, range.end, states.data(), dense);
      } else {
        attend_portable(p, seq, first_head, heads, range.begin, range.end, states.data());
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
// that still gives every thread two tasks (else 1: one head per task), with at most 2048 row elements per
// task (a 32-token tile of K and V for all of them, 256 KiB of bf16, stays in a core's L2).
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
