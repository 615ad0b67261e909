#pragma once
// One header that lets the same kernel source build with nvcc (CUDA) or hipcc
// (HIP), in the manner of llama.cpp ggml/src/ggml-cuda/vendors/hip.h: CUDA names
// are the spelling used everywhere, and on HIP they are #defined to the hip names.
// Kernel bodies use only the names and helpers defined here: no #ifdef in them.
#if defined(KVS_SIMT_EMULATION)
// Tests: the kernels' source on a CPU (tests/simt_emulation.hpp names the header).
#include KVS_SIMT_EMULATION
#define KVS_HIP 0
using kvs_bf16 = __nv_bfloat16;
#define KVS_RUNTIME_NAMESPACE simt_emulation
#elif defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define KVS_HIP 1
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNotReady hipErrorNotReady
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemset hipMemset
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrL2CacheSize hipDeviceAttributeL2CacheSize
#define cudaDevAttrClockRate hipDeviceAttributeClockRate
#define cudaDevAttrMemoryClockRate hipDeviceAttributeMemoryClockRate
#define cudaDevAttrGlobalMemoryBusWidth hipDeviceAttributeMemoryBusWidth
#define cudaDevAttrWarpSize hipDeviceAttributeWarpSize
#define cudaDeviceAttr hipDeviceAttribute_t
#define cudaStream_t hipStream_t
#define cudaStreamCreate hipStreamCreate
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaMemsetAsync hipMemsetAsync
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
// HIP 5.2 (Debian) has hip_bfloat16 (hip/hip_bfloat16.h); __hip_bfloat16 arrived
// in later ROCm releases.
using kvs_bf16 = hip_bfloat16;
// CUDA and HIP objects link into one binary: every kernel, launcher and device
// helper lives in a per-runtime inline namespace so that no symbol (template
// instances and inline launchers included) is shared between the two.
#define KVS_RUNTIME_NAMESPACE hip_runtime
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#define KVS_HIP 0
using kvs_bf16 = __nv_bfloat16;
#define KVS_RUNTIME_NAMESPACE cuda_runtime
#endif
#include "fp8_e4m3.hpp"
using kvs_half = __half;
// fp8 E4M3 K/V (PagedDecodeParams::kv_type): a tag for the element type; the
// bytes are decoded by kernels/fp8_e4m3.hpp on CUDA and HIP alike (HIP 5.2 has no
// fp8 type, and one decode keeps the backends bit-identical).
struct kvs_fp8_e4m3 {};

// Wave (warp) size as a compile-time constant for the architecture being
// compiled: 64 on gfx9 (GCN/CDNA: MI100 gfx908, MI200 gfx90a, MI300 gfx942),
// 32 on RDNA (gfx10/11/12, wave32 is hipcc's default there) and on every NVIDIA
// GPU. warpSize is not a constant expression on HIP, hence our own macro. The
// host pass of hipcc sees none of the __gfx* macros and gets 32: host code must
// not use it for launch geometry (it asks the runtime, cudaDevAttrWarpSize).
#if defined(__GFX9__) || defined(__gfx900__) || defined(__gfx906__) || defined(__gfx908__) ||   \
    defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || \
    defined(__gfx950__)
#define KVS_WAVE_SIZE 64
#else
#define KVS_WAVE_SIZE 32
#endif

// cp.async (LDGSTS: a 16-byte global -> shared copy that does not hold a
// register while in flight) exists from sm_80 (PTX ISA 7.0, "cp.async"); HIP and
// older NVIDIA parts take a plain load and store. The host pass sees neither.
#if !KVS_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define KVS_HAS_CP_ASYNC 1
#else
#define KVS_HAS_CP_ASYNC 0
#endif
// Shared-memory stages of the K/V tile pipeline. CUDA: two, filled by cp.async
// while the other is consumed (the same count on every arch so that the host and
// the device agree on the shared-memory size; below sm_80 the copies are plain and
// the pipeline still runs). HIP: one stage, the next tile held in registers while
// the current one is consumed (an LDS stage of hd256 x GQA 16 would pass the 64 KiB
// a workgroup may have, docs/reference/kernels.md); the loads stay in flight
// across the tile loop's barriers because those are lds_barrier() (below).
#if KVS_HIP
#define KVS_KV_STAGES 1
#else
#define KVS_KV_STAGES 2
#endif

#if KVS_HIP
#define KVS_SHFL_XOR(value, mask) __shfl_xor((value), (mask), KVS_WAVE_SIZE)
#else
#define KVS_SHFL_XOR(value, mask) __shfl_xor_sync(0xffffffffu, (value), (mask), KVS_WAVE_SIZE)
#endif

// Declares NAME as the block's dynamic shared memory (16-byte aligned bytes).
#if defined(KVS_SIMT_EMULATION)
#define KVS_DYNAMIC_SHARED(NAME) unsigned char* NAME = KVS_EMULATED_DYNAMIC_SHARED()
#else
#define KVS_DYNAMIC_SHARED(NAME) extern __shared__ __align__(16) unsigned char NAME[]
#endif

namespace kvsight::kernels {
inline namespace KVS_RUNTIME_NAMESPACE {

// Storage -> fp32. bf16 is the top half of an fp32, so a shift is exact; fp16
// goes through the runtime's own conversion; fp8 E4M3 through the shared bit
// decode (exact). Storage: the unsigned integer one element occupies.
template <typename T>
struct Element;
template <>
struct Element<kvs_bf16> {
  using Storage = unsigned short;
  static __device__ __forceinline__ float to_float(unsigned short bits) {
    return __uint_as_float(static_cast<unsigned int>(bits) << 16);
  }
};
template <>
struct Element<kvs_half> {
  using Storage = unsigned short;
  static __device__ __forceinline__ float to_float(unsigned short bits) {
    return __half2float(__ushort_as_half(bits));
  }
};
template <>
struct Element<kvs_fp8_e4m3> {
  using Storage = unsigned char;
  static __device__ __forceinline__ float to_float(unsigned char bits) { return fp8_e4m3_to_float(bits); }
};

// Element i (from the low end) of the 32-bit word: 2 per word for 16-bit
// storage, 4 for fp8, in memory order (both targets are little-endian).
template <typename T>
__device__ __forceinline__ typename Element<T>::Storage element_of_word(unsigned int word, int i) {
  using Storage = typename Element<T>::Storage;
  constexpr int kBits = 8 * static_cast<int>(sizeof(Storage));
  return static_cast<Storage>(word >> (kBits * i));
}

__device__ __forceinline__ float wave_max(float value) {
#pragma unroll
  for (int mask = KVS_WAVE_SIZE / 2; mask > 0; mask /= 2) value = fmaxf(value, KVS_SHFL_XOR(value, mask));
  return value;
}
__device__ __forceinline__ float wave_sum(float value) {
#pragma unroll
  for (int mask = KVS_WAVE_SIZE / 2; mask > 0; mask /= 2) value += KVS_SHFL_XOR(value, mask);
  return value;
}

// 16 bytes global -> shared. With cp.async the copy is issued and the thread goes
// on (cache-global: L2 only, the data is read once); without it, a load and a store.
__device__ __forceinline__ void copy16_async(void* shared_destination, const void* global_source) {
#if KVS_HAS_CP_ASYNC
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global_source));
#else
  *static_cast<uint4*>(shared_destination) = *static_cast<const uint4*>(global_source);
#endif
}

// copy16_async, or 16 zero bytes when !valid, without reading the source:
// cp.async's src-size operand 0 zero-fills (PTX ISA, cp.async). A chunk's rows past
// the end of the context stay finite, so a weight of 0 never meets a NaN.
__device__ __forceinline__ void copy16_async_or_zero(void* shared_destination, const void* global_source,
                                                     bool valid) {
#if KVS_HAS_CP_ASYNC
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global_source),
               "r"(valid ? 16 : 0));
#else
  *static_cast<uint4*>(shared_destination) =
      valid ? *static_cast<const uint4*>(global_source) : make_uint4(0u, 0u, 0u, 0u);
#endif
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void copy_commit() {
#if KVS_HAS_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most PENDING committed groups of this thread are still in flight.
template <int PENDING>
__device__ __forceinline__ void copy_wait() {
#if KVS_HAS_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
#endif
}

// A barrier that orders the block's shared-memory (LDS) accesses and nothing
// else: the tile loop's barriers (kernels/paged_decode.cuh) publish LDS only, and
// on HIP the next tile's global loads must stay in flight across them.
// CUDA: __syncthreads(), unchanged (bar.sync does not wait for loads in flight).
// HIP: __syncthreads() is a workgroup release fence, s_barrier and an acquire
// fence, and the release fence (and, in LLVM 15, the s_barrier itself on every
// target we tried) makes the compiler drain every counter first: s_waitcnt vmcnt(0)
// lgkmcnt(0), i.e. the next tile's loads land before the current tile is used
// (issue #24). Here: wait for this wave's LDS operations (lgkmcnt(0), spelt by
// the assembler for the arch: gfx9 and gfx10/11 encode it differently), then
// s_barrier, in one asm statement whose "memory" clobber keeps the compiler from
// moving any memory access across it. This is MLIR's amdgpu.lds_barrier lowering
// on targets where LLVM would add the drain (docs/reference/kernels.md, "LDS-only
// barrier on HIP"). gfx12 splits s_barrier into signal / wait: keep
// __syncthreads() there until it is compiled and checked.
__device__ __forceinline__ void lds_barrier() {
#if KVS_HIP && defined(__AMDGCN__) && !defined(__GFX12__)
  asm volatile("s_waitcnt lgkmcnt(0)\n\ts_barrier" ::: "memory");
#else
  __syncthreads();
#endif
}

}  // namespace KVS_RUNTIME_NAMESPACE
}  // namespace kvsight::kernels
