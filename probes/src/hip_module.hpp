#pragma once
// The interface between the kvsight binary and the HIP backend module
// (libkvsight_hip.so, probes/hip/hip_backend.hip.cpp), which the binary
// dlopens at run time (probes/src/registry.cpp) so that it starts on machines
// without ROCm (issue #14 item 8). Both sides are built from one tree with the
// same libstdc++; the ABI number guards against a module of another build.
#include <string>

#include "backend.hpp"

// Bump when a type crossing the boundary (BackendInfo, DeviceInfo, Backend) changes.
#define KVSIGHT_HIP_MODULE_ABI 1

extern "C" {
using kvsight_hip_module_abi_fn = int();
using kvsight_hip_module_discover_fn = void(kvsight::probes::BackendInfo* out);
// Returns the backend, or nullptr with error_kind 2 (input) or 3 (device) and a message.
using kvsight_hip_module_open_fn = kvsight::probes::detail::Backend*(int device, int* error_kind,
                                                                     std::string* message);
}
