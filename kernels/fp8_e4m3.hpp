#pragma once
// fp8 E4M3 ("e4m3fn": the OCP 8-bit floating point format's E4M3 as NVIDIA and
// vLLM store an fp8 KV cache) -> fp32, by bit manipulation: the one decode the
// CUDA and HIP kernels (kernels/paged_decode.cuh) and the cpu backend's table
// (probes/src/cpu_kernel_portable.cpp) use, so every backend reads a byte the same way.
// Plain C++ so that g++ compiles it too and the unit test (tests/test_fp8_kv.cpp)
// checks the very arithmetic the device runs. Format facts in
// docs/reference/kernels.md "fp8 E4M3 K/V": 1 sign bit, 4 exponent bits with
// bias 7, 3 mantissa bits; exponent 0 is subnormal (m x 2^-9); no infinities;
// S.1111.111 (0x7F, 0xFF) is NaN; the largest finite value is 0x7E = 448.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define KVS_FP8_HOST_DEVICE __host__ __device__
#else
#define KVS_FP8_HOST_DEVICE
#endif

namespace kvsight::kernels {

// The 32 bits as an fp32 (the device's intrinsic, memcpy on the host).
KVS_FP8_HOST_DEVICE inline float fp8_bits_to_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

KVS_FP8_HOST_DEVICE inline float fp8_e4m3_to_float(std::uint32_t byte) {
  const std::uint32_t magnitude = byte & 0x7fu;                   // eeee.mmm
  if (magnitude == 0x7fu) return fp8_bits_to_float(0x7fc00000u);  // NaN (its sign carries no meaning)
  // Normal: 2^(e - 7) x 1.mmm. Shifted by 20 the exponent lands in fp32's
  // exponent field and the 3 mantissa bits at its top; adding 120 = 127 - 7
  // rebiases the exponent.
  // Subnormal and zero (e = 0): 2^(1 - 7) x m / 8 = m x 2^-9. Decoded as if e
  // were 1, 2^-6 x 1.mmm = 2^-6 + m x 2^-9, less 2^-6: exact (Sterbenz), every
  // operand a normal fp32 (no flush-to-zero mode touches it), and only integer
  // logic, a select and an add: no int -> float conversion per element (an I2FP
  // in the SASS of the first version, docs/reference/kernels.md "fp8 E4M3 K/V").
  const bool subnormal = magnitude < 0x08u;
  const float as_normal = fp8_bits_to_float(((magnitude | (subnormal ? 0x08u : 0u)) << 20) + (120u << 23));
  const float value = subnormal ? as_normal - 0x1p-6f : as_normal;
  return (byte & 0x80u) != 0 ? -value : value;
}

}  // namespace kvsight::kernels
