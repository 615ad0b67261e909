#pragma once
// The fit use case, the inverse of plan: which (GPU kind, TP, PP, KV cache type, block
// size) configurations serve N sequences of L tokens under an engine's rules. Every
// candidate is one run of the plan use case (app/src/plan.cpp plan_item) with the
// engine's decision on that GPU (kvsight/engine_decision.hpp: start-up checks and the
// attention kernels, so a KV type the device cannot run is a rejected candidate); nothing
// here restates an engine rule. Search grid and ordering: docs/reference/fleet.md "fit".
#include <cstdint>
#include <string>
#include <vector>

#include "kvsight/app/figures.hpp"
#include "kvsight/app/verdict.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/model.hpp"

namespace kvsight::app {

struct FitRequest {
  std::string model;              // catalog id, HF id or path (one model)
  std::uint64_t concurrency = 0;  // N sequences served at once (--concurrency)
  std::uint64_t context = 0;      // L tokens each (--context); also the engine's max_model_len
  std::string gpus = "all";       // GPU catalog ids, comma list or "all"
  EngineOptions options;          // engine, version and overrides; tp/pp/kv type/block are searched
  std::uint32_t max_gpus = 8;     // TP x PP searched up to this many GPUs of one kind
  // KV cache types to search; empty = the engine's types that keep the model's precision
  // (KvQualityTier::full); {"all"} = every type the engine offers (Engine::kv_cache_dtypes).
  std::vector<std::string> kv_cache_dtypes;
  // Block sizes to offer the engine; 0 = the engine's default. Empty = kDefaultBlockGrid.
  std::vector<std::uint32_t> block_sizes;
};

// Block sizes searched by default: the engine's own default only. A block size changes
// capacity by its rounding alone (a sequence holds ceil(L / block) blocks), so the full
// grid multiplies the search by 8 for differences under 1% and, sorted by headroom,
// would put block 1 first; kFullBlockGrid (--block-sizes all) searches it when asked.
inline const std::vector<std::uint32_t> kDefaultBlockGrid{0};
// The engine's default plus powers of two from 1 to 256, the span of vLLM's --block-size
// choices (vllm/config/cache.py BlockSize, docs/reference/fleet.md). Each size is offered
// to the engine, which refuses what it does not take (Engine::block_size); sizes the
// engine maps to the same block are one candidate.
inline const std::vector<std::uint32_t> kFullBlockGrid{0, 1, 8, 16, 32, 64, 128, 256};

struct FitCandidate {
  std::string gpu;  // catalog id
  std::uint32_t tp = 1;
  std::uint32_t pp = 1;
  std::uint32_t gpu_count = 1;    // tp x pp
  std::string kv_cache_dtype;     // as the engine spells it ("auto", "fp8", ...)
  std::string kv_dtype_resolved;  // what it stores ("bf16", "fp8_e4m3")
  // How lossy the KV type is (kvsight/engine_decision.hpp): "full", "8-bit", "low-bit".
  KvQualityTier kv_tier = KvQualityTier::full;
  std::uint32_t block_size = 0;            // the block the engine really uses (0: no paging)
  std::uint32_t block_size_requested = 0;  // 0: the engine's default
  bool fits = false;
  std::vector<std::string> reasons;  // why it is rejected (empty when it fits)
  // Plan figures, per GPU rank (0 when the plan did not get that far).
  std::uint64_t bytes_per_sequence = 0;  // one sequence of L tokens, block rounding included
  std::uint64_t needed_kv_bytes = 0;     // N x bytes_per_sequence
  std::uint64_t available_kv_bytes = 0;  // what the engine gives to KV (min over ranks)
  std::uint64_t weights_bytes_per_rank = 0;
  double max_concurrency = 0.0;  // sequences of L tokens the KV cache holds
  double headroom = 0.0;         // available / needed KV bytes - 1: the spare share
};

struct RefusedOption {
  std::string value;   // "fp8_ds_mla", "block 8"
  std::string reason;  // the engine's message
};

struct FitOutcome {
  std::string engine;          // canonical name
  std::string engine_display;  // "vLLM"
  std::string engine_version;
  ModelSpec model;
  std::uint64_t concurrency = 0;
  std::uint64_t context = 0;
  std::uint32_t max_gpus = 0;
  std::vector<std::string> gpus;  // searched
  // Fewest GPUs first, then the least lossy KV type (the model's own precision before
  // 8-bit before fewer bits), then most headroom: what a user would deploy.
  std::vector<FitCandidate> accepted;
  std::vector<FitCandidate> rejected;  // fewest GPUs first, each with its reasons
  // Options refused for the model as a whole (every GPU, TP and PP): a KV cache type the
  // engine cannot use for this model, a block size it does not take.
  std::vector<RefusedOption> refused_options;
  // KV cache types that store the same thing as one searched earlier ("bfloat16" = "auto").
  std::vector<std::string> duplicate_kv_cache_dtypes;
  // Lossy types the default search left out (--kv-cache-dtypes all or a list searches them).
  std::vector<std::string> lossy_kv_cache_dtypes;
  std::uint64_t candidates_planned = 0;  // plan use case runs
  double search_ms = 0.0;                // wall time of the search (JSON only: text stays reproducible)
  Verdict verdict = Verdict::ok;         // check_failed when nothing fits
};

// Throws InputError for bad input (naming the flag); a candidate the engine refuses is
// a rejected candidate, not an error.
FitOutcome run_fit(const FitRequest& request);

// One configuration planned as run_fit plans each candidate: N sequences of L tokens in the
// engine's own options, request.options as configured (TP, PP, block size), the KV cache
// type(s) the engine reads set to `kv_cache_dtype` ("" keeps request.options'), on `gpu`
// (its memory_bytes the memory planned). What preflight's fixes try on the node's device
// (app/src/preflight_fixes.cpp). Throws InputError only for bad input in the options.
FitCandidate fit_configuration(const FitRequest& request, const ModelSpec& model, const GpuSpec& gpu,
                               const std::string& kv_cache_dtype = "");

// The outcome as figures (app/src/fit_figures.cpp): the readable tables show the first
// `top` accepted and rejected configurations (0: all); CSV and JSON carry every one.
FigureDoc fit_figures(const FitOutcome& outcome, std::size_t top);

}  // namespace kvsight::app
