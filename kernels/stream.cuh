#pragma once
// Streaming bandwidth kernels (BabelStream-style, UoB-HPC/BabelStream): a
// read-only reduction and a copy over buffers far larger than the last-level
// cache. 16-byte accesses (uint4), four independent loads in flight per thread
// per iteration, grid-stride loops. The read kernel sums 32-bit words with
// wrap-around, so its result is exact and order-independent: the host checks it.
#include "portability.cuh"

namespace kvsight::kernels {
inline namespace KVS_RUNTIME_NAMESPACE {

constexpr int kStreamThreads = 256;

__device__ __forceinline__ unsigned int sum_words(uint4 v) { return v.x + v.y + v.z + v.w; }

__global__ void __launch_bounds__(kStreamThreads)
    stream_read(const uint4* __restrict__ source, unsigned long long count,
                unsigned int* __restrict__ block_sums) {
  __shared__ unsigned int partial[kStreamThreads];
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * kStreamThreads;
  unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * kStreamThreads + threadIdx.x;
  unsigned int sum = 0;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 a = source[i];
    const uint4 b = source[i + stride];
    const uint4 c = source[i + 2 * stride];
    const uint4 d = source[i + 3 * stride];
    sum += sum_words(a) + sum_words(b) + sum_words(c) + sum_words(d);
  }
  for (; i < count; i += stride) sum += sum_words(source[i]);
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kStreamThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) block_sums[blockIdx.x] = partial[0];
}

__global__ void __launch_bounds__(kStreamThreads)
    stream_copy(const uint4* __restrict__ source, uint4* __restrict__ destination, unsigned long long count) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * kStreamThreads;
  unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * kStreamThreads + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 a = source[i];
    const uint4 b = source[i + stride];
    const uint4 c = source[i + 2 * stride];
    const uint4 d = source[i + 3 * stride];
    destination[i] = a;
    destination[i + stride] = b;
    destination[i + 2 * stride] = c;
    destination[i + 3 * stride] = d;
  }
  for (; i < count; i += stride) destination[i] = source[i];
}

}  // namespace KVS_RUNTIME_NAMESPACE
}  // namespace kvsight::kernels
