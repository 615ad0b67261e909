#pragma once
// The probes' inputs: random data (never zeros, BabelStream/nvbench practice) in fp16 or
// bf16, and the element conversions the float64 reference reads them back with.
#include <cstdint>
#include <string>
#include <vector>

#include "half.hpp"

namespace kvsight::probes::detail {

inline std::uint64_t element_bytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

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

}  // namespace kvsight::probes::detail
