#pragma once
// vLLM speculative decoding: the draft's KV layers and weights (vllm_speculative.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/model_spec.hpp"
#include "kvsight/weights.hpp"

namespace kvsight::vllm {

struct DraftPlan {
  std::uint32_t kv_layers = 0;     // layers appended to the KV-cache specs
  std::uint64_t weight_bytes = 0;  // the drafter's weights, whole model
  std::uint64_t weight_bytes_per_rank = 0;
  std::string weights_why;  // one line: what was counted
  std::vector<std::string> notes;
};

// The target with the drafter's attention layers appended (vLLM registers the drafter's
// Attention modules in the same static forward context, so get_kv_cache_spec gives them
// specs beside the target's: gpu_model_runner.py get_kv_cache_spec, 0.33.0), and what the
// drafter adds to the weights. No speculative config: the target unchanged.
ModelSpec with_draft_layers(const ModelSpec& target, const EngineOptions& options, DraftPlan& plan);

}  // namespace kvsight::vllm
