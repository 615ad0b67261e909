#pragma once
// Device-fault hardening of the probes (docs/reliability.md, "Device faults"):
// a live-allocation counter over every probe buffer of every backend, and a
// fault-injection switch for tests (KVSIGHT_INJECT_FAULT or `kvsight probe ...
// --inject-fault`).
#include <cstdint>
#include <string>

namespace kvsight::probes {

// Bytes / buffers of device memory the probes hold right now, over all
// backends (counted by the runner around Backend::allocate). 0 whenever no
// probe is running: every path, including every DeviceError, frees them.
std::uint64_t live_device_bytes();
std::uint64_t live_device_buffers();

// Testing only. spec: "" (no override; KVSIGHT_INJECT_FAULT is read) or
// alloc|kernel|verify[:N]: the Nth (default 1) allocation fails, the Nth kernel
// launch reports an error, or the Nth reference check sees a corrupted result.
// Counts restart at each run_* call. "none" disables injection even if the
// environment variable is set. Throws InputError("--inject-fault") for a bad spec.
void set_injected_fault(const std::string& spec);

}  // namespace kvsight::probes
