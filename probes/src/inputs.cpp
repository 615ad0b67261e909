// The probes' random inputs (inputs.hpp).
#include "inputs.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "parallel.hpp"

namespace kvsight::probes::detail {
namespace {

constexpr std::size_t kChunk = 1 << 20;

// Calls value(i, u) for every i, u uniform in [-1, 1), chunks in parallel with
// per-chunk seeds (deterministic for any thread count).
template <typename Store>
void for_each_uniform(std::size_t count, std::uint64_t seed, const Store& store) {
  const std::size_t chunks = (count + kChunk - 1) / kChunk;
  for_each_worker([&](unsigned worker, unsigned threads) {
    for (std::size_t chunk = worker; chunk < chunks; chunk += threads) {
      std::uint64_t state = seed ^ (0x632be59bd9b4e019ull * (chunk + 1));
      const std::size_t end = std::min(count, (chunk + 1) * kChunk);
      for (std::size_t i = chunk * kChunk; i < end; ++i) {
        store(i, static_cast<float>(splitmix64(state) >> 40) * (1.0f / 8388608.0f) - 1.0f);
      }
    }
  });
}

}  // namespace

void fill_random(std::vector<std::uint16_t>& out, bool bf16, std::uint64_t seed) {
  for_each_uniform(out.size(), seed, [&](std::size_t i, float value) {
    out[i] = bf16 ? float_to_bf16(value) : float_to_fp16(value);
  });
}

double fp8_e4m3_to_double(std::uint8_t byte) {
  const int exponent = (byte >> 3) & 0xf;
  const int mantissa = byte & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return (byte & 0x80) != 0 ? -magnitude : magnitude;
}

std::uint8_t float_to_fp8_e4m3(float value) {
  if (std::isnan(value)) return 0x7f;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  if (magnitude < 0x1p-6f) {
    // Subnormal range: the code is |value| / 2^-9 rounded to the nearest integer
    // (ties to even: nearbyint in the default rounding mode); 8 is 2^-6, the
    // smallest normal, whose code is 0x08 as well.
    return static_cast<std::uint8_t>(sign | static_cast<int>(std::nearbyint(magnitude * 0x1p9f)));
  }
  // Normal: keep fp32's top 3 mantissa bits, rounded to nearest even on the 20
  // dropped ones (a carry moves into the exponent, as it should), then rebias
  // the exponent from 127 to 7 (code = fp32 bits >> 20 less 120 x 8).
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(magnitude);
  const std::uint32_t rounded = (bits + 0x7ffffu + ((bits >> 20) & 1u)) >> 20;
  const std::uint32_t code = std::min<std::uint32_t>(rounded - (120u << 3), 0x7eu);  // above 448: 448
  return static_cast<std::uint8_t>(sign | code);
}

void KvPool::fill(const AttentionShape& shape, std::uint64_t elements, float fp8_amax, std::uint64_t seed) {
  fp8_ = kv_is_fp8(shape);
  bf16_ = shape.dtype == "bf16";
  if (!fp8_) {
    scale_ = 1.0f;
    halves_.resize(elements);
    fill_random(halves_, bf16_, seed);
    return;
  }
  scale_ = fp8_amax / kFp8Max;
  bytes_.resize(elements);
  for_each_uniform(bytes_.size(), seed, [&](std::size_t i, float uniform) {
    bytes_[i] = float_to_fp8_e4m3(uniform * fp8_amax / scale_);  // the drawn value, quantized
  });
}

const void* KvPool::data() const {
  return fp8_ ? static_cast<const void*>(bytes_.data()) : static_cast<const void*>(halves_.data());
}

std::uint64_t KvPool::bytes() const { return fp8_ ? bytes_.size() : halves_.size() * 2; }

double KvPool::value(std::uint64_t element) const {
  if (fp8_) return fp8_e4m3_to_double(bytes_[element]) * static_cast<double>(scale_);
  return to_double(halves_[element], bf16_);
}

}  // namespace kvsight::probes::detail
