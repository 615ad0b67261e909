#pragma once
// What the cpu backend reports as its device (cpu_discovery.cpp): the CPU's name,
// clock, architecture, memory and last-level cache, read from /proc, uname and
// sysfs.
#include <cstdint>

#include "kvsight/probes/probes.hpp"

namespace kvsight::probes::detail {

// The CPU as a DeviceInfo for `threads` worker threads (multiprocessors =
// threads); memory_free is capped by an address-space limit (ulimit -v).
DeviceInfo describe_cpu(std::uint32_t threads);

}  // namespace kvsight::probes::detail
