#pragma once
// SGLang's own options (planner/src/engines/sglang.cpp reads them).
#include <cstdint>
#include <optional>

namespace kvsight {

struct SglangOptions {
  std::optional<double> mem_fraction_static;  // --mem-fraction-static: weights + KV pool
  // --max-mamba-cache-size: recurrent-state slots of a hybrid model (default: carved from
  // the rest of memory, sglang.cpp); no kvsight flag sets it yet.
  std::optional<std::uint64_t> max_mamba_cache_size;
  // --max-running-requests: requests running at once (issue #22 item 4; the field
  // max_num_seqs, set by store_option).
  std::optional<std::uint64_t> max_running_requests;
  // --max-total-tokens: an upper bound on the pool's tokens; the profiled size when that is
  // smaller (mem_cache/kv_cache_configurator.py _apply_token_constraints, 0.5.23).
  std::optional<std::uint64_t> max_total_tokens;
  // --disable-radix-cache: with --max-running-requests, the recurrent-state slots are that
  // many (mem_cache/kv_cache_configurator.py, 0.5.23), not a share of the memory.
  bool disable_radix_cache = false;
};

}  // namespace kvsight
