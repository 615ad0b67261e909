#pragma once
// Division by a runtime divisor as one multiply-high, an add and a shift
// (Granlund and Montgomery, "Division by invariant integers using
// multiplication", PLDI 1994, section 4; FlashInfer's uint_fastdiv in
// include/flashinfer/fastdiv.cuh is the same construction). The kernels use it for
// token / block_size with a block size that has no compiled instance (e.g. 784,
// docs/reference/kernels.md). Plain C++ so that g++ compiles it too: the unit test
// (tests/test_probe_kernels.cpp) checks the very arithmetic the device runs.
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define KVS_HOST_DEVICE __host__ __device__
#else
#define KVS_HOST_DEVICE
#endif

namespace kvsight::kernels {

struct FastDivider {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift = 0;

  FastDivider() = default;
  // divisor >= 1 (the launchers check block_size >= 1 before building one).
  explicit FastDivider(std::uint32_t d) : divisor(d) {
    // shift = ceil(log2 d); multiplier = floor(2^32 (2^shift - d) / d) + 1, which
    // fits in 32 bits because 2^shift - d < d.
    while ((std::uint64_t{1} << shift) < d) ++shift;
    multiplier =
        static_cast<std::uint32_t>(((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - d)) / d + 1);
  }

  // n / divisor for every 32-bit n (the sum is taken in 64 bits, so it cannot wrap).
  KVS_HOST_DEVICE std::uint32_t divide(std::uint32_t n) const {
    const std::uint64_t high = (static_cast<std::uint64_t>(n) * multiplier) >> 32;
    return static_cast<std::uint32_t>((high + n) >> shift);
  }
  KVS_HOST_DEVICE void divmod(std::uint32_t n, std::uint32_t& quotient, std::uint32_t& remainder) const {
    quotient = divide(n);
    remainder = n - quotient * divisor;
  }
};

}  // namespace kvsight::kernels
