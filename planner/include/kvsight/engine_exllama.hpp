#pragma once
// ExLlamaV2 / V3's own options (planner/src/engines/exllama.cpp reads them). kvsight
// spells them as TabbyAPI does (--cache-size, --cache-mode) and, like llama.cpp,
// --ctx-size / --cache-type-k.
#include <cstdint>
#include <optional>
#include <string>

namespace kvsight {

struct ExllamaOptions {
  std::optional<std::uint64_t> cache_size;  // tokens (ExLlamaV2Cache max_seq_len); default the model's
  std::string cache_mode = "f16";           // one mode for K and V: fp16, q8, q6, q4 (v3: q2 .. q8)
};

}  // namespace kvsight
