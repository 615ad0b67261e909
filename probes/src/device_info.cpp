// Device discovery for preflight (kvsight/probes/device_info.hpp).
//
// NVML and ROCm SMI are declared here by hand, only the few entry points used, and
// resolved with dlsym: no vendor header or library is needed to build or start.
// Signatures and struct layouts follow NVIDIA's nvml.h (NVML API 11/12: nvmlMemory_t
// {total, free, used}; nvmlProcessInfo_t v2/v3 {pid, usedGpuMemory, gpuInstanceId,
// computeInstanceId}) and ROCm's rocm_smi.h (RSMI_MEM_TYPE_VRAM = 0,
// RSMI_SW_COMP_DRIVER = 0); docs/reference/preflight.md "Device discovery" lists them.
#include "kvsight/probes/device_info.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "kvsight/probes/probes.hpp"

namespace kvsight::probes {

namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
  explicit Library(const std::string& name) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      error = e ? e : "dlopen failed";
    }
  }
  ~Library() {
    if (handle) dlclose(handle);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  template <typename F>
  F symbol(const char* name) const {
    return handle ? reinterpret_cast<F>(dlsym(handle, name)) : nullptr;
  }
};

// --- NVML (nvml.h).
using nvmlDevice_t = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE

std::string proc_comm(std::uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

std::vector<DeviceRecord> nvml_devices(const std::string& library, std::vector<std::string>& notes) {
  Library lib(library);
  if (!lib.handle) {
    notes.push_back("NVML: " + library + " not loaded (" + lib.error + "); using the runtime instead");
    return {};
  }
  auto init = lib.symbol<int (*)()>("nvmlInit_v2");
  auto shutdown = lib.symbol<int (*)()>("nvmlShutdown");
  auto count_fn = lib.symbol<int (*)(unsigned int*)>("nvmlDeviceGetCount_v2");
  auto handle_fn = lib.symbol<int (*)(unsigned int, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2");
  auto name_fn = lib.symbol<int (*)(nvmlDevice_t, char*, unsigned int)>("nvmlDeviceGetName");
  auto memory_fn = lib.symbol<int (*)(nvmlDevice_t, NvmlMemory*)>("nvmlDeviceGetMemoryInfo");
  auto cc_fn = lib.symbol<int (*)(nvmlDevice_t, int*, int*)>("nvmlDeviceGetCudaComputeCapability");
  auto driver_fn = lib.symbol<int (*)(char*, unsigned int)>("nvmlSystemGetDriverVersion");
  auto procs_fn = lib.symbol<int (*)(nvmlDevice_t, unsigned int*, NvmlProcessInfo*)>(
      "nvmlDeviceGetComputeRunningProcesses_v3");
  auto error_fn = lib.symbol<const char* (*)(int)>("nvmlErrorString");
  if (!init || !shutdown || !count_fn || !handle_fn || !name_fn || !memory_fn) {
    notes.push_back("NVML: " + library + " lacks nvmlInit_v2 / nvmlDeviceGetCount_v2 / ... (too old)");
    return {};
  }
  auto say = [&](int code) {
    return error_fn ? std::string(error_fn(code)) : "code " + std::to_string(code);
  };
  if (const int rc = init(); rc != kNvmlSuccess) {
    notes.push_back("NVML: nvmlInit failed: " + say(rc));
    return {};
  }
  std::vector<DeviceRecord> out;
  unsigned int count = 0;
  if (const int rc = count_fn(&count); rc != kNvmlSuccess) {
    notes.push_back("NVML: nvmlDeviceGetCount failed: " + say(rc));
    shutdown();
    return {};
  }
  char driver[96] = {};
  if (driver_fn) driver_fn(driver, sizeof driver);
  const auto self = static_cast<std::uint32_t>(getpid());
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (handle_fn(i, &device) != kNvmlSuccess) continue;
    DeviceRecord r;
    r.index = static_cast<int>(i);
    r.vendor = "nvidia";
    r.driver_version = driver;
    char name[96] = {};
    if (name_fn(device, name, sizeof name) == kNvmlSuccess) r.name = name;
    int major = 0, minor = 0;
    if (cc_fn && cc_fn(device, &major, &minor) == kNvmlSuccess)
      r.arch = "sm_" + std::to_string(major) + std::to_string(minor);
    NvmlMemory memory{};
    if (memory_fn(device, &memory) == kNvmlSuccess) {
      r.memory_total_bytes = memory.total;
      r.memory_free_bytes = memory.free;
    }
    r.sources = {"nvml", "nvml", ""};
    if (procs_fn) {
      // Two tries: the count can grow between the size query and the fetch.
      std::vector<NvmlProcessInfo> infos(64);
      for (int attempt = 0; attempt < 2; ++attempt) {
        unsigned int n = static_cast<unsigned int>(infos.size());
        const int rc = procs_fn(device, &n, infos.data());
        if (rc == kNvmlInsufficientSize) {
          infos.resize(n + 16);
          continue;
        }
        if (rc != kNvmlSuccess) {
          notes.push_back("NVML: process list of device " + std::to_string(i) + ": " + say(rc));
          break;
        }
        std::uint64_t others = 0;
        for (unsigned int k = 0; k < n; ++k) {
          if (infos[k].pid == self) continue;  // kvsight's own context is not "another process"
          ProcessMemory p;
          p.pid = infos[k].pid;
          p.name = proc_comm(p.pid);
          // NVML_VALUE_NOT_AVAILABLE (all ones) when the driver cannot say (e.g. in a container).
          p.used_bytes = infos[k].usedGpuMemory == ~0ull ? 0 : infos[k].usedGpuMemory;
          others += p.used_bytes;
          r.processes.push_back(p);
        }
        r.memory_used_by_others_bytes = others;
        r.sources.processes = "nvml";
        break;
      }
    }
    out.push_back(r);
  }
  shutdown();
  notes.push_back("NVML: " + std::to_string(out.size()) + " device(s) from " + library);
  return out;
}

// --- ROCm SMI (rocm_smi.h).
std::vector<DeviceRecord> rocm_smi_devices(const std::string& library, std::vector<std::string>& notes) {
  Library lib(library);
  if (!lib.handle) {
    notes.push_back("ROCm SMI: " + library + " not loaded (" + lib.error + "); using the runtime instead");
    return {};
  }
  auto init = lib.symbol<int (*)(std::uint64_t)>("rsmi_init");
  auto shutdown = lib.symbol<int (*)()>("rsmi_shut_down");
  auto count_fn = lib.symbol<int (*)(std::uint32_t*)>("rsmi_num_monitor_devices");
  auto name_fn = lib.symbol<int (*)(std::uint32_t, char*, std::size_t)>("rsmi_dev_name_get");
  auto total_fn = lib.symbol<int (*)(std::uint32_t, int, std::uint64_t*)>("rsmi_dev_memory_total_get");
  auto usage_fn = lib.symbol<int (*)(std::uint32_t, int, std::uint64_t*)>("rsmi_dev_memory_usage_get");
  auto version_fn = lib.symbol<int (*)(int, char*, std::uint32_t)>("rsmi_version_str_get");
  if (!init || !shutdown || !count_fn || !total_fn || !usage_fn) {
    notes.push_back("ROCm SMI: " + library + " lacks rsmi_init / rsmi_dev_memory_total_get / ...");
    return {};
  }
  if (const int rc = init(0); rc != 0) {
    notes.push_back("ROCm SMI: rsmi_init failed: status " + std::to_string(rc));
    return {};
  }
  std::uint32_t count = 0;
  count_fn(&count);
  char driver[96] = {};
  if (version_fn) version_fn(0 /* RSMI_SW_COMP_DRIVER */, driver, sizeof driver);
  std::vector<DeviceRecord> out;
  for (std::uint32_t i = 0; i < count; ++i) {
    DeviceRecord r;
    r.index = static_cast<int>(i);
    r.vendor = "amd";
    r.driver_version = driver;
    char name[128] = {};
    if (name_fn && name_fn(i, name, sizeof name) == 0) r.name = name;
    std::uint64_t total = 0, used = 0;
    if (total_fn(i, 0 /* RSMI_MEM_TYPE_VRAM */, &total) == 0 && usage_fn(i, 0, &used) == 0) {
      r.memory_total_bytes = total;
      r.memory_free_bytes = total > used ? total - used : 0;
      // Surveyed before kvsight touches the device: all VRAM in use is someone else's.
      r.memory_used_by_others_bytes = used;
    }
    r.sources = {"rocm_smi", "rocm_smi", "rocm_smi"};
    out.push_back(r);
  }
  shutdown();
  notes.push_back("ROCm SMI: " + std::to_string(out.size()) + " device(s) from " + library);
  return out;
}

DeviceRecord from_runtime(const DeviceInfo& d, const std::string& vendor, const std::string& source) {
  DeviceRecord r;
  r.index = d.index;
  r.vendor = vendor;
  r.name = d.name;
  r.arch = d.arch;
  r.memory_total_bytes = d.memory_total;
  r.memory_free_bytes = d.memory_free;
  r.multiprocessors = d.multiprocessors;
  r.sources = {source, source, ""};
  return r;
}

// Merges a management library's view with the runtime's, by index when both see
// the same number of devices: management figures first (they do not count
// kvsight's own context), the runtime's arch and multiprocessors.
std::vector<DeviceRecord> merge(std::vector<DeviceRecord> managed, const std::vector<DeviceInfo>& runtime,
                                const std::string& vendor, const std::string& source,
                                std::vector<std::string>& notes) {
  if (managed.empty()) {
    std::vector<DeviceRecord> out;
    for (const DeviceInfo& d : runtime) out.push_back(from_runtime(d, vendor, source));
    return out;
  }
  if (!runtime.empty() && runtime.size() != managed.size()) {
    notes.push_back(vendor + ": the management library sees " + std::to_string(managed.size()) +
                    " device(s), the runtime " + std::to_string(runtime.size()) +
                    " (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES?): figures are not merged");
    return managed;
  }
  for (std::size_t i = 0; i < runtime.size(); ++i) {
    if (managed[i].arch.empty()) {
      managed[i].arch = runtime[i].arch;
      managed[i].sources.identity += "+" + source;
    }
    managed[i].multiprocessors = runtime[i].multiprocessors;
  }
  return managed;
}

std::uint64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      std::uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;  // /proc/meminfo reports kB = 1024 bytes (proc(5))
    }
  }
  return 0;
}

}  // namespace

DeviceRecord cpu_device_record() {
  DeviceRecord r;
  r.vendor = "cpu";
  r.sources = {"cpu", "cpu", ""};
  for (const BackendInfo& b : list_backends()) {
    if (b.name == "cpu" && !b.devices.empty()) {
      r.name = b.devices.front().name;
      r.arch = b.devices.front().arch;
      r.multiprocessors = b.devices.front().multiprocessors;
    }
  }
  r.memory_total_bytes = meminfo_bytes("MemTotal");
  r.memory_free_bytes = meminfo_bytes("MemAvailable");
  return r;
}

DeviceSurvey survey_devices(const SurveyOptions& options) {
  DeviceSurvey survey;
  // Management libraries first: before any runtime context of kvsight's exists.
  std::vector<DeviceRecord> nvml = nvml_devices(options.nvml_library, survey.notes);
  std::vector<DeviceRecord> rsmi = rocm_smi_devices(options.rocm_smi_library, survey.notes);
  std::vector<DeviceInfo> cuda, hip;
  for (const BackendInfo& b : list_backends()) {
    if (b.name == "cuda") {
      if (b.status == "ok")
        cuda = b.devices;
      else
        survey.notes.push_back("CUDA runtime: " + b.status);
    } else if (b.name == "hip") {
      if (b.status == "ok")
        hip = b.devices;
      else
        survey.notes.push_back("HIP runtime: " + b.status);
    }
  }
  for (DeviceRecord& r : merge(std::move(nvml), cuda, "nvidia", "cuda_runtime", survey.notes))
    survey.devices.push_back(std::move(r));
  for (DeviceRecord& r : merge(std::move(rsmi), hip, "amd", "hip_runtime", survey.notes))
    survey.devices.push_back(std::move(r));
  survey.no_gpu = survey.devices.empty();
  if (options.backend == "auto")
    survey.backend = !cuda.empty() ? "cuda" : !hip.empty() ? "hip" : "cpu";
  else
    survey.backend = options.backend;
  if (survey.no_gpu) {
    survey.devices.push_back(cpu_device_record());
    survey.notes.push_back("no GPU found: every device figure below is the host CPU's");
  } else if (survey.backend == "cpu") {
    survey.notes.push_back("probes run on the cpu backend (no GPU runtime in this build sees the device)");
  }
  return survey;
}

}  // namespace kvsight::probes
