#pragma once
// TensorRT-LLM's own options (planner/src/engines/trtllm.cpp reads them).
#include <cstdint>
#include <optional>

namespace kvsight {

struct TrtllmOptions {
  std::optional<double> free_gpu_memory_fraction;  // KvCacheConfig.free_gpu_memory_fraction (default 0.9)
  // max_num_tokens of the warm-up whose activations are estimated (default 8192,
  // trtllm.cpp); no kvsight flag sets it yet.
  std::optional<std::uint64_t> max_num_tokens;
};

}  // namespace kvsight
