#pragma once
// 64-bit arithmetic on byte and element counts with overflow detected. Every
// count the planner prints goes through these: an absurd context x batch must
// give an error naming what overflowed, never a wrapped number.
#include <cstdint>
#include <string_view>

#include "kvsight/error.hpp"

namespace kvsight {

inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw OverflowError(std::string(what), "value exceeds 2^64 - 1 bytes/elements (" + std::to_string(a) +
                                               " x " + std::to_string(b) + "); use smaller inputs");
  }
  return out;
}

inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw OverflowError(std::string(what), "value exceeds 2^64 - 1 bytes/elements (" + std::to_string(a) +
                                               " + " + std::to_string(b) + "); use smaller inputs");
  }
  return out;
}

// ceil(a / b) for b > 0, without the a + b - 1 overflow.
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// Rounds a up to a multiple of b (b > 0), overflow checked.
inline std::uint64_t round_up(std::uint64_t a, std::uint64_t b, std::string_view what) {
  return checked_mul(ceil_div(a, b), b, what);
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline double to_gib(std::uint64_t bytes) { return static_cast<double>(bytes) / kGiB; }

}  // namespace kvsight
