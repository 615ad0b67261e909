// GPU backend, one source for CUDA and HIP: included by probes/cuda/cuda_backend.cu
// (nvcc) and probes/hip/hip_backend.hip.cpp (hipcc), which define
// KVS_BACKEND_NAME, KVS_DISCOVER and KVS_OPEN first. The runtime calls are
// spelled in CUDA and mapped to HIP by kernels/portability.cuh. Every runtime
// error becomes a DeviceError carrying the driver's own message.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../kernels/paged_decode.cuh"
#include "../../kernels/stream.cuh"
#include "../src/backend.hpp"
#include "kvsight/error.hpp"

namespace kvsight::probes::detail {
namespace {

std::string runtime_message(cudaError_t error) {
  return std::string(cudaGetErrorString(error)) + " (error " + std::to_string(static_cast<int>(error)) + ")";
}

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw DeviceError(std::string(KVS_BACKEND_NAME) + ": " + what + " failed: " + runtime_message(error));
  }
}

class GpuBuffer final : public DeviceBuffer {
 public:
  explicit GpuBuffer(std::uint64_t bytes) : bytes_(bytes) {
    check(cudaMalloc(&data_, std::max<std::uint64_t>(bytes, 16)), "device allocation");
  }
  ~GpuBuffer() override { (void)cudaFree(data_); }
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;
  void* data() const override { return data_; }
  std::uint64_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// Two events around one launch; destroyed on every path.
class EventPair {
 public:
  EventPair() {
    check(cudaEventCreate(&start_), "event create");
    const cudaError_t error = cudaEventCreate(&stop_);
    if (error != cudaSuccess) {
      (void)cudaEventDestroy(start_);
      check(error, "event create");
    }
  }
  ~EventPair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start() { check(cudaEventRecord(start_, 0), "event record"); }
  double stop_us() {
    check(cudaGetLastError(), "kernel launch");
    check(cudaEventRecord(stop_, 0), "event record");
    check(cudaEventSynchronize(stop_), "kernel execution");
    float milliseconds = 0;
    check(cudaEventElapsedTime(&milliseconds, start_, stop_), "event elapsed time");
    return static_cast<double>(milliseconds) * 1000.0;
  }

 private:
  cudaEvent_t start_{};
  cudaEvent_t stop_{};
};

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return value;
}

std::string arch_name(const cudaDeviceProp& prop) {
#if KVS_HIP
  // gcnArchName reads like "gfx90a:sramecc+:xnack-": keep the processor.
  std::string name = prop.gcnArchName;
  return name.substr(0, name.find(':'));
#else
  return "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
#endif
}

DeviceInfo describe(int device) {
  check(cudaSetDevice(device), "set device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "get device properties");
  DeviceInfo info;
  info.backend = KVS_BACKEND_NAME;
  info.index = device;
  info.name = prop.name;
  info.arch = arch_name(prop);
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "memory info");
  info.memory_total = total_bytes;
  info.memory_free = free_bytes;
  info.multiprocessors = static_cast<std::uint32_t>(attribute(cudaDevAttrMultiProcessorCount, device));
  info.last_level_cache = static_cast<std::uint64_t>(attribute(cudaDevAttrL2CacheSize, device));
  info.clock_mhz = attribute(cudaDevAttrClockRate, device) / 1000.0;  // kHz
  info.memory_clock_mhz = attribute(cudaDevAttrMemoryClockRate, device) / 1000.0;
  info.memory_bus_bits = static_cast<std::uint32_t>(attribute(cudaDevAttrGlobalMemoryBusWidth, device));
  info.wave_size = static_cast<std::uint32_t>(attribute(cudaDevAttrWarpSize, device));
  return info;
}

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(int device) : info_(describe(device)) {}
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<DeviceBuffer> allocate(std::uint64_t bytes) override {
    return std::make_unique<GpuBuffer>(bytes);
  }
  void upload(DeviceBuffer& destination, const void* source, std::uint64_t bytes) override {
    check(cudaMemcpy(destination.data(), source, bytes, cudaMemcpyHostToDevice), "copy to device");
  }
  void download(void* destination, const DeviceBuffer& source, std::uint64_t bytes) override {
    check(cudaMemcpy(destination, source.data(), bytes, cudaMemcpyDeviceToHost), "copy from device");
  }
  double time_attention(bool split, const kernels::PagedDecodeParams& params) override {
    EventPair events;
    events.start();
    launch(split, params);
    return events.stop_us();
  }
  // Back-to-back launches between one pair of events: the host's launch latency
  // is paid once per batch, not per launch (issue #15; nvbench's cold measurement
  // times each sample the same way, nvbench/detail/measure_cold.cu).
  double time_attention_batch(bool split, const std::vector<kernels::PagedDecodeParams>& launches) override {
    EventPair events;
    events.start();
    for (const kernels::PagedDecodeParams& params : launches) launch(split, params);
    return events.stop_us();
  }
  std::uint32_t attention_occupancy(const kernels::PagedDecodeParams& params) override {
    try {
      return static_cast<std::uint32_t>(
          std::max(0, kernels::paged_decode_splitkv_ctas_per_multiprocessor(params)));
    } catch (const std::invalid_argument& error) {
      throw InputError("kernel", error.what());
    } catch (const std::runtime_error& error) {
      throw DeviceError(std::string(KVS_BACKEND_NAME) + ": " + error.what());
    }
  }
  // nvbench's L2 flush (nvbench/detail/l2flush.cuh) writes a buffer the size of
  // L2; twice that here, so no line of the previous kernel's inputs survives.
  void flush_cache() override {
    if (info_.last_level_cache == 0) return;
    const std::uint64_t bytes = 2 * info_.last_level_cache;
    if (!flush_ || flush_->bytes() < bytes) flush_ = std::make_unique<GpuBuffer>(bytes);
    check(cudaMemsetAsync(flush_->data(), ++flush_value_ & 0xff, bytes, 0), "cache flush");
    check(cudaDeviceSynchronize(), "cache flush");
  }
  std::uint32_t stream_read_parts() const override { return stream_blocks(); }
  double time_stream_read(const DeviceBuffer& source, std::uint64_t bytes, DeviceBuffer& parts) override {
    EventPair events;
    events.start();
    kernels::stream_read<<<stream_blocks(), kernels::kStreamThreads>>>(
        static_cast<const uint4*>(source.data()), bytes / 16, static_cast<unsigned int*>(parts.data()));
    return events.stop_us();
  }
  double time_stream_copy(const DeviceBuffer& source, DeviceBuffer& destination,
                          std::uint64_t bytes) override {
    EventPair events;
    events.start();
    kernels::stream_copy<<<stream_blocks(), kernels::kStreamThreads>>>(
        static_cast<const uint4*>(source.data()), static_cast<uint4*>(destination.data()), bytes / 16);
    return events.stop_us();
  }

 private:
  // Enough resident blocks to saturate memory (BabelStream launches a fixed
  // multiple of the multiprocessor count for its dot kernel).
  std::uint32_t stream_blocks() const { return std::max<std::uint32_t>(1, info_.multiprocessors) * 8; }
  static void launch(bool split, const kernels::PagedDecodeParams& params) {
    try {
      if (split) {
        kernels::launch_paged_decode_splitkv(params);
      } else {
        kernels::launch_paged_decode_nosplit(params);
      }
    } catch (const std::invalid_argument& error) {
      throw InputError("kernel", error.what());
    } catch (const std::runtime_error& error) {
      throw DeviceError(std::string(KVS_BACKEND_NAME) + ": " + error.what());
    }
  }
  DeviceInfo info_;
  std::unique_ptr<GpuBuffer> flush_;
  int flush_value_ = 0;
};

}  // namespace

BackendInfo KVS_DISCOVER() {
  BackendInfo out;
  out.name = KVS_BACKEND_NAME;
  out.compiled = true;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    out.status = "no device: " + runtime_message(error);
    return out;
  }
  if (count == 0) {
    out.status = "no device: the runtime found 0 devices";
    return out;
  }
  try {
    for (int device = 0; device < count; ++device) out.devices.push_back(describe(device));
    out.status = "ok";
  } catch (const DeviceError& failure) {
    out.status = std::string("no device: ") + failure.what();
  }
  return out;
}

std::unique_ptr<Backend> KVS_OPEN(int device) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "device count (is a driver and a device present?)");
  if (device < 0 || device >= count) {
    throw DeviceError(std::string(KVS_BACKEND_NAME) + ": device " + std::to_string(device) +
                      " not present (" + std::to_string(count) + " found)");
  }
  return std::make_unique<GpuBackend>(device);
}

}  // namespace kvsight::probes::detail
