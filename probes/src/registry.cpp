// The backends this build holds. A backend whose compiler was absent at build
// time has a stub here that says so; compiled ones come from their own files.
// The HIP backend is a shared module (libkvsight_hip.so, next to the binary)
// loaded at run time, so the binary starts where libamdhip64 is missing and
// `probe info` says why HIP could not load (issue #14 item 8).
#include <string>

#include "backend.hpp"
#include "kvsight/error.hpp"

#if KVSIGHT_PROBES_HAVE_HIP
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "hip_module.hpp"
#endif

namespace kvsight::probes::detail {
namespace {
[[maybe_unused]] BackendInfo not_compiled(const std::string& name) {
  BackendInfo out;
  out.name = name;
  out.compiled = false;
  out.status = "not compiled in this build";
  return out;
}
[[noreturn, maybe_unused]] void throw_not_compiled(const std::string& name) {
  throw DeviceError(name +
                    " backend not compiled in this build (its compiler was not found at configure time)");
}

#if KVSIGHT_PROBES_HAVE_HIP
// The HIP module, loaded once: KVSIGHT_HIP_MODULE if set (tests point it at a
// missing file), else libkvsight_hip.so in the binary's directory, else the
// loader's search path. Never unloaded: its code backs the opened backends.
struct HipModule {
  kvsight_hip_module_discover_fn* discover = nullptr;
  kvsight_hip_module_open_fn* open = nullptr;
  std::string error;  // why it could not load; empty when it did
};

std::string executable_directory() {
  char path[4096];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return "";
  const std::string exe(path, static_cast<std::size_t>(length));
  const auto slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash + 1);
}

const HipModule& hip_module() {
  static const HipModule module = [] {
    HipModule out;
    std::string path;
    if (const char* from_env = std::getenv("KVSIGHT_HIP_MODULE"); from_env != nullptr && *from_env != '\0') {
      path = from_env;
    } else {
      path = executable_directory() + KVSIGHT_HIP_MODULE_NAME;
      if (access(path.c_str(), F_OK) != 0) path = KVSIGHT_HIP_MODULE_NAME;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      // dlerror names the file that failed: the module itself, or libamdhip64 it needs.
      out.error = std::string("HIP runtime not loaded: ") +
                  (why != nullptr ? why : path + ": dlopen failed") + " (the HIP backend needs " + path +
                  " and ROCm's libamdhip64.so.5 on the loader path)";
      return out;
    }
    auto* abi = reinterpret_cast<kvsight_hip_module_abi_fn*>(dlsym(handle, "kvsight_hip_module_abi"));
    out.discover =
        reinterpret_cast<kvsight_hip_module_discover_fn*>(dlsym(handle, "kvsight_hip_module_discover"));
    out.open = reinterpret_cast<kvsight_hip_module_open_fn*>(dlsym(handle, "kvsight_hip_module_open"));
    if (abi == nullptr || out.discover == nullptr || out.open == nullptr || abi() != KVSIGHT_HIP_MODULE_ABI) {
      out.discover = nullptr;
      out.open = nullptr;
      out.error = "HIP module " + path + " is not this build's (ABI " +
                  std::to_string(KVSIGHT_HIP_MODULE_ABI) + " expected)";
    }
    return out;
  }();
  return module;
}
#endif
}  // namespace

#if !KVSIGHT_PROBES_HAVE_CUDA
BackendInfo cuda_discover() { return not_compiled("cuda"); }
std::unique_ptr<Backend> cuda_open(int) { throw_not_compiled("cuda"); }
#endif
#if KVSIGHT_PROBES_HAVE_HIP
BackendInfo hip_discover() {
  const HipModule& module = hip_module();
  BackendInfo out;
  out.name = "hip";
  out.compiled = true;
  if (module.discover == nullptr) {
    out.status = module.error;
    return out;
  }
  module.discover(&out);
  return out;
}
std::unique_ptr<Backend> hip_open(int device) {
  const HipModule& module = hip_module();
  if (module.open == nullptr) throw DeviceError("hip: " + module.error);
  int kind = 0;
  std::string message;
  Backend* backend = module.open(device, &kind, &message);
  if (backend == nullptr) {
    if (kind == 2) throw InputError("", message);
    throw DeviceError(message);
  }
  return std::unique_ptr<Backend>(backend);
}
#else
BackendInfo hip_discover() { return not_compiled("hip"); }
std::unique_ptr<Backend> hip_open(int) { throw_not_compiled("hip"); }
#endif

}  // namespace kvsight::probes::detail

namespace kvsight::probes {
std::vector<BackendInfo> list_backends() {
  return {detail::cuda_discover(), detail::hip_discover(), detail::cpu_discover()};
}
}  // namespace kvsight::probes
