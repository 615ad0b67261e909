#pragma once
// Exact fp16 / bf16 <-> fp32 conversions (IEEE 754 binary16; bfloat16 = the top
// 16 bits of binary32), round to nearest even, subnormals, infinities and NaN
// handled. Written here so the cpu backend and the reference need no compiler
// extension (_Float16, F16C).
#include <bit>
#include <cstdint>

namespace kvsight::probes::detail {

inline float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

inline std::uint16_t float_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);   // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float fp16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out = 0;
  if (exponent == 0x1fu) {
    out = sign | 0x7f800000u | (mantissa << 13);  // inf / NaN
  } else if (exponent != 0) {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);  // 112 = 127 - 15
  } else if (mantissa != 0) {
    // Subnormal: value = mantissa * 2^-24; normalise.
    std::uint32_t shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    out = sign | ((113u - shift) << 23) | (mantissa << 13);
  } else {
    out = sign;
  }
  return std::bit_cast<float>(out);
}

inline std::uint16_t float_to_fp16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (magnitude >= 0x38800000u) {
    // Normal half: rebias exponent (127 -> 15), round the 13 dropped bits to nearest even.
    const std::uint32_t rebased = magnitude - 0x38000000u;
    const std::uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rebased + rounding) >> 13));
  }
  if (magnitude < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal half: value / 2^-24 rounded to nearest even.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;  // 2^(e-127) * m/2^23 / 2^-24 = m >> (126 - e)
  std::uint32_t result = mantissa >> shift;
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

}  // namespace kvsight::probes::detail
