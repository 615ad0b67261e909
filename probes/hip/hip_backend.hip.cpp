// HIP backend: the shared GPU backend source compiled by hipcc.
#define KVS_BACKEND_NAME "hip"
#define KVS_DISCOVER hip_discover
#define KVS_OPEN hip_open
#include "../gpu/gpu_backend.inl"
