#pragma once
// 8-lane vectors in GCC's vector extensions for the portable cpu kernel
// (cpu_kernel_portable.cpp): one AVX register in its x86-64-v3 clone, two SSE
// registers in the baseline one, NEON pairs on AArch64. Here too the exact
// widening of fp16 values to fp32 in integer and float lanes, with no table: a
// 64K-entry table (256 KiB, in a core's L2 beside the tile) is a scalar load
// and store per element (docs/measurements.md, issue #24 item 5).
// tests/test_cpu_kernels.cpp checks it against the scalar decode on all 65,536
// inputs, bit for bit.
#include <cstdint>
#include <cstring>

// Vec8 values never cross a non-inlined call, so the AVX-vs-SSE argument ABI
// note does not apply.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kvsight::probes::detail {

typedef float Vec8 __attribute__((vector_size(32)));
typedef std::uint32_t Vec8u32 __attribute__((vector_size(32)));
typedef std::int32_t Vec8i __attribute__((vector_size(32)));
typedef std::uint16_t Vec8u16 __attribute__((vector_size(16)));

[[gnu::always_inline]] inline Vec8 load8(const float* p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
[[gnu::always_inline]] inline void store8(float* p, Vec8 v) { std::memcpy(p, &v, sizeof(v)); }

[[gnu::always_inline]] inline Vec8 bits_to_float8(Vec8u32 bits) {
  Vec8 v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}
[[gnu::always_inline]] inline Vec8u32 float_to_bits8(Vec8 v) {
  Vec8u32 bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// 8 IEEE binary16 values (the low 16 bits of each lane) -> fp32, exact
// (half.hpp's fp16_to_float, bit for bit, NaN payloads kept). Shifted left by
// 13, the 15 exponent and mantissa bits land in fp32's; adding 112 = 127 - 15
// to the exponent rebiases a normal number. Exponent 31 (inf / NaN) takes
// another 128 - 16, to fp32's 255. Exponent 0 (zero, subnormal: m x 2^-24) is
// decoded as if it were 1, 2^-14 x 1.m = 2^-14 + m x 2^-24, less 2^-14: exact
// (Sterbenz), and every operand is a normal fp32, so no subnormal input reaches
// the FPU (a microcode assist on some x86 cores).
[[gnu::always_inline]] inline Vec8 decode_fp16x8(Vec8u32 h) {
  const Vec8u32 shifted = (h & 0x7fffu) << 13;
  const Vec8u32 exponent = shifted & 0x0f800000u;  // 0x7c00 << 13
  const Vec8u32 infinite = reinterpret_cast<Vec8u32>(exponent == 0x0f800000u);
  const Vec8u32 tiny = reinterpret_cast<Vec8u32>(exponent == 0u);
  const Vec8u32 normal = shifted + (112u << 23) + (infinite & (112u << 23));
  const Vec8u32 renormalised = float_to_bits8(bits_to_float8(shifted + (113u << 23)) - 0x1p-14f);
  const Vec8u32 magnitude = (renormalised & tiny) | (normal & ~tiny);
  return bits_to_float8(magnitude | ((h & 0x8000u) << 16));
}

// 8 fp16 values at p, natural order.
[[gnu::always_inline]] inline Vec8 widen_fp16x8(const std::uint16_t* p) {
  Vec8u16 raw;
  std::memcpy(&raw, p, sizeof(raw));
  return decode_fp16x8(__builtin_convertvector(raw, Vec8u32));
}

}  // namespace kvsight::probes::detail

#pragma GCC diagnostic pop
