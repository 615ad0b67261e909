#pragma once
// The probes' inputs: random data (never zeros, BabelStream/nvbench practice) in fp16 or
// bf16, or fp8 E4M3 K/V with a per-tensor scale, and the element conversions the
// float64 reference reads them back with (every one exact).
#include <cstdint>
#include <string>
#include <vector>

#include "half.hpp"
#include "kvsight/probes/probes.hpp"

namespace kvsight::probes::detail {

inline std::uint64_t element_bytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

// --kv-dtype: "auto" stores K/V in the q dtype (--dtype); "fp8_e4m3" as fp8 bytes.
inline bool kv_is_fp8(const AttentionShape& shape) { return shape.kv_dtype == "fp8_e4m3"; }
// Bytes of one K or V element as the kernels read it.
inline std::uint64_t kv_element_bytes(const AttentionShape& shape) {
  return kv_is_fp8(shape) ? 1 : element_bytes(shape.dtype);
}

// splitmix64 (Steele, Lea, Flood 2014): a fast, well-mixed 64-bit sequence from a seed.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform values in [-1, 1) stored as fp16/bf16, chunks filled in parallel with
// per-chunk seeds (deterministic for any thread count).
void fill_random(std::vector<std::uint16_t>& out, bool bf16, std::uint64_t seed);

inline double to_double(std::uint16_t bits, bool bf16) {
  return bf16 ? bf16_to_float(bits) : fp16_to_float(bits);
}

// fp8 E4M3 (e4m3fn) -> double from the format's definition (docs/reference/kernels.md
// "fp8 E4M3 K/V"), written apart from the kernels' bit decode
// (kernels/fp8_e4m3.hpp) so that the reference does not share its mistakes:
// exponent field e, mantissa m: e = 0 gives m x 2^-9, else 2^(e - 7) x (1 + m / 8);
// 0x7F / 0xFF are NaN. Every value is exact in double.
double fp8_e4m3_to_double(std::uint8_t byte);
// fp32 -> E4M3, round to nearest, ties to the even code, saturating at +-448 (vLLM
// writes its fp8 cache with __NV_SATFINITE, csrc/quantization/fp8/nvidia/quant_utils.cuh).
std::uint8_t float_to_fp8_e4m3(float value);

// Per-tensor scales of the probes' fp8 K and V: values drawn uniform in [-amax, amax)
// are stored as e4m3(value / scale) with scale = amax / 448, so the largest one
// lands near the top code, as vLLM's calibrated k_scale / v_scale (amax / 448)
// place them. K and V get different ranges so that a swapped scale fails the check;
// neither scale is 1 or a power of two, so the scale path is exercised.
inline constexpr float kFp8Max = 448.0f;
inline constexpr float kFp8KeyAmax = 1.0f;
inline constexpr float kFp8ValueAmax = 0.5f;

// One K or V pool on the host, as uploaded and as the reference reads it back.
class KvPool {
 public:
  // elements random values: fp16/bf16 uniform in [-1, 1) (fill_random), or fp8
  // bytes of values uniform in [-amax, amax) at scale amax / 448.
  void fill(const AttentionShape& shape, std::uint64_t elements, float fp8_amax, std::uint64_t seed);
  const void* data() const;
  std::uint64_t bytes() const;
  // The dequantization scale the kernels get (k_scale / v_scale); 1 for fp16/bf16.
  float scale() const { return scale_; }
  // Element i as the kernels must read it, exact: the 16-bit value, or the fp8
  // value times the float scale (a 4-bit by 24-bit product, exact in double).
  double value(std::uint64_t element) const;

 private:
  bool fp8_ = false, bf16_ = true;
  float scale_ = 1.0f;
  std::vector<std::uint16_t> halves_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace kvsight::probes::detail
