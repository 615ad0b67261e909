#pragma once
// Device discovery for preflight: every GPU of this node with its name, arch, memory
// total and free now, and the processes that hold memory on it, each figure labelled
// with the source it came from. NVML (libnvidia-ml.so.1) and ROCm SMI
// (librocm_smi64.so) are loaded at run time with dlopen when present, so the binary
// needs neither to start; the CUDA / HIP runtime of the probe backends is the
// fallback; with no GPU the host CPU and its memory stand in, labelled "cpu"
// (docs/reference/preflight.md "Device discovery"). Never throws: what a source
// could not do is said in notes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvsight::probes {

struct ProcessMemory {
  std::uint32_t pid = 0;
  std::string name;
  std::uint64_t used_bytes = 0;
};

// Where each figure of a device came from: nvml | rocm_smi | cuda_runtime | hip_runtime | cpu.
struct DeviceSources {
  std::string identity, memory, processes;  // processes "" when no source lists them
};

struct DeviceRecord {
  int index = 0;
  std::string vendor;  // nvidia | amd | cpu
  std::string name;    // as the source reports it ("NVIDIA H200")
  std::string arch;    // sm_90, gfx1100, x86_64
  std::string driver_version;
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_free_bytes = 0;
  // Memory other processes hold: the sum over the process list when a source lists
  // processes; nullopt when none does (the runtime only knows total - free).
  std::optional<std::uint64_t> memory_used_by_others_bytes;
  std::vector<ProcessMemory> processes;
  std::uint32_t multiprocessors = 0;  // SMs / CUs; cpu: hardware threads
  DeviceSources sources;
};

struct DeviceSurvey {
  std::vector<DeviceRecord> devices;  // the GPUs; when none, one record for the host CPU
  bool no_gpu = true;                 // true: devices holds the CPU stand-in
  std::string backend;                // where probes run: cuda | hip | cpu
  std::vector<std::string> notes;     // every source tried and what it said
};

struct SurveyOptions {
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string rocm_smi_library = "librocm_smi64.so";
  std::string backend = "auto";  // auto | cuda | hip | cpu: the probe backend wanted
};

DeviceSurvey survey_devices(const SurveyOptions& options = {});

// The host CPU as a device record (name and threads from the cpu backend, memory
// from /proc/meminfo: MemTotal, MemAvailable), every source "cpu".
DeviceRecord cpu_device_record();

}  // namespace kvsight::probes
