// The probes' random inputs (inputs.hpp).
#include "inputs.hpp"

#include <algorithm>

#include "parallel.hpp"

namespace kvsight::probes::detail {

void fill_random(std::vector<std::uint16_t>& out, bool bf16, std::uint64_t seed) {
  constexpr std::size_t kChunk = 1 << 20;
  const std::size_t chunks = (out.size() + kChunk - 1) / kChunk;
  for_each_worker([&](unsigned worker, unsigned threads) {
    for (std::size_t chunk = worker; chunk < chunks; chunk += threads) {
      std::uint64_t state = seed ^ (0x632be59bd9b4e019ull * (chunk + 1));
      const std::size_t end = std::min(out.size(), (chunk + 1) * kChunk);
      for (std::size_t i = chunk * kChunk; i < end; ++i) {
        const float value = static_cast<float>(splitmix64(state) >> 40) * (1.0f / 8388608.0f) - 1.0f;
        out[i] = bf16 ? float_to_bf16(value) : float_to_fp16(value);
      }
    }
  });
}

}  // namespace kvsight::probes::detail
