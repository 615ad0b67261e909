#pragma once
// vLLM's KV-cache planning, one function per stage of vLLM's own code, each with its
// own result so the tests can check every stage directly (tests/test_engine_vllm.cpp):
//
//   1. layer_cache_specs        per-layer KV cache spec      (gpu_model_runner.get_kv_cache_spec,
//                                                             vllm/v1/kv_cache_interface.py)
//   2. group_kv_cache_specs     KV cache groups, page         (kv_cache_utils.get_kv_cache_groups,
//                               unification, padding layers   _unify_kv_cache_spec_page_size,
//                                                             _get_kv_cache_groups_uniform_page_size)
//   3. project_stages           the groups projected onto     (kv_cache_utils.get_kv_cache_configs:
//                               each pipeline stage's layers  one config per worker)
//   -  scheduler_limits         max_num_batched_tokens / seqs (arg_utils.py, config/scheduler.py)
//   -  memory_budget            requested - non-KV memory     (vllm/v1/worker/gpu_worker.py
//                                                             determine_available_memory)
//   4. blocks_for_memory        num_blocks on one worker      (kv_cache_utils.get_num_blocks)
//   5. min_blocks_over_workers  the minimum over ranks        (get_kv_cache_configs)
//   6. enough_kv_memory         one request of a length fits  (_check_enough_kv_cache_memory)
//   7. estimate_max_model_len   binary search of the length   (_estimate_max_model_len)
//   8. report_figures           tokens, concurrency, log lines (_report_kv_cache_config,
//                                                             get_max_concurrency_for_kv_cache_config)
//
// VllmEngine::plan (vllm.cpp) calls them in this order. This header is internal to the
// planner and its tests.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "kvsight/budget.hpp"

namespace kvsight::vllm {

using engine_detail::Version;

enum class SpecKind { full, sliding, chunked, mla, mamba };

// Which of vLLM's versioned rules apply to a release (docs/reference/engine-versions.md
// lists each with the file and version it was read in).
struct VersionRules {
  bool v0 = false;                     // < 0.8: V0 engine log lines
  bool in_flight_batches = false;      // >= 0.26: sliding/chunked reserve max_in_flight_tokens
  bool v2_model_runner = false;        // >= 0.33: Model Runner V2 by default (async with PP: pp + 1 batches)
  bool large_device_tier = false;      // >= 0.28: >= 160 GiB devices get T 16384 / S 1024 for `vllm serve`
  bool hybrid_prefix_caching = false;  // >= 0.28: prefix caching on by default for hybrids, align mode
  bool null_block_reserved = false;    // >= 0.29: the null block is not usable capacity
  bool mla_flash_attn = false;         // >= 0.33: Hopper MLA picks FLASH_ATTN_MLA (multiple of 16)
  bool measured_overheads = false;     // >= 0.26: non-torch 0.55 GiB at TP > 1 (issue #13 logs, not the source)
  bool block_64_default = false;       // >= 0.34: CacheConfig.DEFAULT_BLOCK_SIZE 64 (was 16)
  bool extensible_kv_cache = false;    // >= 0.34: KV cache sized from memory measured after warmup
  bool mamba2_checkpoint_page = false;  // >= 0.33: align mode keeps a prefill-checkpoint page per Mamba-2 layer
  // >= 0.33: with FlashInfer's GDN prefill, align mode keeps a prefill-checkpoint page per
  // gated delta-net layer and aligns the block to 64 (gdn_prefill_checkpoints).
  bool gdn_flashinfer_checkpoint = false;
};
VersionRules rules_for(const Version& version);
const std::vector<std::string>& vllm_versions();
// The version planned when --engine-version is not given: 0.33.0, not the newest known
// (docs/reference/engine-versions.md "Default version").
const std::string& vllm_default_version();
// --engine-version, else vllm_default_version(). Throws InputError listing the versions.
Version resolve_version(const EngineOptions& options);
// The attention block size before any backend or hybrid adjustment: --block-size, else
// CacheConfig.DEFAULT_BLOCK_SIZE of the version (16; 64 from 0.34).
std::uint32_t default_block_size(const VersionRules& rules);
// Mamba "align" mode: --enable-prefix-caching, or (0.28+) the default for hybrid models unless
// --no-enable-prefix-caching.
// The attention block vLLM chooses (vllm_block_size), with the pages of a hybrid raise
// (0 when the model is not hybrid).
struct BlockFigures {
  std::uint32_t tokens = 0;
  std::uint64_t state_page_bytes = 0;       // one recurrent layer's state per rank
  std::uint64_t attention_token_bytes = 0;  // the largest attention layer's bytes per token
};
BlockFigures block_figures(const ModelSpec& model, const EngineOptions& options, const GpuSpec* gpu);

// FlashInfer GDN prefill's checkpoint alignment (v1/attention/backends/gdn_attn.py
// FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, 0.33.0 and 0.34.0).
inline constexpr std::uint32_t kGdnCheckpointAlignment = 64;

// Whether the gated delta-net layers export prefill checkpoints (0.33+): align mode and
// FlashInfer's GDN prefill, which `_resolve_gdn_prefill_backend` (qwen_gdn_linear_attn.py)
// picks on CUDA for SM 9.0, and for SM 10.x / 12.x when linear_key_head_dim is 128 and the
// CUDA runtime is 13+ (the PyPI wheels of 0.33 / 0.34 are CUDA 13 builds). Each GDN layer
// then keeps a third state page and the block is a multiple of 64. Without a device
// (gpu null) or with --gdn-prefill-backend other than flashinfer: Triton, no checkpoint.
bool gdn_prefill_checkpoints(const ModelSpec& model, const EngineOptions& options, const VersionRules& rules,
                             const GpuSpec* gpu);

bool prefix_caching_align(const ModelSpec& model, const EngineOptions& options, const VersionRules& rules);

// max_concurrent_batches (config/vllm.py, 0.33): with async scheduling 2 at PP 1; at PP > 1
// pp + 1 on Model Runner V2, pp on V1; without async scheduling pp.
std::uint64_t max_concurrent_batches(const VersionRules& rules, const EngineOptions& options);

// One layer's KV cache spec on one rank (vllm/v1/kv_cache_interface.py).
struct CacheSpec {
  SpecKind kind = SpecKind::full;
  std::uint64_t bytes_per_token = 0;  // attention: one token, one layer, one rank
  std::uint64_t window = 0;           // sliding window W / attention chunk C
  std::uint64_t block_size = 0;       // tokens per block (0 for Mamba: one page per request)
  std::uint64_t page_bytes = 0;       // after padding / unification
  // Mamba: the extra state pages speculative decoding keeps per request (MambaSpec
  // num_speculative_blocks = num_speculative_tokens, v1/kv_cache_interface.py 0.33.0).
  std::uint64_t speculative_blocks = 0;
  // Mamba: the prefill-checkpoint state pages align mode keeps (MambaSpec
  // num_prefill_checkpoint_blocks: 1 for Mamba-2 layers, mamba_mixer2.py get_kv_cache_spec, 0.33).
  std::uint64_t checkpoint_blocks = 0;
  bool operator==(const CacheSpec&) const = default;
};

struct LayerCacheSpec {
  std::uint32_t layer = 0;  // model layer index
  CacheSpec spec;
};

struct Group {
  CacheSpec spec;
  std::vector<std::uint32_t> layers;  // model layer indices
};

// Result of the grouping stage.
struct Layout {
  std::vector<Group> groups;
  bool uniform_type = false;  // one group whose layers have different pages (UniformTypeKVCacheSpecs)
  std::vector<std::uint64_t> layer_page;  // per model layer, 0 = no KV
  std::uint32_t group_size = 0;
  std::uint32_t padding_layers = 0;
};

// One pipeline stage's worker: its layers and what one block id costs there.
struct StageProjection {
  std::vector<std::uint32_t> layers;
  std::uint64_t block_bytes = 0;
};

struct SchedulerLimits {
  std::uint64_t max_num_batched_tokens = 0;
  std::uint64_t max_num_seqs = 0;
  std::string why;
};

// The worker's memory budget (only when profiling or --kv-cache-memory-bytes applies).
struct MemoryBudget {
  double util = 0.0;                  // gpu_memory_utilization in force
  // 0.34+ extensible KV cache (config/cache.py enable_extensible_kv_cache): the profile only
  // reserves address space (reserved_gib_signed, what "Available KV cache memory" prints);
  // available_bytes is what the memory measured after warmup leaves
  // (v1/worker/extensible_kv_cache.py measure_kv_cache_bytes).
  bool extensible = false;
  double reserved_gib_signed = 0.0;
  std::uint64_t reserved_bytes = 0;
  double available_gib_signed = 0.0;  // requested - non-KV memory, negative when the model does not fit
  std::uint64_t requested_bytes = 0;  // ceil(total x gpu_memory_utilization); 0 without a total
  std::uint64_t overhead_bytes = 0;   // activation + non-torch + CUDA graphs
  std::uint64_t available_bytes = 0;  // for KV
  std::vector<Assumption> assumptions;
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

// Result of the block stages (4, 5).
struct BlockPool {
  std::uint64_t num_blocks = 0;
  std::uint64_t page_bytes = 0;  // bytes of one block id on the limiting worker
  std::uint32_t limiting_rank = 0;
};

// Result of the report stage.
struct ReportFigures {
  std::uint64_t kv_tokens = 0;
  double max_concurrency = 0.0;
  std::vector<std::string> engine_log;
};

bool has_recurrent(const ModelSpec& model);
// Bytes one token adds to one layer's DeepSeek V3.2 indexer K cache (vLLM: fp8 keys plus
// an fp32 scale per 128 elements).
std::uint64_t indexer_k_bytes_per_token(const IndexerSpec& indexer);
bool is_mla_model(const ModelSpec& model);
std::uint64_t attn_bytes_per_token_max(const ModelSpec& model, const KvTypes& types, std::uint32_t tp);
std::string_view spec_name(SpecKind kind);

// 1. Every KV-holding layer's spec at block size `attn_block` (Mamba pages padded to the
//    largest attention page). Throws InputError for a sliding/chunked layer without a window.
// speculative_blocks: --speculative-config's num_speculative_tokens (extra Mamba pages);
// checkpoint_blocks: the prefill-checkpoint pages align mode keeps per Mamba layer.
std::vector<LayerCacheSpec> layer_cache_specs(const ModelSpec& model, const KvTypes& types, std::uint32_t tp,
                                              std::uint32_t attn_block, std::uint32_t speculative_blocks = 0,
                                              std::uint32_t checkpoint_blocks = 0);

// 2. vLLM's KV cache groups over all layers (global, as vLLM merges every worker's specs).
Layout group_kv_cache_specs(std::vector<LayerCacheSpec> specs, std::uint32_t num_layers);

// 3. Pipeline stage s's layers and its bytes per block id.
std::vector<StageProjection> project_stages(const Layout& layout, std::uint32_t num_layers, std::uint32_t pp);
// Bytes one block id costs on a stage holding `stage_layers`.
std::uint64_t bytes_per_block(const Layout& layout, const std::vector<std::uint32_t>& stage_layers);

// Scheduler defaults for this version and device, then the user's values, then the clamps
// of config/scheduler.py. Throws InputError for a zero value.
// sliding_window: the model has a sliding-window layer (V0 then keeps chunked prefill off
// whatever the length).
SchedulerLimits scheduler_limits(const Version& version, const EngineOptions& options,
                                 std::optional<std::uint64_t> total_bytes, const GpuSpec* gpu,
                                 std::uint64_t max_model_len, bool sliding_window = false);

// Whether vLLM 0.34+ runs the extensible KV cache: on by default on CUDA and ROCm unless
// --kv-cache-memory-bytes is given (config/vllm.py _resolve_extensible_kv_cache, 0.34.0).
// gpu may be null (--gpu-mem-gib: a CUDA device assumed).
bool extensible_kv_cache(const VersionRules& rules, const EngineOptions& options, const GpuSpec* gpu);

// The worker's budget. `total_bytes` may be empty only with --kv-cache-memory-bytes.
MemoryBudget memory_budget(const Version& version, const ModelSpec& model, const EngineOptions& options,
                           std::optional<std::uint64_t> total_bytes, std::uint64_t weights_per_rank,
                           const SchedulerLimits& limits, const GpuSpec* gpu = nullptr);

// Pages one request of length `len` needs in one group / over all groups
// (kv_cache_interface.py max_memory_usage_bytes / page_size_bytes).
std::uint64_t pages_per_request(const CacheSpec& spec, std::uint64_t len, std::uint64_t max_batched,
                                bool align_mode);
std::uint64_t pages_for_request(const Layout& layout, std::uint64_t len, std::uint64_t max_batched,
                                bool align_mode);

// 4. Blocks one worker's memory holds.
std::uint64_t blocks_for_memory(std::uint64_t available_bytes, std::uint64_t block_bytes);
// 5. The minimum over every worker (stage x TP rank; TP ranks of a stage are alike).
BlockPool min_blocks_over_workers(const std::vector<StageProjection>& stages, std::uint64_t available_bytes,
                                  std::uint32_t tp);

// 6. Does one request of `len` fit on every stage? `reserve_null`: the null block is not usable.
bool enough_kv_memory(const Layout& layout, const std::vector<StageProjection>& stages,
                      std::uint64_t available_bytes, std::uint64_t len, std::uint64_t max_batched,
                      bool align_mode, bool reserve_null);

// 7. The largest length in [1, upper] for which `fits` holds (0 when not even 1 fits).
std::uint64_t estimate_max_model_len(const std::function<bool(std::uint64_t)>& fits, std::uint64_t upper);

// 8. Tokens, concurrency and the log lines vLLM prints for this version.
struct ReportInputs {
  const Version* version = nullptr;
  const Layout* layout = nullptr;
  const BlockPool* pool = nullptr;
  std::uint64_t max_model_len = 0;
  std::uint64_t req_pages = 0;  // pages one request of max_model_len needs
  std::uint32_t block_size = 0;
  std::uint64_t available_bytes = 0;
  double available_gib_signed = 0.0;  // what vLLM prints (it can be negative)
  double total_gib = 0.0;
  double util = 0.0;
  bool fits = false;
  std::uint64_t largest = 0;
  bool kv_cache_memory_given = false;
  // 0.34+ extensible KV cache: "Available KV cache memory" prints the reservation, and
  // "Extended KV cache to N blocks (X GiB)." the measured size.
  bool extensible = false;
  double reserved_gib_signed = 0.0;
};
ReportFigures report_figures(const ReportInputs& in);

}  // namespace kvsight::vllm
