#pragma once
// Host emulation of the CUDA built-ins the paged-decode kernels use, so that their
// own source (kernels/paged_decode.cuh, warp_walker.cuh) runs on a CPU in tests:
// the machines that build kvsight mostly have no GPU, and a kernel proven only from
// its compiled code can still compute the wrong attention (issue #24).
//
// One std::thread per CUDA thread of a block, blocks one after another. __syncthreads
// and __syncwarp are std::barrier phases; a shuffle writes the lane's value to its
// warp's exchange row, waits on the warp barrier, reads the source lane's value and
// waits again (so the row can be reused). That is the CUDA contract for the full mask
// the kernels pass: every lane of the warp reaches each shuffle and __syncwarp. A
// kernel that broke it would hang here, and the test's timeout would report it.
// cp.async is absent (no __CUDA_ARCH__): portability.cuh's copies are plain 16-byte
// loads and stores, the semantics of a completed cp.async.
//
// Use: #define KVS_SIMT_EMULATION "simt_emulation.hpp" before including a kernel
// header; portability.cuh includes this file instead of the CUDA headers.
#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "../probes/src/half.hpp"  // the exact fp16 decode the cpu backend uses

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Static storage: one block runs at a time, so a function's static array is its block's.
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))  // GNU: allowed among decl-specifiers

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

// Type tags of the q / K / V element types; the kernels read their bits as unsigned short.
struct __nv_bfloat16 {
  unsigned short bits;
};
struct __half {
  unsigned short bits;
};
inline __half __ushort_as_half(unsigned short bits) { return __half{bits}; }
inline float __half2float(__half h) { return kvsight::probes::detail::fp16_to_float(h.bits); }
inline float __uint_as_float(unsigned bits) { return std::bit_cast<float>(bits); }
using std::min;

namespace kvs_simt {
struct Block {
  explicit Block(int threads)
      : block_barrier(threads), exchange(static_cast<std::size_t>(threads)) {
    for (int w = 0; w < threads / 32; ++w) warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
  }
  std::barrier<> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::vector<float> exchange;  // one value per thread
};
inline thread_local Block* current_block = nullptr;
inline thread_local unsigned char* dynamic_shared = nullptr;
}  // namespace kvs_simt

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;

inline void __syncthreads() { kvs_simt::current_block->block_barrier.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  kvs_simt::current_block->warp_barriers[threadIdx.x / 32]->arrive_and_wait();
}
inline float __shfl_sync(unsigned, float value, int source_lane, int width = 32) {
  kvs_simt::Block& block = *kvs_simt::current_block;
  const unsigned warp_base = threadIdx.x / 32 * 32;
  const unsigned lane = threadIdx.x % 32;
  const unsigned segment = lane / static_cast<unsigned>(width) * static_cast<unsigned>(width);
  block.exchange[threadIdx.x] = value;
  __syncwarp();
  const float result = block.exchange[warp_base + segment + static_cast<unsigned>(source_lane) % width];
  __syncwarp();
  return result;
}
inline float __shfl_xor_sync(unsigned mask, float value, int lane_mask, int width = 32) {
  return __shfl_sync(mask, value, static_cast<int>((threadIdx.x % 32) ^ static_cast<unsigned>(lane_mask)) % width,
                     width);
}

// The block's dynamic shared memory (extern __shared__ in CUDA): KVS_DYNAMIC_SHARED.
#define KVS_EMULATED_DYNAMIC_SHARED() (kvs_simt::dynamic_shared)

namespace kvs_simt {
// Runs kernel(args...) on grid x threads, one block at a time, with shared_bytes of
// dynamic shared memory (16-byte aligned, filled with 0xff bytes per block: NaN as
// float, bf16 and fp16, so a kernel that read shared memory it had not written
// would show it in its output instead of reading zeros).
template <typename Kernel, typename... Args>
void launch(dim3 grid, int threads, std::size_t shared_bytes, Kernel kernel, Args... args) {
  std::vector<unsigned char> storage(shared_bytes + 16);
  auto* aligned = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 15) &
                                                   ~static_cast<std::uintptr_t>(15));
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        std::fill(storage.begin(), storage.end(), static_cast<unsigned char>(0xff));
        Block block(threads);
        std::vector<std::thread> lanes;
        lanes.reserve(static_cast<std::size_t>(threads));
        for (int t = 0; t < threads; ++t)
          lanes.emplace_back([&, t] {
            threadIdx = dim3{static_cast<unsigned>(t), 0, 0};
            blockIdx = dim3{x, y, z};
            current_block = &block;
            dynamic_shared = aligned;
            kernel(args...);
          });
        for (std::thread& lane : lanes) lane.join();
      }
}
}  // namespace kvs_simt
