// What a probe run may take and where it runs (run_setup.hpp), and the backend it
// opens (backend.hpp open_backend).
#include "run_setup.hpp"

#include <algorithm>

#include "backend.hpp"
#include "kvsight/error.hpp"

namespace kvsight::probes::detail {

std::uint64_t memory_budget(const DeviceInfo& info, const ProbeOptions& options) {
  if (!(options.max_mem_fraction > 0.0 && options.max_mem_fraction <= 1.0)) {
    throw InputError("--max-mem",
                     "fraction must be in (0, 1]; got " + std::to_string(options.max_mem_fraction));
  }
  auto budget = static_cast<std::uint64_t>(options.max_mem_fraction * static_cast<double>(info.memory_free));
  if (options.max_mem_bytes > 0) budget = std::min(budget, options.max_mem_bytes);
  if (info.backend == "cpu" && options.max_mem_bytes == 0) budget = std::min(budget, kCpuDefaultCap);
  return budget;
}

std::string device_label(const DeviceInfo& info) {
  if (!info.cpu_kernel.empty()) return info.name + " (" + info.arch + "; kernel " + info.cpu_kernel + ")";
  return info.name + " (" + info.arch + ")";
}

void validate_options(const ProbeOptions& options) {
  if (options.repeats < 1 || options.repeats > 100000) {
    throw InputError("--repeats", std::to_string(options.repeats) + " out of range; allowed: 1..100000");
  }
  if (options.warmup < 0 || options.warmup > 100000) {
    throw InputError("--warmup", std::to_string(options.warmup) + " out of range; allowed: 0..100000");
  }
  if (options.splits > static_cast<std::uint32_t>(kernels::kMaxSplits))
    throw InputError("--splits", "allowed: 0 (auto) or 1..4096");
  if (options.launches_per_sample < 0 || options.launches_per_sample > 1000) {
    throw InputError("--launches", std::to_string(options.launches_per_sample) +
                                       " out of range; allowed: 0 (auto: 8 on GPUs, 1 on cpu) or 1..1000");
  }
}

std::unique_ptr<Backend> open_backend(const std::string& name, const ProbeOptions& options) {
  if (name == "cpu") return cpu_open(options.threads, options.cpu_kernel);
  if (name == "cuda") return cuda_open(0);
  if (name == "hip") return hip_open(0);
  if (name == "auto") {
    if (const BackendInfo cuda = cuda_discover(); !cuda.devices.empty()) return cuda_open(0);
    if (const BackendInfo hip = hip_discover(); !hip.devices.empty()) return hip_open(0);
    return cpu_open(options.threads, options.cpu_kernel);
  }
  throw InputError("--backend", "'" + name + "' unknown; allowed: auto, cpu, cuda, hip");
}

}  // namespace kvsight::probes::detail
