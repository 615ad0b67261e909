#pragma once
// The backend interface (BabelStream-style: one abstract class, one
// implementation per programming model). A backend owns device memory and runs
// the kernels; the host logic (data, rotation, timing statistics, reference
// check) lives once in session.cpp, statistics.cpp, sweeps.cpp and bandwidth.cpp.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../kernels/paged_decode_params.hpp"
#include "kvsight/probes/probes.hpp"

namespace kvsight::probes::detail {

// Device memory, freed by the destructor (RAII on every path).
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() const = 0;
  virtual std::uint64_t bytes() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual std::unique_ptr<DeviceBuffer> allocate(std::uint64_t bytes) = 0;
  virtual void upload(DeviceBuffer& destination, const void* source, std::uint64_t bytes) = 0;
  virtual void download(void* destination, const DeviceBuffer& source, std::uint64_t bytes) = 0;
  // One launch, timed: device events on GPUs, steady_clock on cpu. Microseconds.
  virtual double time_attention(bool split, const kernels::PagedDecodeParams& params) = 0;
  // The launches one after another inside one timed interval (microseconds for
  // all of them): GPUs put them back to back between two events, so the host's
  // launch latency is out of the figure. Default: timed one at a time.
  virtual double time_attention_batch(bool split, const std::vector<kernels::PagedDecodeParams>& launches) {
    double total = 0;
    for (const kernels::PagedDecodeParams& params : launches) total += time_attention(split, params);
    return total;
  }
  // Programs of the split kernel for this shape that one SM/CU runs at once (the
  // split planner's occupancy input). Default 1: a cpu thread runs one task.
  virtual std::uint32_t attention_occupancy(const kernels::PagedDecodeParams& params) {
    (void)params;
    return 1;
  }
  // Evicts the last-level cache before a kernel's first timed launch. Default: nothing.
  virtual void flush_cache() {}
  // Number of partial sums stream_read writes (the host adds them).
  virtual std::uint32_t stream_read_parts() const = 0;
  virtual double time_stream_read(const DeviceBuffer& source, std::uint64_t bytes, DeviceBuffer& parts) = 0;
  virtual double time_stream_copy(const DeviceBuffer& source, DeviceBuffer& destination,
                                  std::uint64_t bytes) = 0;
};

// Each backend: discovery (never throws) and opening a device (throws DeviceError).
BackendInfo cpu_discover();
// kernel: auto | avx512-bf16 | avx512-fp16 | avx2 | portable (ProbeOptions::cpu_kernel).
std::unique_ptr<Backend> cpu_open(std::uint32_t threads, const std::string& kernel = "auto");
BackendInfo cuda_discover();
std::unique_ptr<Backend> cuda_open(int device);
BackendInfo hip_discover();
std::unique_ptr<Backend> hip_open(int device);

// backend name (auto|cpu|cuda|hip) -> an opened backend, or InputError/DeviceError.
std::unique_ptr<Backend> open_backend(const std::string& name, const ProbeOptions& options);

}  // namespace kvsight::probes::detail
