#pragma once
// vLLM's own options (planner/src/engines/vllm.cpp reads them; the flags that set them
// are in VllmEngine::flags and kvsight/engine_options.hpp). Unset optionals mean the
// version's default, which the engine fills in and reports as an assumption.
#include <cstdint>
#include <optional>
#include <string>

#include "kvsight/speculative.hpp"

namespace kvsight {

struct VllmOptions {
  std::optional<double> gpu_memory_utilization;         // --gpu-memory-utilization
  std::optional<std::uint64_t> max_num_batched_tokens;  // --max-num-batched-tokens
  std::optional<std::uint64_t> max_num_seqs;            // --max-num-seqs
  std::optional<std::uint64_t> kv_cache_memory_bytes;   // --kv-cache-memory-bytes
  bool enforce_eager = false;                           // no CUDA graphs -> no graph memory estimate
  bool enable_prefix_caching = false;                   // hybrid "align" mode keeps +1 state page
  bool disable_prefix_caching = false;   // --no-enable-prefix-caching (hybrid default is on from 0.28)
  std::optional<bool> async_scheduling;  // --[no-]async-scheduling; unset = the version's default
  bool api_server = true;                // `vllm serve` defaults (vs offline LLM class, --offline)
  std::optional<SpeculativeConfig> speculative;
  std::string kv_connector;  // --kv-transfer-config's "kv_connector" (e.g. LMCacheConnectorV1)
  // --gdn-prefill-backend (0.33+); empty = auto (FlashInfer where the device supports it).
  std::string gdn_prefill_backend;
};

struct ModelSpec;
struct EngineOptions;
// vLLM's attention block size for this model: --block-size, else 16 (MLA: the
// backend's forced size), raised for hybrid attention + recurrent models so an
// attention page matches the state page (formulas.md step 3), and on the devices where the
// FlashInfer GDN prefill runs a multiple of 64 for gated delta-net hybrids (gpu null: no
// device, the Triton prefill). VllmEngine::block_size is the one caller in the planner (the
// engine decision); tests call it directly.
struct GpuSpec;
std::uint32_t vllm_block_size(const ModelSpec& model, const EngineOptions& options, const GpuSpec* gpu = nullptr);

}  // namespace kvsight
