#pragma once
// What a probe run may take and where it runs (probes/src/run_setup.cpp): the limits
// of a shape, the memory budget under --max-mem, option checks, the device label.
#include <cstdint>
#include <string>

#include "kvsight/probes/probes.hpp"

namespace kvsight::probes::detail {

inline constexpr std::uint64_t kMaxContext = 1ull << 24;  // block-table and token indices are int32
inline constexpr std::uint32_t kMaxBlockSize = 4096;
inline constexpr int kMaxBufferSets = 64;
// The cpu backend never takes more than this unless --max-mem names bytes.
inline constexpr std::uint64_t kCpuDefaultCap = 2ull << 30;

// Bytes of device memory a run may allocate: --max-mem's fraction of free memory,
// capped by its byte size (and by kCpuDefaultCap on the cpu backend without one).
std::uint64_t memory_budget(const DeviceInfo& info, const ProbeOptions& options);
// "name (arch)" or, on the cpu backend, "name (arch; kernel K)".
std::string device_label(const DeviceInfo& info);
// Throws InputError naming the flag (--repeats, --warmup, --splits, --launches).
void validate_options(const ProbeOptions& options);

}  // namespace kvsight::probes::detail
