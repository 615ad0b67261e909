#pragma once
// TensorRT-LLM's own options (planner/src/engines/trtllm.cpp reads them).
#include <cstdint>
#include <optional>

namespace kvsight {

struct TrtllmOptions {
  std::optional<double> free_gpu_memory_fraction;  // KvCacheConfig.free_gpu_memory_fraction (default 0.9)
  // max_num_tokens of the warm-up whose activations are estimated (default 8192,
  // trtllm.cpp): trtllm-serve --max_num_tokens (the field max_num_batched_tokens).
  std::optional<std::uint64_t> max_num_tokens;
  // --max_batch_size: requests scheduled at once (default 2048, BuildConfig; issue #22 item 4;
  // the field max_num_seqs).
  std::optional<std::uint64_t> max_batch_size;
};

}  // namespace kvsight
