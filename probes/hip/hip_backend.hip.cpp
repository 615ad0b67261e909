// HIP backend: the shared GPU backend source compiled by hipcc into a shared
// module (libkvsight_hip.so) that the kvsight binary dlopens at run time
// (probes/src/registry.cpp), so the binary itself does not need libamdhip64 to
// start (issue #14 item 8). The module's entry points are plain C: errors come
// back as a kind and a message, never as an exception across the boundary.
#define KVS_BACKEND_NAME "hip"
#define KVS_DISCOVER hip_module_discover
#define KVS_OPEN hip_module_open
#include "../gpu/gpu_backend.inl"
#include "../src/hip_module.hpp"

extern "C" {

__attribute__((visibility("default"))) int kvsight_hip_module_abi() { return KVSIGHT_HIP_MODULE_ABI; }

__attribute__((visibility("default"))) void kvsight_hip_module_discover(kvsight::probes::BackendInfo* out) {
  try {
    *out = kvsight::probes::detail::hip_module_discover();
  } catch (const std::exception& error) {
    out->name = "hip";
    out->compiled = true;
    out->status = std::string("discovery failed: ") + error.what();
  }
}

__attribute__((visibility("default"))) kvsight::probes::detail::Backend* kvsight_hip_module_open(
    int device, int* error_kind, std::string* message) {
  try {
    *error_kind = 0;
    return kvsight::probes::detail::hip_module_open(device).release();
  } catch (const kvsight::InputError& error) {
    *error_kind = 2;
    *message = error.what();
  } catch (const std::exception& error) {
    *error_kind = 3;
    *message = error.what();
  }
  return nullptr;
}

}  // extern "C"
