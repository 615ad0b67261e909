// CUDA backend: the shared GPU backend source compiled by nvcc.
#define KVS_BACKEND_NAME "cuda"
#define KVS_DISCOVER cuda_discover
#define KVS_OPEN cuda_open
#include "../gpu/gpu_backend.inl"
