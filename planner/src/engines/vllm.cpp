// vLLM (V1 engine; V0 log lines for versions before 0.8) KV-cache budget, in vLLM's own
// stages (vllm_stages.hpp lists them with the vLLM function each follows).
//
// Sources, read for this file (vllm-project/vllm):
//   vllm/v1/worker/gpu_worker.py        requested = total x gpu_memory_utilization; available =
//                                       requested - non_kv_cache_memory; "Available KV cache memory"
//   vllm/v1/core/kv_cache_utils.py      grouping (_get_kv_cache_groups_uniform_page_size), page
//                                       unification (_unify_kv_cache_spec_page_size), num_blocks,
//                                       get_max_concurrency_for_kv_cache_config, _report_kv_cache_config,
//                                       _estimate_max_model_len / _auto_fit_max_model_len
//   vllm/v1/kv_cache_interface.py       per-spec max_memory_usage_bytes (full, sliding, chunked, Mamba)
//   vllm/model_executor/models/config.py  HybridAttentionMambaModelConfig (block size raise, Mamba page
//                                       padding); newer trees: Platform._align_hybrid_block_size
//   vllm/config/model.py                get_mamba_chunk_size (default 2048), _get_and_verify_max_len
//   vllm/platforms/cuda.py              MLA backends force block 64 (FlashMLA) / 128 (CUTLASS MLA)
//   vllm/engine/arg_utils.py, vllm/config/scheduler.py   scheduler defaults (overheads.md)
// PRs/issues: #13596 (log in tokens), #19029 (sliding-window concurrency), #40691/#40694 (tokens line =
// max_concurrency x max_model_len), #10517 (V0 figures used by the tests), #30515 (CUDA-graph estimate).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <string>

#include "common.hpp"
#include "launch_tables.hpp"
#include "kvsight/ascii.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/error.hpp"
#include "log_line.hpp"
#include "vllm_overheads.hpp"
#include "vllm_speculative.hpp"
#include "vllm_stages.hpp"

namespace kvsight {
namespace vllm {

using namespace engine_detail;

bool is_mla_model(const ModelSpec& model) {
  return std::any_of(model.layers.begin(), model.layers.end(),
                     [](const LayerSpec& l) { return l.kind == LayerKind::mla; });
}

std::uint64_t attn_bytes_per_token_max(const ModelSpec& model, const KvTypes& types, std::uint32_t tp) {
  std::uint64_t best = 0;
  for (const LayerSpec& l : model.layers)
    if (l.allocates_kv()) best = std::max(best, layer_kv_bytes_per_token(l, types, tp));
  return best;
}

bool has_recurrent(const ModelSpec& model) {
  return model.recurrent && model.count(LayerKind::recurrent) > 0;
}

std::string_view spec_name(SpecKind kind) {
  switch (kind) {
    case SpecKind::full:
      return "full attention";
    case SpecKind::sliding:
      return "sliding window";
    case SpecKind::chunked:
      return "chunked local";
    case SpecKind::mla:
      return "MLA";
    case SpecKind::mamba:
      return "recurrent state";
  }
  return "";
}

// ---------------------------------------------------------------- versioned rules

// vllm/config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE: 16 through 0.33.0, 64 from 0.34.0
// (read in both wheels); platforms/interface.py update_block_size_for_backend then asks the
// attention backend (get_preferred_block_size), and FLASH_ATTN on CUDA, MultipleOf(16)
// (v1/attention/backends/flash_attn.py, 0.34.0), keeps the default.
std::uint32_t default_block_size(const VersionRules& rules) { return rules.block_64_default ? 64 : 16; }

// Versions whose behaviour differs somewhere in this file (the boundaries used below).
const std::vector<std::string>& vllm_versions() {
  static const std::vector<std::string> versions = {
      "0.6.4",  "0.7.3",  "0.8.5",  "0.9.2",  "0.10.2", "0.11.2", "0.12.0", "0.19.0", "0.20.0", "0.21.0",
      "0.23.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.32.0", "0.33.0", "0.34.0"};
  return versions;
}
// The default stays 0.33.0 although 0.34.0 is known (issue #28): 0.34 sizes the KV cache from
// memory measured after warmup and CUDA-graph capture, and kvsight's estimate of that
// measurement (memory_budget below) has not yet been checked against a published 0.34 log or
// vLLM's own code on a device; 0.33's rules have (docs/fidelity.md). docs/reference/
// engine-versions.md "Default version" says when this changes.
const std::string& vllm_default_version() {
  static const std::string version = "0.33.0";
  return version;
}
Version resolve_version(const EngineOptions& options) {
  return parse_engine_version(
      options.engine_version.empty() ? vllm_default_version() : options.engine_version, VersionForm::dotted,
      "vLLM", vllm_versions());
}

bool prefix_caching_align(const ModelSpec& model, const EngineOptions& options, const VersionRules& rules) {
  if (!has_recurrent(model) || options.vllm.disable_prefix_caching) return false;
  if (options.vllm.enable_prefix_caching) return true;
  // 0.28+: on by default for hybrids (rules_for), so Mamba layers run in "align" mode.
  return rules.hybrid_prefix_caching && model.attention_layer_count() > 0;
}

// Everything but the device: a 0.33+ gated delta-net hybrid in align mode whose
// --gdn-prefill-backend is "auto" (unset) or "flashinfer" (the other backends export no checkpoint).
static bool gdn_checkpoints_if_flashinfer(const ModelSpec& model, const EngineOptions& options, const VersionRules& rules) {
  const std::string& requested = options.vllm.gdn_prefill_backend;
  return rules.gdn_flashinfer_checkpoint && model.recurrent &&
         model.recurrent->kind == RecurrentKind::gated_delta_net && prefix_caching_align(model, options, rules) &&
         (requested.empty() || requested == "flashinfer");
}

bool gdn_prefill_checkpoints(const ModelSpec& model, const EngineOptions& options, const VersionRules& rules,
                             const GpuSpec* gpu) {
  if (gpu == nullptr || !gdn_checkpoints_if_flashinfer(model, options, rules)) return false;
  // is_device_capability(90) is SM 9.0 exactly; the Blackwell families need head_k_dim 128.
  const unsigned cc = compute_capability(*gpu);
  if (cc == 90) return true;
  const bool blackwell = (cc >= 100 && cc < 110) || (cc >= 120 && cc < 130);
  return blackwell && model.recurrent->key_head_dim == 128;
}

VersionRules rules_for(const Version& v) {
  VersionRules r;
  r.v0 = !v.at_least(0, 8);  // V1 became the default engine in 0.8.0
  // kv_cache_interface.py SlidingWindowSpec / ChunkedLocalAttentionSpec
  // max_admission_blocks_per_request take VllmConfig.max_in_flight_tokens (read in 0.33;
  // from 0.26 per issue #13's comparison against the wheels).
  r.in_flight_batches = v.at_least(0, 26);
  // config/vllm.py use_v2_model_runner: True unless a feature is unsupported (0.33).
  r.v2_model_runner = v.at_least(0, 33);
  // engine/arg_utils.py get_batch_defaults: device_memory >= 160 GiB tier (0.33; from 0.28, issue #13).
  r.large_device_tier = v.at_least(0, 28);
  // engine/arg_utils.py: enable_prefix_caching defaults to model_config.is_prefix_caching_supported,
  // true for hybrids; models/config.py MambaModelConfig then sets mamba_cache_mode "align"
  // (0.33; from 0.28, issue #13).
  r.hybrid_prefix_caching = v.at_least(0, 28);
  // PR #47272 / #48724: the capacity checks leave out the null block; first released in 0.29
  // (issue #13), not 0.28 as assumed before.
  r.null_block_reserved = v.at_least(0, 29);
  // platforms/cuda.py _get_backend_priorities (0.33): SM 9.x lists FLASH_ATTN_MLA first, whose
  // get_supported_kernel_block_sizes is MultipleOf(16) (v1/attention/backends/mla/flashattn_mla.py).
  r.mla_flash_attn = v.at_least(0, 33);
  // model_executor/layers/mamba/mamba_mixer2.py get_kv_cache_spec (0.33 and 0.34): every Mamba-2
  // layer's MambaSpec has num_prefill_checkpoint_blocks = 1 (the internal prefill checkpoints
  // of PR #57329, after #52789), and MambaSpec.max_memory_usage_bytes in align mode is
  // page x (2 + num_speculative_blocks + num_prefill_checkpoint_blocks). 0.32 and earlier were
  // not read for it: the rule is kept from the first release read with it.
  r.mamba2_checkpoint_page = v.at_least(0, 33);
  // model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py (0.33.0, 0.34.0): with the FlashInfer
  // GDN prefill in align mode, _checkpoint_alignment = 64 and get_kv_cache_spec keeps
  // num_prefill_checkpoint_blocks = 1; 0.30-0.32 pick the same backend but export no checkpoint.
  r.gdn_flashinfer_checkpoint = v.at_least(0, 33);
  r.measured_overheads = v.at_least(0, 26);
  // config/cache.py (0.34.0): DEFAULT_BLOCK_SIZE = 64 (16 in 0.33.0).
  r.block_64_default = v.at_least(0, 34);
  // config/cache.py enable_extensible_kv_cache, default None and settled by config/vllm.py
  // _resolve_extensible_kv_cache (0.34.0; absent from 0.33.0).
  r.extensible_kv_cache = v.at_least(0, 34);
  return r;
}

bool extensible_kv_cache(const VersionRules& rules, const EngineOptions& options, const GpuSpec* gpu) {
  if (!rules.extensible_kv_cache) return false;
  // config/vllm.py _resolve_extensible_kv_cache (0.34.0): off when the platform is not CUDA
  // or ROCm, with kv_cache_memory_bytes or num_gpu_blocks_override, elastic EP, and KV
  // connectors that share the cache through legacy CUDA IPC or their own memory pool
  // (LMCacheMPConnector, custom_mem_pool; NIXL without an IMEX channel). kvsight sees the
  // first two; a named connector keeps it on with a note (VllmEngine::budget).
  if (options.vllm.kv_cache_memory_bytes) return false;
  if (gpu != nullptr && gpu->vendor != "nvidia" && gpu->vendor != "amd") return false;
  return true;
}

std::uint64_t max_concurrent_batches(const VersionRules& rules, const EngineOptions& options) {
  if (!rules.in_flight_batches) return 1;
  const std::uint64_t pp = options.pp;
  // Async scheduling is on by default (config/vllm.py, "Enable async scheduling unless there
  // is an incompatible option"); the V1 runner turns it off with PP > 1.
  const bool async = options.vllm.async_scheduling.value_or(rules.v2_model_runner || pp <= 1);
  if (async) {
    if (rules.v2_model_runner) return pp + 1;
    if (pp <= 1) return 2;
  }
  return pp;
}

// ---------------------------------------------------------------- 1. per-layer spec

// The prefill-checkpoint pages of the model's Mamba layers: Mamba-2 mixers from 0.33
// (VersionRules::mamba2_checkpoint_page); gated delta-net layers with FlashInfer's GDN prefill
// (gdn_prefill_checkpoints, qwen_gdn_linear_attn.py _exports_checkpoints); Mamba-1 and short
// conv none.
std::uint32_t mamba_checkpoint_blocks(const ModelSpec& model, const VersionRules& rules, bool gdn_checkpoints) {
  if (!model.recurrent) return 0;
  if (model.recurrent->kind == RecurrentKind::mamba2) return rules.mamba2_checkpoint_page ? 1 : 0;
  if (model.recurrent->kind == RecurrentKind::gated_delta_net) return gdn_checkpoints ? 1 : 0;
  return 0;
}

std::uint64_t indexer_k_bytes_per_token(const IndexerSpec& indexer) {
  // deepseek_v2.py Indexer: quant_block_size 128, head_dim + head_dim // 128 * 4 bytes.
  return std::uint64_t{indexer.head_dim} + std::uint64_t{indexer.head_dim} / 128 * 4;
}

std::vector<LayerCacheSpec> layer_cache_specs(const ModelSpec& model, const KvTypes& types, std::uint32_t tp,
                                              std::uint32_t attn_block, std::uint32_t speculative_blocks,
                                              std::uint32_t checkpoint_blocks) {
  std::vector<LayerCacheSpec> specs;
  const std::uint64_t state_page =
      has_recurrent(model) ? recurrent_state_bytes(*model.recurrent, tp).total() : 0;
  const std::uint64_t attn_page_max =
      checked_mul(attn_block, attn_bytes_per_token_max(model, types, tp), "attention page");
  for (std::uint32_t i = 0; i < model.num_layers(); ++i) {
    const LayerSpec& l = model.layers[i];
    CacheSpec s;
    switch (l.kind) {
      case LayerKind::full_attention:
        s.kind = SpecKind::full;
        break;
      case LayerKind::sliding_window:
        s.kind = SpecKind::sliding;
        break;
      case LayerKind::chunked_local:
        s.kind = SpecKind::chunked;
        break;
      case LayerKind::mla:
        s.kind = SpecKind::mla;
        break;
      case LayerKind::recurrent:
        s.kind = SpecKind::mamba;
        break;
      case LayerKind::shared_kv:  // reads another layer's cache: no spec (Gemma 3n)
      case LayerKind::none:
        continue;
    }
    if (s.kind == SpecKind::mamba) {
      if (state_page == 0) continue;
      // HybridAttentionMambaModelConfig: the Mamba page is padded to the attention page
      // (mamba_page_size_padded) once the attention block is raised to cover it.
      s.page_bytes = attn_page_max > 0 ? std::max(state_page, attn_page_max) : state_page;
      s.speculative_blocks = speculative_blocks;
      s.checkpoint_blocks = checkpoint_blocks;
    } else {
      s.bytes_per_token = layer_kv_bytes_per_token(l, types, tp);
      s.window = (s.kind == SpecKind::sliding || s.kind == SpecKind::chunked) ? l.window : 0;
      if ((s.kind == SpecKind::sliding || s.kind == SpecKind::chunked) && s.window == 0)
        throw InputError("layers[" + std::to_string(i) + "].window",
                         "a sliding/chunked layer needs a window > 0");
      s.block_size = attn_block;
      s.page_bytes = checked_mul(attn_block, s.bytes_per_token, "page bytes");
    }
    specs.push_back({i, s});
    if (l.indexer && model.indexer) {
      // DeepSeek V3.2: the layer's indexer keeps its own K cache, an MLAAttentionSpec of
      // one head, uint8, head_size index_head_dim + index_head_dim / 128 x 4 (fp8 keys
      // plus one fp32 scale per 128), whatever --kv-cache-dtype (deepseek_v2.py
      // DeepseekV32IndexerCache, 0.33; model-inputs.md "DeepSeek V3.2").
      CacheSpec ix;
      ix.kind = SpecKind::mla;
      ix.bytes_per_token = indexer_k_bytes_per_token(*model.indexer);
      ix.block_size = attn_block;
      ix.page_bytes = checked_mul(attn_block, ix.bytes_per_token, "indexer page bytes");
      specs.push_back({i, ix});
    }
  }
  return specs;
}

// ---------------------------------------------------------------- 2. grouping

Layout group_kv_cache_specs(std::vector<LayerCacheSpec> specs, std::uint32_t num_layers) {
  Layout out;
  out.layer_page.assign(num_layers, 0);
  if (specs.empty()) return out;

  // a. Every layer the same spec: one group (_get_kv_cache_groups_uniform_spec).
  const bool uniform_spec = std::all_of(
      specs.begin(), specs.end(), [&](const LayerCacheSpec& p) { return p.spec == specs.front().spec; });
  // b. Same kind, window and block size but different per-token bytes: one group
  //    (UniformTypeKVCacheSpecs: every layer needs the same number of token slots).
  const bool uniform_type = std::all_of(specs.begin(), specs.end(), [&](const LayerCacheSpec& p) {
    const CacheSpec& a = p.spec;
    const CacheSpec& b = specs.front().spec;
    return a.kind == b.kind && a.kind != SpecKind::mamba && a.window == b.window &&
           a.block_size == b.block_size;
  });
  if (uniform_spec || uniform_type) {
    Group g{specs.front().spec, {}};
    for (const LayerCacheSpec& p : specs) {
      g.layers.push_back(p.layer);
      // A layer may hold two caches (DeepSeek V3.2: MLA latent + indexer keys).
      out.layer_page[p.layer] = checked_add(out.layer_page[p.layer], p.spec.page_bytes, "layer page");
    }
    out.uniform_type = !uniform_spec;
    out.group_size = static_cast<std::uint32_t>(g.layers.size());
    out.groups.push_back(std::move(g));
    return out;
  }

  // c. _unify_kv_cache_spec_page_size: raise the block size of smaller attention pages
  //    that divide the largest; pad Mamba pages (and, in newer trees, non-MLA attention
  //    pages that do not divide it) to the largest.
  std::uint64_t max_page = 0;
  for (const LayerCacheSpec& p : specs) max_page = std::max(max_page, p.spec.page_bytes);
  for (LayerCacheSpec& p : specs) {
    CacheSpec& s = p.spec;
    if (s.page_bytes == max_page) continue;
    if (s.kind != SpecKind::mamba && max_page % s.page_bytes == 0) s.block_size *= max_page / s.page_bytes;
    s.page_bytes = max_page;
  }
  // d. _get_kv_cache_groups_uniform_page_size: bucket layers by spec (first appearance),
  //    group_size = the smallest bucket, or the largest when max < 1.5 x min; each bucket
  //    fills ceil(n / group_size) groups, layers[i::num_groups] to group i.
  std::vector<std::pair<CacheSpec, std::vector<std::uint32_t>>> buckets;
  for (const LayerCacheSpec& p : specs) {
    auto it = std::find_if(buckets.begin(), buckets.end(), [&](const auto& b) { return b.first == p.spec; });
    if (it == buckets.end())
      buckets.push_back({p.spec, {p.layer}});
    else
      it->second.push_back(p.layer);
  }
  std::size_t min_n = buckets.front().second.size(), max_n = min_n;
  for (const auto& b : buckets) {
    min_n = std::min(min_n, b.second.size());
    max_n = std::max(max_n, b.second.size());
  }
  const std::size_t group_size =
      (static_cast<double>(max_n) < 1.5 * static_cast<double>(min_n)) ? max_n : min_n;
  out.group_size = static_cast<std::uint32_t>(group_size);
  for (const auto& [spec, layers] : buckets) {
    const std::size_t num_groups = ceil_div(layers.size(), group_size);
    out.padding_layers += static_cast<std::uint32_t>(num_groups * group_size - layers.size());
    for (std::size_t g = 0; g < num_groups; ++g) {
      Group group{spec, {}};
      for (std::size_t k = g; k < layers.size(); k += num_groups) group.layers.push_back(layers[k]);
      out.groups.push_back(std::move(group));
    }
  }
  for (const LayerCacheSpec& p : specs) out.layer_page[p.layer] = p.spec.page_bytes;
  return out;
}

// ---------------------------------------------------------------- 3. per-stage projection

// Bytes one block id costs on one pipeline stage: the uniform page times the most
// layers any group has on that stage (the layers share group_size memory pools), or
// for a single UniformTypeKVCacheSpecs group the sum of its layers' pages.
std::uint64_t bytes_per_block(const Layout& layout, const std::vector<std::uint32_t>& stage_layers) {
  std::vector<bool> on_stage(layout.layer_page.size(), false);
  for (std::uint32_t i : stage_layers) on_stage[i] = true;
  if (layout.uniform_type) {
    std::uint64_t sum = 0;
    for (std::uint32_t i : stage_layers) sum = checked_add(sum, layout.layer_page[i], "bytes per block");
    return sum;
  }
  std::uint64_t most = 0;
  for (const Group& g : layout.groups) {
    std::uint64_t n = 0;
    for (std::uint32_t i : g.layers) n += on_stage[i] ? 1 : 0;
    most = std::max(most, n);
  }
  return layout.groups.empty() ? 0
                               : checked_mul(most, layout.groups.front().spec.page_bytes, "bytes per block");
}

std::vector<StageProjection> project_stages(const Layout& layout, std::uint32_t num_layers,
                                            std::uint32_t pp) {
  std::vector<StageProjection> stages(pp);
  for (std::uint32_t s = 0; s < pp; ++s) {
    stages[s].layers = pp_stage_layers(num_layers, pp, s);
    stages[s].block_bytes = bytes_per_block(layout, stages[s].layers);
  }
  return stages;
}

// ---------------------------------------------------------------- scheduler defaults

SchedulerLimits scheduler_limits(const Version& version, const EngineOptions& options,
                                 std::optional<std::uint64_t> total_bytes, const GpuSpec* gpu,
                                 std::uint64_t max_model_len, bool sliding_window) {
  // Scheduler defaults (overheads.md "Scheduler defaults"; arg_utils.py get_batch_defaults).
  const bool v0 = !version.at_least(0, 8);
  const double total_gib = total_bytes ? to_gib(*total_bytes) : 0.0;
  const std::string gpu_name = gpu ? ascii_lower(gpu->name + " " + gpu->id) : "";
  // GB10 (DGX Spark, SM 12.1) stays on the small tier whatever its 121.69 GiB: through 0.32
  // NvmlCudaPlatform.get_device_total_memory raises (NVML implements no memory query on it) and
  // get_batch_defaults' except path takes device_memory = 0; 0.33 falls back to torch's total but
  // adds is_gb10 to keep it small (platforms/cuda.py, engine/arg_utils.py, read in 0.32.0, 0.33.0
  // and 0.34.0).
  const bool gb10 = gpu != nullptr && gpu->arch == "sm_121";
  const bool big_gpu = total_gib >= 70.0 && gpu_name.find("a100") == std::string::npos && !gb10;
  // >= 160 GiB (B200/B300, MI300X/MI325X): 16384 / 1024 for both usage contexts
  // (arg_utils.py get_batch_defaults, read in 0.33; rules_for).
  const bool large_device = rules_for(version).large_device_tier && total_gib >= 160.0 && !gb10;
  SchedulerLimits out;
  // V0 (0.6-0.7) turns chunked prefill on by itself when max_model_len > 32768 on a CUDA
  // device, with no sliding window (and, from 0.7, not on ROCm), and chunked prefill then
  // defaults T to 2048 (engine/arg_utils.py create_engine_config and config.py
  // SchedulerConfig.__post_init__, read in 0.6.0, 0.6.4 and 0.7.2; docs/reference/overheads.md
  // "V0 long-context default"). Multimodal models are left out there too; ModelSpec does not
  // say whether a model is multimodal, so that exception is not applied.
  const bool rocm = gpu && gpu->vendor == "amd";
  const bool v0_long_context_chunked =
      v0 && max_model_len > 32768 && !sliding_window && !(rocm && version.at_least(0, 7));
  if (v0_long_context_chunked) {
    out.max_num_batched_tokens = 2048;
    out.max_num_seqs = 256;
    out.why = "V0 with max_model_len > 32768: chunked prefill on by default, 2048 tokens, 256 sequences";
  } else if (v0) {
    // V0 without chunked prefill: max(max_model_len, 2048) tokens, 256 sequences.
    out.max_num_batched_tokens = std::max<std::uint64_t>(max_model_len, 2048);
    out.max_num_seqs = 256;
    out.why = "V0 defaults: max(max_model_len, 2048) tokens, 256 sequences";
  } else if (large_device) {
    out.max_num_batched_tokens = 16384;
    out.max_num_seqs = 1024;
    out.why = ">= 160 GiB device (arg_utils.py get_batch_defaults, 0.28+)";
  } else {
    out.max_num_batched_tokens = options.vllm.api_server ? (big_gpu ? 8192 : 2048) : (big_gpu ? 16384 : 8192);
    out.max_num_seqs = big_gpu ? 1024 : 256;
    out.why = std::string(big_gpu ? ">= 70 GiB and not an A100"
                          : gb10  ? "GB10: NVML reports no memory (through 0.32) / is_gb10 (0.33+)"
                                  : "< 70 GiB or an A100") +
              ", " +
              (options.vllm.api_server ? "API server" : "offline LLM class") +
              " (arg_utils.py get_batch_defaults)";
  }
  if (options.vllm.max_num_batched_tokens) {
    if (*options.vllm.max_num_batched_tokens == 0)
      throw InputError("--max-num-batched-tokens", "is 0; allowed: >= 1");
    out.max_num_batched_tokens = *options.vllm.max_num_batched_tokens;
    out.why = "given";
  }
  if (options.vllm.max_num_seqs) {
    if (*options.vllm.max_num_seqs == 0) throw InputError("--max-num-seqs", "is 0; allowed: >= 1");
    out.max_num_seqs = *options.vllm.max_num_seqs;
  }
  // vllm/config/scheduler.py: T = min(S x max_model_len, T); S = min(S, T).
  out.max_num_batched_tokens =
      std::min(out.max_num_batched_tokens,
               checked_mul(out.max_num_seqs, max_model_len, "max_num_seqs x max_model_len"));
  out.max_num_seqs = std::min(out.max_num_seqs, out.max_num_batched_tokens);
  return out;
}

// ---------------------------------------------------------------- memory budget (worker)

namespace {

// vLLM 0.34's extensible KV cache (docs/reference/formulas.md "vLLM 0.34: the extensible KV
// cache"). determine_available_memory (v1/worker/gpu_worker.py) still profiles, but its
// requested - non-KV memory only sizes the address range reserved for the cache; the size is
// settled after warmup and CUDA-graph capture by measure_kv_cache_bytes
// (v1/worker/extensible_kv_cache.py, 0.34.0):
//   non_kv_used = init free - free after warmup - committed KV  (weights, non-torch, graphs)
//   headroom    = free after warmup + committed KV  (total - memory in use at start-up - non_kv_used)
//   transient   = reserved_headroom_bytes: the profiled activation peak plus the CUDA-graph
//                 estimate (peak_activation_memory, gpu_worker.py), or warmup's larger peak
//   margin      = max(KV_CACHE_MARGIN_FLOOR_BYTES: 1 GiB, 3 GiB on ROCm;
//                     KV_CACHE_MARGIN_FRACTION 0.75 x transient)
//   available   = min(requested - non_kv_used, headroom - margin) - transient
// then the minimum over ranks and over the reserved capacity (finalize_extensible_kv_cache,
// v1/core/kv_cache_planning.py). The memory in use at start-up (CUDA context, other processes)
// now counts: the old budget started from total x utilization, this one from free memory.
void extensible_budget(MemoryBudget& out, const EngineOptions& options, std::uint64_t total,
                       std::uint64_t weights, std::uint64_t act, std::uint64_t nt, std::uint64_t graphs,
                       std::uint64_t transfer, const GpuSpec* gpu) {
  // What the profile reserves: the same requested - non-KV memory as before 0.34.
  const auto signed_bytes = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  const std::uint64_t profiled = weights + act + nt + graphs + transfer;
  const std::int64_t reserved = signed_bytes(out.requested_bytes) - signed_bytes(profiled);
  out.reserved_gib_signed = static_cast<double>(reserved) / kGiB;
  out.reserved_bytes = reserved > 0 ? static_cast<std::uint64_t>(reserved) : 0;
  // The CUDA context at start-up: 0.3-0.7 GiB (overheads.md "The accounting, by version");
  // the middle of that range, as a stated assumption.
  const std::uint64_t startup_in_use = kGiBBytes / 2;
  const bool rocm = gpu != nullptr && gpu->vendor == "amd";
  const std::uint64_t margin_floor = (rocm ? 3 : 1) * kGiBBytes;
  // reserved_headroom_bytes = the profiled transient peak + the CUDA-graph estimate
  // (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1, envs.py 0.34.0), so the graph
  // pool is kept free once as memory in use and once as transient.
  const std::uint64_t transient = act + graphs;
  const std::uint64_t margin = std::max(margin_floor, transient / 4 * 3 + transient % 4 * 3 / 4);
  const std::uint64_t non_kv_used = weights + nt + graphs + transfer;
  const std::int64_t by_budget = signed_bytes(out.requested_bytes) - signed_bytes(non_kv_used);
  const std::int64_t by_device =
      signed_bytes(total) - signed_bytes(startup_in_use) - signed_bytes(non_kv_used) - signed_bytes(margin);
  const std::int64_t measured = std::min(std::min(by_budget, by_device) - signed_bytes(transient), reserved);
  out.available_gib_signed = static_cast<double>(measured) / kGiB;
  out.available_bytes = measured > 0 ? static_cast<std::uint64_t>(measured) : 0;
  out.assumptions.push_back(
      {"extensible KV cache",
       "on (vLLM 0.34 default on CUDA and ROCm)",
       "sized after warmup from measured free memory (v1/worker/extensible_kv_cache.py measure_kv_cache_bytes)"});
  out.assumptions.push_back({"memory in use at start-up", gib_text(startup_in_use),
                             "CUDA context (range 0.3-0.7 GiB): not free when vLLM 0.34 measures"});
  out.assumptions.push_back({"kept free for transients", gib_text(transient),
                             "activation peak + CUDA-graph estimate (reserved_headroom_bytes)"});
  out.assumptions.push_back({"sizing margin", gib_text(margin),
                             std::string("max(") + (rocm ? "3" : "1") +
                                 " GiB, 0.75 x transients) (KV_CACHE_MARGIN_FLOOR_BYTES, _FRACTION)"});
  if (!options.vllm.kv_connector.empty())
    out.notes.push_back("vLLM 0.34 turns the extensible KV cache off for connectors that share the cache "
                        "through legacy CUDA IPC or their own memory pool (config/vllm.py "
                        "_resolve_extensible_kv_cache); planned here with it on");
  if (out.available_bytes == 0)
    out.warnings.push_back("No available memory for the cache blocks: the extensible KV cache gets " +
                           fixed_text(out.available_gib_signed, 2) +
                           " GiB after weights, activations, CUDA graphs and the sizing margin");
}

}  // namespace

MemoryBudget memory_budget(const Version& version, const ModelSpec& model, const EngineOptions& options,
                           std::optional<std::uint64_t> total_bytes, std::uint64_t weights_per_rank,
                           const SchedulerLimits& limits, const GpuSpec* gpu) {
  MemoryBudget out;
  const VersionRules rules = rules_for(version);
  out.extensible = extensible_kv_cache(rules, options, gpu);
  // Unset, the utilization is 0.90 through 0.11.x, 0.92 later; from 0.34 1.0 with the
  // extensible KV cache (config/cache.py resolved_gpu_memory_utilization, 0.34.0).
  const double util = out.util =
      options.vllm.gpu_memory_utilization
          ? check_fraction(*options.vllm.gpu_memory_utilization, "--gpu-memory-utilization")
          : (out.extensible ? 1.0 : version.at_least(0, 12) ? 0.92 : 0.90);
  if (total_bytes)
    out.requested_bytes = static_cast<std::uint64_t>(std::ceil(static_cast<double>(*total_bytes) * util));
  if (options.vllm.kv_cache_memory_bytes) {
    // --kv-cache-memory-bytes skips the profiling arithmetic (gpu_worker.py).
    out.available_bytes = *options.vllm.kv_cache_memory_bytes;
    out.available_gib_signed = to_gib(out.available_bytes);
    out.assumptions.push_back(
        {"KV cache memory",
         gib_text(out.available_bytes) + " (" + std::to_string(out.available_bytes) + " B)",
         "--kv-cache-memory-bytes: gpu_memory_utilization and the profile are ignored"});
    if (!version.at_least(0, 11))
      out.notes.push_back("--kv-cache-memory-bytes appeared in vLLM 0.11; applied here as the KV budget");
    return out;
  }
  out.assumptions.push_back(
      {"gpu_memory_utilization", fixed_text(util, 2),
       options.vllm.gpu_memory_utilization ? "given"
       : out.extensible
           ? "vLLM 0.34 default with the extensible KV cache (config/cache.py resolved_gpu_memory_utilization)"
           : "vLLM default: 0.90 through 0.11.x, 0.92 later"});
  const std::uint64_t max_batched = limits.max_num_batched_tokens;
  const std::uint64_t max_seqs = limits.max_num_seqs;
  // Runtime overhead estimate (overheads.md "An estimate that fits published logs").
  const double T = static_cast<double>(max_batched);
  const double tp = static_cast<double>(options.tp);
  const double H = static_cast<double>(model.hidden_size);
  const double I = static_cast<double>(model.intermediate_size);
  double fwd = T * (3.0 * I / tp + 4.0 * H) * 2.0;  // dense MLP peak + hidden/residual, 2 B
  if (model.moe.is_moe()) {
    const double I_moe = static_cast<double>(model.moe.moe_intermediate_size);
    const double I_shared = model.moe.shared_expert_intermediate_size > 0
                                ? static_cast<double>(model.moe.shared_expert_intermediate_size)
                                : static_cast<double>(model.moe.num_shared_experts) * I_moe;
    const double topk = static_cast<double>(model.moe.experts_per_token);
    const double moe =
        T * (topk * (std::max(2.0 * I_moe / tp, H) + I_moe / tp) + 3.0 * I_shared / tp + 4.0 * H) * 2.0;
    const bool has_dense = model.moe.first_k_dense_layers > 0 || model.moe.moe_layer_frequency > 1;
    fwd = has_dense ? std::max(fwd, moe) : moe;
  }
  // The dummy sampler run (issue #28 item 1, vllm_overheads.hpp): its peak per logits
  // element and path from the release's code; the forward's activations are freed by then,
  // so the profile's peak is the larger of the two.
  const bool v2_runner = uses_v2_model_runner(version, model, options, gpu);
  const SamplerTerm sampler = sampler_term(version, v2_runner, gpu, max_seqs, max_batched, model.vocab_size);
  const double samp = static_cast<double>(sampler.predicted_bytes);
  std::uint64_t act = static_cast<std::uint64_t>(std::max(fwd, samp) + 0.15 * kGiB);
  std::string act_why = "max(forward " + fixed_text(fwd / kGiB, 2) + " GiB = T x (3I/TP + 4H) x 2 B" +
                        std::string(model.moe.is_moe() ? " (MoE form)" : "") + ", sampler " +
                        fixed_text(samp / kGiB, 2) + " GiB) + 0.15 GiB";
  {
    const auto with = [&](std::uint64_t s) {
      return fixed_text(to_gib(static_cast<std::uint64_t>(std::max(fwd, static_cast<double>(s)) + 0.15 * kGiB)), 2);
    };
    const std::string low = with(std::min(sampler.low_bytes, sampler.high_bytes));
    const std::string high = with(std::max(sampler.low_bytes, sampler.high_bytes));
    if (low != high) act_why += "; range " + low + "-" + high + " GiB with the sampler's other paths";
  }
  out.assumptions.push_back(
      {"dummy sampler (in the activation peak)", gib_text(sampler.predicted_bytes),
       std::to_string(sampler.rows) + " rows x " + std::to_string(model.vocab_size) + " x " +
           fixed_text(sampler.bytes_per_element, 0) + " B" +
           (sampler.triton_buffer_bytes != 0 ? " + " + gib_text(sampler.triton_buffer_bytes) + " Triton buffer" : "") +
           ", " + sampler.path + " (" + (v2_runner ? "V2" : "V1") + " model runner): " + sampler.why});
  if (options.overheads.activation_gib) {
    act = gib_to_bytes(*options.overheads.activation_gib, "--activation-gib");
    act_why = "given";
  }
  // Not in vLLM's code (docs/reference/vllm-profile-terms.md "Not read from the code"): what the
  // CUDA runtime, cuBLAS and NCCL take outside torch's allocator. Each range holds every published
  // log that prints the term; what picks its end is said with it.
  std::uint64_t nt = static_cast<std::uint64_t>((options.tp == 1 ? 0.1 : 0.25) * kGiB);
  std::string nt_why = options.tp == 1
                           ? "0.1 GiB at TP 1 (range 0.05-0.3: 0.24-0.26 GiB in 0.19 logs on H100, less on "
                             "consumer boards; the kernels and libraries the profile loads pick it)"
                           : "0.25 GiB at TP > 1 (range 0.2-2.2: 0.2-0.3 over PCIe; 2.07-2.13 GiB at TP 2-4 on "
                             "NVLink H100s in 0.19 logs, where NCCL's channels and the all-reduce buffers pick the top)";
  if (options.tp > 1 && rules.measured_overheads) {
    // issue #13: NCCL / non-torch memory over NVLink at TP 2-4 is about 0.55 GiB in 0.26+ logs.
    nt = static_cast<std::uint64_t>(0.55 * kGiB);
    nt_why = "0.55 GiB at TP > 1 (0.26+ logs, issue #13; range 0.25-2.2: 2.07-2.13 GiB at TP 2-4 on NVLink "
             "H100s in 0.19 logs; NCCL's channels and the all-reduce buffers over NVLink pick the top)";
  }
  if (options.tp > 1 && version.major == 0 && version.minor == 10) {
    nt = static_cast<std::uint64_t>(1.4 * kGiB);
    nt_why = "1.4 GiB: 0.10.x counts NCCL / custom all-reduce buffers inside the budget (range 1.0-1.7)";
  }
  if (options.overheads.non_torch_gib) {
    nt = gib_to_bytes(*options.overheads.non_torch_gib, "--non-torch-gib");
    nt_why = "given";
  }
  // CUDA graphs (issue #28 item 1, vllm_overheads.hpp): subtracted from 0.20 as vLLM's own
  // estimate, whose floor is costed here; the capture's real cost is measured at start-up.
  const GraphTerm graph = graph_term(version, v2_runner, options, gpu, max_seqs, max_batched, fwd / std::max(T, 1.0));
  std::uint64_t graphs = graph.predicted_bytes;
  std::string graph_why = graph.why;
  if (options.overheads.cuda_graph_gib) {
    graphs = gib_to_bytes(*options.overheads.cuda_graph_gib, "--cuda-graph-gib");
    graph_why = "given";
  }
  // A KV-transfer connector's own GPU buffers (LMCache, NIXL): not sized by vLLM, so a
  // stated reservation (issue #13: the LMCache run of #21348 logged fewer tokens than the
  // same memory holds without it).
  std::uint64_t transfer = 0;
  if (options.overheads.kv_transfer_gib) {
    transfer = gib_to_bytes(*options.overheads.kv_transfer_gib, "--kv-transfer-gib");
    out.assumptions.push_back({"KV-transfer connector", gib_text(transfer),
                               "given (--kv-transfer-gib" + (options.vllm.kv_connector.empty()
                                                                 ? std::string(")")
                                                                 : ", " + options.vllm.kv_connector + ")")});
  } else if (!options.vllm.kv_connector.empty()) {
    out.warnings.push_back(
        "--kv-transfer-config names " + options.vllm.kv_connector +
        ": its GPU buffers are not modelled and not subtracted; state them with --kv-transfer-gib");
  }
  out.assumptions.push_back({"activation peak", gib_text(act), act_why});
  out.assumptions.push_back({"non-torch memory", gib_text(nt), nt_why});
  out.assumptions.push_back({"CUDA graph memory", gib_text(graphs), graph_why});
  // The V2 runner's penalties state, allocated before the profile: non-KV memory from 0.27,
  // whose budget counts all memory the process consumed (vllm_overheads.hpp).
  const std::uint64_t penalties = sampler.penalties_state_bytes;
  if (penalties != 0)
    out.assumptions.push_back({"V2 penalties state", gib_text(penalties),
                               std::to_string(max_seqs) + " max_num_seqs x " + std::to_string(model.vocab_size) +
                                   " x 4.125 B (output_bin_counts int32 + prompt_bin_mask bits, "
                                   "v1/worker/gpu/sample/penalties.py)"});
  out.overhead_bytes = act + nt + graphs + transfer + penalties;
  const std::uint64_t used = checked_add(weights_per_rank, out.overhead_bytes, "non-KV memory");
  out.available_gib_signed = to_gib(out.requested_bytes) - to_gib(used);
  if (out.extensible) {
    extensible_budget(out, options, *total_bytes, weights_per_rank, act, nt, graphs, transfer + penalties, gpu);
    return out;
  }
  if (used >= out.requested_bytes) {
    out.available_bytes = 0;
    out.warnings.push_back("No available memory for the cache blocks: weights " + gib_text(weights_per_rank) +
                           " + overheads " + gib_text(out.overhead_bytes) + " >= requested " +
                           gib_text(out.requested_bytes) + ". Try increasing `gpu_memory_utilization`");
  } else {
    out.available_bytes = out.requested_bytes - used;
  }
  return out;
}

// ---------------------------------------------------------------- pages per request

std::uint64_t pages_per_request(const CacheSpec& s, std::uint64_t len, std::uint64_t max_batched,
                                bool align_mode) {
  switch (s.kind) {
    case SpecKind::full:
    case SpecKind::mla:
      return ceil_div(len, s.block_size);
    case SpecKind::sliding: {
      // SlidingWindowSpec: min(W - 1 + max_num_batched_tokens, max_model_len) tokens, + 1 block
      // because the window may start mid-block.
      const std::uint64_t tokens = std::min(checked_add(s.window - 1, max_batched, "sliding tokens"), len);
      return ceil_div(tokens, s.block_size) + 1;
    }
    case SpecKind::chunked: {
      // ChunkedLocalAttentionSpec: min(C + max_num_batched_tokens, max_model_len) tokens.
      const std::uint64_t tokens = std::min(checked_add(s.window, max_batched, "chunked tokens"), len);
      return ceil_div(tokens, s.block_size);
    }
    case SpecKind::mamba:
      // MambaSpec.max_memory_usage_bytes: one state page per request; prefix caching "align"
      // mode keeps 2 (formulas.md "Recurrent layers") plus a Mamba-2 layer's prefill-checkpoint
      // page (num_prefill_checkpoint_blocks, 0.33+); speculative decoding one more per
      // speculative token (num_speculative_blocks, v1/kv_cache_interface.py 0.33.0).
      return (align_mode ? 2 + s.checkpoint_blocks : 1) + s.speculative_blocks;
  }
  return 0;
}

std::uint64_t pages_for_request(const Layout& layout, std::uint64_t len, std::uint64_t max_batched,
                                bool align) {
  std::uint64_t pages = 0;
  for (const Group& g : layout.groups)
    pages = checked_add(pages, pages_per_request(g.spec, len, max_batched, align), "pages per request");
  return pages;
}

// ---------------------------------------------------------------- 4, 5. blocks

std::uint64_t blocks_for_memory(std::uint64_t available_bytes, std::uint64_t block_bytes) {
  return block_bytes == 0 ? 0 : available_bytes / block_bytes;
}

BlockPool min_blocks_over_workers(const std::vector<StageProjection>& stages, std::uint64_t available_bytes,
                                  std::uint32_t tp) {
  // num_blocks per stage, then the minimum over ranks (get_kv_cache_configs).
  BlockPool pool;
  bool first = true;
  for (std::uint32_t s = 0; s < stages.size(); ++s) {
    if (stages[s].block_bytes == 0) continue;
    const std::uint64_t n = blocks_for_memory(available_bytes, stages[s].block_bytes);
    if (first || n < pool.num_blocks) {
      pool.num_blocks = n;
      pool.page_bytes = stages[s].block_bytes;
      pool.limiting_rank = s * tp;
      first = false;
    }
  }
  return pool;
}

// ---------------------------------------------------------------- 6. memory check

bool enough_kv_memory(const Layout& layout, const std::vector<StageProjection>& stages,
                      std::uint64_t available_bytes, std::uint64_t len, std::uint64_t max_batched,
                      bool align_mode, bool reserve_null) {
  for (const StageProjection& st : stages) {
    if (st.block_bytes == 0) continue;
    const std::uint64_t need = checked_mul(pages_for_request(layout, len, max_batched, align_mode),
                                           st.block_bytes, "kv bytes needed");
    std::uint64_t room = available_bytes;
    if (reserve_null) {
      const std::uint64_t blocks = available_bytes / st.block_bytes;
      room = (blocks > 0 ? blocks - 1 : 0) * st.block_bytes;
    }
    if (need > room) return false;
  }
  return true;
}

// ---------------------------------------------------------------- 7. max-length search

std::uint64_t estimate_max_model_len(const std::function<bool(std::uint64_t)>& fits, std::uint64_t upper) {
  // Binary search of _estimate_max_model_len over [1, upper].
  if (upper == 0 || !fits(1)) return 0;
  std::uint64_t lo = 1, hi = upper, largest = 1;
  while (lo <= hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      largest = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return largest;
}

// ---------------------------------------------------------------- 8. report

// The log lines with figures, as vLLM prints them (report_figures below prints them and
// VllmLogReader reads them back, log_line.hpp); some are read only (kvsight has no figure for them):
//   V1 v1/worker/gpu_worker.py        "Available KV cache memory: X GiB"; "reserved X GiB memory for
//                                     KV Cache" (kv_cache_memory_bytes)
//      v1/core/kv_cache_utils.py      "GPU KV cache size: N tokens" (0.28+: on the line of the
//                                     concurrency), "Maximum concurrency for N tokens per request:
//                                     X.XXx", "# GPU blocks: N" (V1 before PR #13596); "To serve at
//                                     least one request with the models's max seq len (L), (X GiB KV
//                                     cache is needed, which is larger than the available KV cache
//                                     memory (Y GiB). ... the estimated maximum model length is N"
//                                     (check_enough_kv_cache_memory)
//      v1/worker/gpu_model_runner.py  "Loading model weights took X GB" / "Model loading took X GiB",
//                                     "Graph capturing finished in N secs, took X GiB" (read only)
//      entrypoints/utils.py           "non-default args: {'max_model_len': N, 'gpu_memory_utilization':
//                                     X, 'tensor_parallel_size': N, ...}" (the flags given, as a Python
//                                     dict; 0.10+; read only)
//      entrypoints/openai/api_server.py "vLLM API server version X"; the start-up banner (utils.py,
//                                     0.11+) "version X" (read only)
//   V0 worker/worker.py               "Memory profiling results: total_gpu_memory=XGiB ...
//                                     kv_cache_size=XGiB gpu_memory_utilization=X"
//      executor                       "# GPU blocks: N, # CPU blocks: M"; "maximum number of tokens
//                                     that can be stored in KV cache (N)"
class VllmLogReader final : public EngineLogReader {
 public:
  LogLineRead read(std::string_view line, EngineLogFigures& figures) override;
  bool starts_line(std::string_view line) const override;
};

namespace {

const LogLine kAvailableLine{"Available KV cache memory: {-X:gib} GiB"};
const LogLine kReservedLine{
    "{*Initial free memory ... GiB, }reserved {-X:gib} GiB memory for KV Cache{* as specified by "
    "kv_cache_memory_bytes config and skipped memory profiling.}"};
const LogLine kV0ProfileLine{
    "{*Memory profiling results: }total_gpu_memory={X:total_gib}GiB{* ... }kv_cache_size={-X:kv_gib}GiB"
    "{* }gpu_memory_utilization={X:utilization}"};
const LogLine kKvTokensLine{"GPU KV cache size: {N,:tokens} tokens"};
// 0.34+, extensible KV cache (v1/worker/extensible_kv_cache.py extend_kv_cache and
// measure_kv_cache_blocks): the size measured after warmup, which "Available KV cache
// memory" (the reservation) no longer gives.
const LogLine kExtendedLine{"Extended KV cache to {N:blocks} blocks ({X:gib} GiB)."};
// Starts with the literal text before the count: a template that starts with a number would
// scan a line of digits once per start (tests/test_engine_log.cpp EngineLogHostile).
const LogLine kMeasuredLine{
    "reservation growth); {N:blocks} KV cache blocks ({X:gib} GiB) fit within the requested"};
const LogLine kConcurrencyLine{
    "Maximum concurrency for {N,:max_model_len} tokens per request: {X:concurrency}x"};
const LogLine kGpuBlocksLine{"# GPU blocks: {N:blocks}[, # CPU blocks: {N}]"};
const LogLine kWeightsLine{"Loading model weights took {X:gib} G", "Model loading took {X:gib} G"};
const LogLine kGraphsLine{"Graph capturing finished in {X} sec[s], took {-X:gib} GiB"};
// The profile's terms (gpu_worker.py, 0.10-0.26): the DEBUG line of memory_profiling's result
// and the start-up suggestion (compile_or_warm_up_model, INFO 0.10.2 and 0.26, DEBUG between);
// 0.27+ prints "for consumed memory (weights + non-torch)" instead, not read. The suggestion
// also gives the budget: "Free memory on device (F/T GiB) on startup. Desired GPU memory
// utilization is (U, R GiB)".
const LogLine kProfileTermsLine{
    "torch peak memory increase: {X:act}GiB; non-torch forward increase memory: {X:nt}GiB"};
const LogLine kUsageTermsLine{"Actual usage is {X} GiB for weight, {X:act} GiB for peak activation, {X:nt} GiB "
                              "for non-torch memory"};
const LogLine kDesiredLine{
    "Free memory on device ({X}/{X:total} GiB) on startup. Desired GPU memory utilization is ({X:util}, "};
// CUDA-graph estimate (gpu_model_runner.py 0.18+, V1) and the pool after capture (gpu_worker.py).
const LogLine kGraphEstimateLine{"Estimated CUDA graph memory: {X:gib} GiB total"};
const LogLine kGraphPoolLine{"CUDA graph pool memory: {X:actual} GiB (actual), {X:estimated} GiB (estimated)"};
const LogLine kNotEnoughLine{
    "{*ValueError: To serve at least one request with the model's }max seq len ({N:max_model_len}), "
    "({X:needed_gib} GiB KV cache is needed{*, which is larger than the }available KV cache memory "
    "({-X:available_gib} GiB){*. }"};
const LogLine kEstimatedLine{
    "{*Based on the available memory, the }estimated maximum model length is {N:length}{*. }"};
const LogLine kV0MaxTokensLine{
    "[The model's max seq len ({N}) is larger than the ]maximum number of tokens that can be stored in KV "
    "cache ({N:tokens}){*. }"};
const LogLine kVersionLine{"vLLM API server version [v]{V:version}",
                           "utils.py:{N}\\] { }{W}version [v]{V:version}"};
const LogLine kNonDefaultArgsLine{"non-default args: \\{{T:args}\\}"};
const LogLine kMaxModelLenArg{"'max_model_len': {N:value}"};
const LogLine kUtilizationArg{"'gpu_memory_utilization': {X:value}"};
const LogLine kTensorParallelArg{"'tensor_parallel_size': {N:value}"};
// How both of the refusals end.
constexpr const char* kTryIncreasing =
    "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.";

// 0.34, extensible KV cache: the refusal after warmup ends with _more_kv_cache_memory_hint
// (after_warmup=True) and the advice on max_model_len (v1/core/kv_cache_planning.py L64-97,
// L99-132, 0.34.0).
std::string extensible_hint(double util) {
  const std::string used_by = "the model, its activations, CUDA graphs and warmup";
  // Python's str(float): 0.8, not 0.80.
  std::string util_text = fixed_text(util, 6);
  while (util_text.size() > 1 && util_text.back() == '0') util_text.pop_back();
  if (util_text.back() == '.') util_text += '0';
  const std::string graphs =
      " CUDA graphs take less with fewer or smaller capture sizes in the compilation config.";
  const std::string hint =
      util < 1.0 ? "The KV cache gets what is left after " + used_by + " within `gpu_memory_utilization`=" +
                       util_text +
                       "; increase it (with the extensible KV cache it defaults to 1.0) or decrease "
                       "`max_model_len` or `max_num_seqs`." + graphs
                 : "The extensible KV cache already takes all device memory left after " + used_by +
                       "; decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more "
                       "memory." + graphs;
  return hint +
         " Decreasing `max_model_len` also reduces what is needed. See "
         "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.";
}

}  // namespace

LogLineRead VllmLogReader::read(std::string_view line, EngineLogFigures& f) {
  bool read = false;
  read |= kAvailableLine.read(line, [&](const LogMatch& m) { f.available_kv_gib = m.number("gib"); });
  read |= kReservedLine.read(line, [&](const LogMatch& m) { f.available_kv_gib = m.number("gib"); });
  read |= kV0ProfileLine.read(line, [&](const LogMatch& m) {
    f.total_gpu_gib = m.number("total_gib");
    f.available_kv_gib = m.number("kv_gib");
    f.gpu_memory_utilization = m.number("utilization");
  });
  read |= kKvTokensLine.read(line, [&](const LogMatch& m) { f.kv_tokens = m.count("tokens"); });
  // Printed after "Available KV cache memory", so the measured size replaces the reservation.
  const auto measured = [&](const LogMatch& m) {
    f.num_gpu_blocks = m.count("blocks");
    f.available_kv_gib = m.number("gib");
  };
  read |= kMeasuredLine.read(line, measured);
  read |= kExtendedLine.read(line, measured);
  read |= kConcurrencyLine.read(line, [&](const LogMatch& m) {
    f.max_model_len = m.count("max_model_len");
    f.max_concurrency = m.number("concurrency");
  });
  read |= kGpuBlocksLine.read(line, [&](const LogMatch& m) { f.num_gpu_blocks = m.count("blocks"); });
  read |= kWeightsLine.read(line, [&](const LogMatch& m) { f.weights_gib = m.number("gib"); });
  read |= kGraphsLine.read(line, [&](const LogMatch& m) { f.cuda_graph_gib = m.number("gib"); });
  const auto terms = [&](const LogMatch& m) {
    f.activation_gib = m.number("act");
    f.non_torch_gib = m.number("nt");
  };
  read |= kProfileTermsLine.read(line, terms);
  read |= kUsageTermsLine.read(line, terms);
  read |= kDesiredLine.read(line, [&](const LogMatch& m) {
    f.total_gpu_gib = m.number("total");
    f.gpu_memory_utilization = m.number("util");
  });
  read |= kGraphEstimateLine.read(line, [&](const LogMatch& m) { f.cuda_graph_estimate_gib = m.number("gib"); });
  read |= kGraphPoolLine.read(line, [&](const LogMatch& m) {
    f.cuda_graph_gib = m.number("actual");
    f.cuda_graph_estimate_gib = m.number("estimated");
  });
  read |= kNotEnoughLine.read(line, [&](const LogMatch& m) {
    f.max_model_len = m.count("max_model_len");
    f.kv_needed_gib = m.number("needed_gib");
    f.available_kv_gib = m.number("available_gib");
  });
  read |=
      kEstimatedLine.read(line, [&](const LogMatch& m) { f.estimated_max_model_len = m.count("length"); });
  read |= kV0MaxTokensLine.read(line, [&](const LogMatch& m) { f.kv_tokens = m.count("tokens"); });
  read |= kVersionLine.read(line, [&](const LogMatch& m) { f.engine_version = m.text("version"); });
  read |= kNonDefaultArgsLine.read(line, [&](const LogMatch& m) {
    const std::string args = m.text("args");
    kMaxModelLenArg.read(args, [&](const LogMatch& a) { f.max_model_len = a.count("value"); });
    kUtilizationArg.read(args, [&](const LogMatch& a) { f.gpu_memory_utilization = a.number("value"); });
    // Kept as logged: explain checks it as the --tp flag (a refusal names the line).
    kTensorParallelArg.read(args, [&](const LogMatch& a) { f.tensor_parallel_size = a.count("value"); });
  });
  return read ? LogLineRead::figures : LogLineRead::other;
}

bool VllmLogReader::starts_line(std::string_view line) const { return kGpuBlocksLine.starts(line); }

ReportFigures report_figures(const ReportInputs& in) {
  const Version& version = *in.version;
  const Layout& layout = *in.layout;
  const BlockPool& pool = *in.pool;
  const bool v0 = !version.at_least(0, 8);
  ReportFigures out;
  std::uint32_t min_block = in.block_size;
  for (const Group& g : layout.groups)
    if (g.spec.block_size > 0)
      min_block = std::min<std::uint32_t>(min_block, static_cast<std::uint32_t>(g.spec.block_size));

  if (v0) {
    // V0 executor: concurrency = num_gpu_blocks x block_size / max_model_len.
    out.max_concurrency =
        static_cast<double>(pool.num_blocks) * in.block_size / static_cast<double>(in.max_model_len);
    out.kv_tokens = pool.num_blocks * in.block_size;
  } else {
    out.max_concurrency =
        in.req_pages > 0 ? static_cast<double>(pool.num_blocks) / static_cast<double>(in.req_pages) : 0.0;
    if (version.at_least(0, 20)) {
      // PR #40694 (after issue #40691 on 0.19.0): tokens = max_concurrency x max_model_len.
      out.kv_tokens = static_cast<std::uint64_t>(out.max_concurrency * static_cast<double>(in.max_model_len));
    } else if (layout.groups.size() <= 1) {
      // A Mamba-only model's block holds a whole request: MambaSpec.block_size = max_model_len.
      const std::uint64_t tokens_per_block = layout.groups.empty() ? in.block_size
                                             : layout.groups.front().spec.kind == SpecKind::mamba
                                                 ? in.max_model_len
                                                 : layout.groups.front().spec.block_size;
      out.kv_tokens = checked_mul(pool.num_blocks, tokens_per_block, "kv tokens");
    } else {
      // num_blocks // len(kv_cache_groups) x min block size (0.9 - 0.19).
      out.kv_tokens = pool.num_blocks / layout.groups.size() * min_block;
    }
  }

  // The engine's own log lines.
  std::vector<std::string>& log = out.engine_log;
  if (v0) {
    log.push_back(kV0ProfileLine.print(
        {fixed_text(in.total_gib, 2), fixed_text(to_gib(in.available_bytes), 2), fixed_text(in.util, 2)}));
    // CPU blocks: swap_space 4 GiB // cache block bytes (V0 CacheEngine.get_cache_block_size).
    const std::uint64_t cpu_blocks = pool.page_bytes > 0 ? (4 * kGiBBytes) / pool.page_bytes : 0;
    log.push_back(kGpuBlocksLine.print({std::to_string(pool.num_blocks), std::to_string(cpu_blocks)}));
    log.push_back(
        kConcurrencyLine.print({std::to_string(in.max_model_len), fixed_text(out.max_concurrency, 2)}));
    if (!in.fits)
      log.push_back(
          kV0MaxTokensLine.print({std::to_string(in.max_model_len), std::to_string(out.kv_tokens)}) +
          kTryIncreasing);
    return out;
  }
  if (in.kv_cache_memory_given)
    log.push_back(kReservedLine.print({fixed_text(to_gib(in.available_bytes), 2)}));
  else
    // gpu_worker.py logs the signed difference: negative when the model does not fit. With
    // the extensible KV cache (0.34) that is the reserved address range, not the final size.
    log.push_back(
        kAvailableLine.print({fixed_text(in.extensible ? in.reserved_gib_signed : in.available_gib_signed, 2)}));
  if (in.extensible && pool.num_blocks > 0)
    // extend_kv_cache (v1/worker/extensible_kv_cache.py, 0.34.0) once the size is measured.
    log.push_back(kExtendedLine.print(
        {std::to_string(pool.num_blocks),
         fixed_text(to_gib(checked_mul(pool.num_blocks, pool.page_bytes, "kv cache bytes")), 2)}));
  if (in.fits) {
    log.push_back(kKvTokensLine.print({commas_text(out.kv_tokens)}));
    log.push_back(
        kConcurrencyLine.print({commas_text(in.max_model_len), fixed_text(out.max_concurrency, 2)}));
  } else {
    const std::uint64_t need = checked_mul(in.req_pages, pool.page_bytes, "kv bytes needed");
    log.push_back(kNotEnoughLine.print({std::to_string(in.max_model_len), fixed_text(to_gib(need), 2),
                                        fixed_text(to_gib(in.available_bytes), 2)}) +
                  (in.largest > 0 ? kEstimatedLine.print({std::to_string(in.largest)}) : std::string()) +
                  (in.extensible ? extensible_hint(in.util) : std::string(kTryIncreasing)));
  }
  return out;
}

}  // namespace vllm

namespace {

using namespace engine_detail;
using namespace vllm;

// vLLM 0.10.1 - 0.11.x, vllm/model_executor/layers/quantization/mxfp4.py (0.10.1:
// Mxfp4MoEMethod._should_use_marlin; 0.11.0: get_mxfp4_backend; both read in the wheels): on CUDA
// the mxfp4 MoE experts go to the Marlin kernel below SM 9.0, and on every other device but SM 10.0
// (FlashInfer there) when the triton_kernels package is absent, as in the plain pip wheel (the
// "Weight-only FP4 compression will be used leveraging the Marlin kernel" line of issue #23278 on
// an H100). Marlin needs n % 256 == 0 and k % 128 == 0, so create_weights allocates every expert
// at round_up(intermediate_size_per_partition, 128) x round_up(hidden_size, 256). For gpt-oss
// (H = I = 2880) that is 3072 x 2944, +9.0 % on the expert bytes: +5.13 GiB on gpt-oss-120b, the
// difference between the checkpoint's 60.69 GiB and the 65.97 GiB issue #23278 logs
// (docs/reference/vllm-overheads-recent.md). Returns the extra bytes on one rank, 0 when the
// rule does not apply.
//
// 0.12 - 0.32 on devices below SM 9.0: Marlin as well. 0.12-0.18 (quantization/mxfp4.py
// get_mxfp4_backend, read in 0.15.0 and 0.18.0) try FlashInfer on SM90 / SM100 and triton_kernels on
// SM 9.0-10.x, then Marlin; from 0.19 (fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend, read in
// 0.19.0) every backend ahead of Marlin in _get_priority_backends needs SM 9.0+ or ROCm, and
// mxfp4_round_up_hidden_size_and_intermediate_size pads Marlin's the same (hidden 256, intermediate
// 128; the same function in 0.20-0.34). On SM 9.0+ these releases pick triton_kernels (vendored from
// 0.19) or FlashInfer, whose layouts were not read. 0.33 adds CUTLASS_MXFP4_MXFP4 ahead of Marlin,
// whose device gate was not read: the rule stops at 0.32.
std::uint64_t mxfp4_marlin_padding_bytes(const Version& version, const ModelSpec& model, const GpuSpec* gpu,
                                         const EngineOptions& options) {
  if (!version.at_least(0, 10, 1) || version.at_least(0, 33)) return 0;
  if (model.quantization.method != "mxfp4" || !model.moe.is_moe() || model.exact_weights) return 0;
  if (options.overheads.weights_gib || gpu == nullptr) return 0;
  // ROCm (gfx...) and unknown arches (compute capability 0) keep the checkpoint's size.
  const unsigned sm = compute_capability(*gpu);
  if (sm == 0 || sm == 100) return 0;
  if (version.at_least(0, 12) && sm >= 90) return 0;
  const std::uint64_t tp = options.tp, pp = options.pp;
  const std::uint64_t hidden = model.hidden_size;
  const std::uint64_t inter = model.moe.moe_intermediate_size / tp;
  const auto round_up = [](std::uint64_t x, std::uint64_t m) { return (x + m - 1) / m * m; };
  const std::uint64_t padded = checked_mul(round_up(hidden, 256), round_up(inter, 128), "mxfp4 padding");
  const std::uint64_t plain = checked_mul(hidden, inter, "mxfp4 padding");
  if (padded <= plain) return 0;
  std::uint64_t moe_layers = 0;
  for (std::uint32_t i = 0; i < model.num_layers(); ++i) {
    const std::uint32_t freq = std::max<std::uint32_t>(1, model.moe.moe_layer_frequency);
    if (i >= model.moe.first_k_dense_layers && (freq == 1 || (i + 1) % freq == 0)) ++moe_layers;
  }
  moe_layers = (moe_layers + pp - 1) / pp;
  // gate_up (2 I x H) and down (H x I): 3 matrices of H x I per expert.
  const std::uint64_t extra_params = checked_mul(
      checked_mul(checked_mul(moe_layers, model.moe.num_experts, "mxfp4 padding"), 3, "mxfp4 padding"),
      padded - plain, "mxfp4 padding");
  const double bits = model.quantization.bits_per_weight > 0 ? model.quantization.bits_per_weight : 4.25;
  return static_cast<std::uint64_t>(std::llround(static_cast<double>(extra_params) * bits / 8.0));
}

class VllmEngine final : public Engine {
 public:
  std::string name() const override { return "vllm"; }
  std::vector<std::string> known_versions() const override { return vllm_versions(); }
  PlanResult budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                    const EngineOptions& options) const override;

  std::string display_name() const override { return "vLLM"; }
  std::string default_version() const override { return vllm_default_version(); }
  bool has_gate_rules() const override { return true; }
  // vllm/engine/arg_utils.py EngineArgs.add_cli_args (-tp/-pp short forms since 0.6).
  // Its server command and what kvsight does with each flag (vllm_launch.cpp, issue #22).
  const Launcher* launcher() const override { return &engine_detail::vllm_launcher(); }
  std::vector<EngineFlag> flags() const override {
    return {{OptionField::tensor_parallel_size, {"--tensor-parallel-size", "-tp"}},
            {OptionField::pipeline_parallel_size, {"--pipeline-parallel-size", "-pp"}},
            {OptionField::kv_cache_dtype, {"--kv-cache-dtype"}},
            {OptionField::block_size, {"--block-size"}},
            {OptionField::max_model_len, {"--max-model-len"}},
            {OptionField::gpu_memory_utilization, {"--gpu-memory-utilization"}},
            {OptionField::max_num_batched_tokens, {"--max-num-batched-tokens"}},
            {OptionField::max_num_seqs, {"--max-num-seqs"}},
            {OptionField::kv_cache_memory_bytes, {"--kv-cache-memory-bytes"}},
            {OptionField::enforce_eager, {"--enforce-eager"}},
            {OptionField::enable_prefix_caching, {"--enable-prefix-caching"}},
            // engine/arg_utils.py (0.33.0): bool fields get argparse.BooleanOptionalAction,
            // so vLLM itself takes --no-enable-prefix-caching and --[no-]async-scheduling.
            {OptionField::disable_prefix_caching, {"--no-enable-prefix-caching"}},
            {OptionField::async_scheduling, {"--async-scheduling"}},
            {OptionField::no_async_scheduling, {"--no-async-scheduling"}},
            {OptionField::offline, {"--offline"}},
            {OptionField::speculative_config, {"--speculative-config"}},
            {OptionField::kv_transfer_config, {"--kv-transfer-config"}},
            {OptionField::gdn_prefill_backend, {"--gdn-prefill-backend"}}};
  }
  // vllm/config/cache.py CacheDType, plus the per-token-head and NVFP4 caches the dtype
  // table models (formulas.md "KV dtypes").
  std::vector<std::string> kv_cache_dtypes() const override {
    return {"auto",
            "bfloat16",
            "float16",
            "bf16",
            "fp16",
            "fp8",
            "fp8_e4m3",
            "fp8_e5m2",
            "fp8_inc",
            "fp8_ds_mla",
            "fp8_per_token_head",
            "int8_per_token_head",
            "int4_per_token_head",
            "nvfp4"};
  }
  BlockSizeChoice block_size(const ModelSpec& model, const GpuSpec* gpu, const EngineOptions& options) const override;
  LengthChoice max_model_len(const ModelSpec& model, const EngineOptions& options) const override;
  // vllm/v1/attention/ops/chunked_prefill_paged_decode.py has_native_kv_cache_layout: a
  // hybrid attention + recurrent model's KV is stride-padded to the state page.
  bool padded_kv_layout(const ModelSpec& model) const override { return model.is_hybrid(); }
  // vLLM refuses to start when less than requested = total x gpu_memory_utilization is free
  // (worker/utils.py request_memory; formulas.md step 1).
  // 0.34: not with the extensible KV cache, its default ("With the extensible KV cache the budget
  // is only a cap; exceeding free memory over-reserves address space rather than pages",
  // worker/utils.py request_memory, 0.34.0).
  bool needs_free_memory_for_budget(const EngineOptions& options, const GpuSpec* gpu) const override {
    return !extensible_kv_cache(rules_for(version(options)), options, gpu);
  }
  std::unique_ptr<EngineLogReader> log_reader() const override { return std::make_unique<VllmLogReader>(); }
  void order_kernels(const GateInput& input, std::vector<KernelVerdict>& verdicts) const override;
  std::vector<std::string> gate_notes(const GpuSpec& gpu, const EngineOptions& options) const override;
  // The backend switch (docs/reference/preflight.md "Fixes"): PR #26315 turned the environment
  // variable VLLM_ATTENTION_BACKEND into --attention-backend (--attention-config.backend),
  // keeping the variable with a deprecation warning until 0.14; from 0.14 on the variable is
  // ignored (issue #50292 on 0.26). The flag from 0.13, the variable before.
  std::string attention_backend_option(const EngineVersion& version, const std::string& backend) const override {
    return version.at_least(0, 13) ? "--attention-backend " + backend
                                   : "VLLM_ATTENTION_BACKEND=" + backend + " (environment)";
  }
  std::vector<StartupCheck> startup_checks(const ModelSpec& model, const GpuSpec*,
                                           const EngineOptions& options) const override {
    std::vector<StartupCheck> checks{tp_divides_heads_check(model, options, display_name())};
    if (auto kv = kv_heads_split_check(model, options)) checks.push_back(*kv);
    // vllm/config/model.py _get_and_verify_max_len: a max_model_len above the model's
    // derived maximum is refused unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
    const std::uint64_t limit = derived_max_model_len(model);
    if (options.max_model_len && *options.max_model_len > 0 && limit > 0) {
      const auto asked = static_cast<std::uint64_t>(*options.max_model_len);
      const bool ok = asked <= limit;
      checks.push_back({"max_model_len within the model's maximum", ok,
                        "max_model_len " + std::to_string(asked) + (ok ? " <= " : " > ") +
                            std::to_string(limit) +
                            (ok ? "" : " (set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to override)"),
                        "vllm/config/model.py _get_and_verify_max_len"});
    }
    return checks;
  }
};

BlockSizeChoice VllmEngine::block_size(const ModelSpec& target, const GpuSpec* gpu, const EngineOptions& options) const {
  // vllm/config/cache.py: BlockSize = Literal[1, 8, 16, 32, 64, 128, 256] for --block-size.
  if (options.block_size) {
    const std::uint32_t b = *options.block_size;
    if (!(b == 1 || b == 8 || b == 16 || b == 32 || b == 64 || b == 128 || b == 256))
      throw InputError("block_size",
                       "is " + std::to_string(b) +
                           "; allowed: 1, 8, 16, 32, 64, 128, 256 (vllm/config/cache.py BlockSize)");
  }
  // The drafter's attention layers (--speculative-config) share the KV cache, so the block
  // is chosen over the target with them (vllm_speculative.cpp).
  DraftPlan draft;
  const ModelSpec model = with_draft_layers(target, options, draft);
  const BlockFigures figures = block_figures(model, options, gpu);
  const std::uint32_t tokens = figures.tokens;
  std::string derivation;
  if (figures.state_page_bytes > 0)
    derivation = "hybrid model: recurrent state page " + std::to_string(figures.state_page_bytes) +
                 " B per layer per rank; attention " + std::to_string(figures.attention_token_bytes) +
                 " B per token per layer -> block size " + std::to_string(tokens) + " (page " +
                 std::to_string(std::uint64_t{tokens} * figures.attention_token_bytes) +
                 " B; the state page is padded to it)";
  const VersionRules rules = rules_for(version(options));
  if (gdn_prefill_checkpoints(model, options, rules, gpu))
    derivation += "; FlashInfer's GDN prefill on " + gpu->arch +
                  " exports prefill checkpoints: the block is a multiple of 64 and each GDN layer keeps a "
                  "third state page (qwen_gdn_linear_attn.py, platforms/interface.py _align_hybrid_block_size)";
  else if (gpu == nullptr && gdn_checkpoints_if_flashinfer(model, options, rules) &&
           options.vllm.gdn_prefill_backend.empty())
    derivation += "; no --gpu: the Triton GDN prefill assumed; on SM 9.0 and Blackwell FlashInfer's prefill "
                  "raises the block to a multiple of 64 and keeps a third state page";
  if (options.block_size && tokens == *options.block_size) return {tokens, "--block-size", true, derivation};
  if (has_recurrent(model) && model.attention_layer_count() > 0)
    return {tokens,
            "raised by vLLM so an attention page matches the recurrent-state page (formulas.md step 3)", true,
            derivation};
  if (is_mla_model(model) && rules_for(version(options)).block_64_default)
    return {tokens,
            "MLA, 0.34: the default 64 suits FLASH_ATTN_MLA (multiples of 16) and FlashMLA (64) "
            "(config/cache.py, platforms/cuda.py, mla/flashattn_mla.py, mla/flashmla.py)"};
  if (is_mla_model(model))
    return {tokens, rules_for(version(options)).mla_flash_attn
                        ? "MLA, 0.33 on Hopper: FLASH_ATTN_MLA takes multiples of 16 (default 16), "
                          "FlashMLA 64 with an fp8 cache (platforms/cuda.py, mla/flashattn_mla.py)"
                        : "MLA: FlashMLA (CUDA default on Hopper) forces 64; CUTLASS MLA (Blackwell) "
                          "forces 128 (vllm/platforms/cuda.py)"};
  return {tokens, rules_for(version(options)).block_64_default
                      ? "64, vLLM's default from 0.34 (config/cache.py DEFAULT_BLOCK_SIZE; FLASH_ATTN keeps it)"
                      : "16, vLLM's CUDA default (cache.py)"};
}

// max_model_len: --max-model-len, else the derived length (config.py _get_and_verify_max_len);
// -1 searches the largest that fits, up to the derived length (_auto_fit_max_model_len).
LengthChoice VllmEngine::max_model_len(const ModelSpec& model, const EngineOptions& options) const {
  LengthChoice c;
  c.derived = derived_max_model_len(model);
  c.tokens = c.derived;
  c.source = "the model's maximum (config.py _get_and_verify_max_len)";
  if (options.max_model_len) {
    if (*options.max_model_len == -1) {
      c.search = true;
      c.source = "--max-model-len -1: the largest that fits, searched up to the model's maximum";
    } else if (*options.max_model_len <= 0) {
      throw InputError("--max-model-len", "is " + std::to_string(*options.max_model_len) +
                                              "; allowed: a positive length, or -1 to fit the memory");
    } else {
      c.tokens = static_cast<std::uint64_t>(*options.max_model_len);
      c.source = "--max-model-len";
    }
  }
  if (c.tokens == 0)
    throw InputError("--max-model-len", "the model config gives no max_position_embeddings; pass a length");
  return c;
}

void VllmEngine::order_kernels(const GateInput& input, std::vector<KernelVerdict>& out) const {
  // vllm/platforms/cuda.py _get_backend_priorities: on Blackwell (compute capability
  // 10.x) FLASHINFER comes before FLASH_ATTN.
  if (input.family != "cuda" || input.compute_capability < 100 || input.compute_capability >= 110) return;
  auto flashinfer =
      std::find_if(out.begin(), out.end(), [](const KernelVerdict& v) { return v.kernel == "flashinfer"; });
  auto flash =
      std::find_if(out.begin(), out.end(), [](const KernelVerdict& v) { return v.kernel == "flash_attn"; });
  if (flashinfer != out.end() && flash != out.end() && flash < flashinfer)
    std::rotate(flash, flashinfer, flashinfer + 1);
}

std::vector<std::string> VllmEngine::gate_notes(const GpuSpec& gpu, const EngineOptions&) const {
  std::vector<std::string> notes;
  if (gpu.family.rfind("gfx", 0) == 0) {
    // vllm/v1/attention/backends/rocm_attn.py in 0.28 .. 0.33.0 (read in the 0.33.0 wheel, issue #13)
    // still decodes through chunked_prefill_paged_decode: a refused custom kernel means the
    // non-split Triton 2D kernel; ROCM_ATTN refuses attention sinks (supports_sink False) and
    // head sizes above 256 (get_supported_head_sizes).
    notes.push_back(
        "vLLM 0.28-0.33 ROCM_ATTN decode: paged_attention_rocm when admitted, else Triton "
        "kernel_paged_attention_2d (no context split); models with attention sinks (gpt-oss) get "
        "TRITON_ATTN; ROCM_ATTN head sizes stop at 256 (rocm_attn.py, 0.33.0)");
  }
  if (gpu.family == "gfx11" || gpu.family == "gfx12") {
    notes.push_back(
        "RDNA GQA 3..16 is a speed heuristic from May 2025, not a capability limit (#50603: custom kernel "
        "2-6x faster than the fallback at GQA 1-2)");
  }
  return notes;
}

// The length notes of a plan: a length over the model's maximum, a derived length that
// includes rope scaling.
void describe_length(const ModelSpec& model, const LengthChoice& length, PlanResult& result) {
  if (length.tokens > length.derived && length.derived > 0)
    result.warnings.push_back("max_model_len " + std::to_string(length.tokens) + " exceeds the derived " +
                              std::to_string(length.derived) +
                              ": vLLM refuses unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1");
  if (model.rope_scaling.present() && length.derived != model.max_position_embeddings)
    result.notes.push_back("derived max_model_len " + std::to_string(length.derived) +
                           " includes rope_scaling (" + model.rope_scaling.type + ", factor " +
                           fixed_text(model.rope_scaling.factor, 2) + ")");
}

void describe_block_and_layout(const ModelSpec& model, const EngineOptions& options,
                               const BlockSizeChoice& block_choice, bool align_mode, const Layout& layout,
                               PlanResult& result) {
  const std::uint32_t block = block_choice.tokens;
  result.assumptions.push_back({"block size", std::to_string(block), block_choice.source});
  const bool hybrid = has_recurrent(model) && model.attention_layer_count() > 0;
  if (hybrid) {
    if (!block_choice.derivation.empty()) result.notes.push_back(block_choice.derivation);
    if (align_mode) {
      // 2 state pages per Mamba layer, 3 where the spec keeps a prefill-checkpoint page (Mamba-2,
      // 0.33+: VersionRules::mamba2_checkpoint_page).
      std::uint64_t checkpoint = 0;
      for (const Group& g : layout.groups)
        if (g.spec.kind == SpecKind::mamba) checkpoint = std::max(checkpoint, g.spec.checkpoint_blocks);
      const bool gdn = model.recurrent->kind == RecurrentKind::gated_delta_net;
      const std::string pages =
          std::to_string(2 + checkpoint) + " state pages per request" +
          (checkpoint ? (gdn ? " (2 + a prefill checkpoint: FlashInfer GDN prefill, 0.33+, block a multiple of 64)"
                             : " (2 + a Mamba-2 prefill checkpoint, 0.33+)")
                      : "");
      result.assumptions.push_back(
          {"prefix caching with Mamba",
           options.vllm.enable_prefix_caching ? "align mode, " + pages
                                              : "on by default for hybrids (0.28+): align mode, " + pages,
           "mamba_cache_mode align; block = lcm(chunk_size, 16) multiple, chunk_size "
           "from the config, 2048 when absent (config/model.py get_mamba_chunk_size); MambaSpec."
           "max_memory_usage_bytes = page x (2 + num_speculative_blocks + num_prefill_checkpoint_blocks)"});
    }
  }
  if (layout.padding_layers > 0)
    result.warnings.push_back("vLLM adds " + std::to_string(layout.padding_layers) +
                              " padding layers to equalise KV cache groups (kv_cache_utils.py); that memory "
                              "holds no KV");
  std::map<std::string, int> kinds;
  for (const Group& g : layout.groups) kinds[std::string(spec_name(g.spec.kind))]++;
  std::string text;
  for (const auto& [k, n] : kinds) text += (text.empty() ? "" : ", ") + std::to_string(n) + " x " + k;
  if (!layout.groups.empty())
    result.notes.push_back("KV cache groups: " + text + ", " + std::to_string(layout.group_size) +
                           " layers per group");
  for (const LayerSpec& l : model.layers)
    if (l.is_attention() && l.kind != LayerKind::mla && l.kv_heads > 0 && options.tp > l.kv_heads) {
      result.notes.push_back("TP " + std::to_string(options.tp) + " > " + std::to_string(l.kv_heads) +
                             " KV heads: each rank holds 1 replicated KV head");
      break;
    }
}

template <typename T>
void append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

PlanResult VllmEngine::budget(const EngineDecision& decision, const ModelSpec& target, const GpuSpec* gpu,
                              const EngineOptions& options) const {
  check_common_options(options);
  refuse_unused_overheads(options, name(),
                          {OverheadFlag::activation, OverheadFlag::non_torch, OverheadFlag::cuda_graph,
                           OverheadFlag::kv_transfer});
  if (target.layers.empty()) throw InputError("--model", "the model has no layers");
  // --speculative-config: the drafter's attention layers take KV beside the target's
  // (vllm_speculative.cpp); `model` is the target with them appended, used for every KV
  // figure; weights and the profile run stay the target's, plus the drafter's weights.
  DraftPlan draft;
  const ModelSpec model = with_draft_layers(target, options, draft);
  PlanResult result;
  append(result.notes, draft.notes);
  result.engine = "vllm";
  const Version& version = decision.version;
  result.engine_version = version.text;
  if (auto newer = newer_than_known_warning(*this, decision.version)) result.warnings.push_back(*newer);
  const bool v0 = !version.at_least(0, 8);  // V1 became the default engine in 0.8.0
  if (v0)
    result.notes.push_back(
        "vLLM " + version.text +
        " runs the V0 engine: log lines follow V0 (worker.py / executor); KV grouping follows V1");

  const KvTypes& types = decision.kv_types;
  const std::uint32_t block = decision.block.tokens;
  const LengthChoice& length = decision.length;
  describe_length(model, length, result);
  std::uint64_t max_model_len = length.tokens;

  const std::optional<std::uint64_t> total = total_memory(gpu, options);
  const bool sliding_window = std::any_of(model.layers.begin(), model.layers.end(), [](const LayerSpec& l) {
    return l.kind == LayerKind::sliding_window;
  });
  const SchedulerLimits limits =
      scheduler_limits(version, options, total, gpu, max_model_len, sliding_window);
  const VersionRules rules = rules_for(version);
  // Sliding-window / chunked-local pages cover max_in_flight_tokens = max_concurrent_batches x
  // max_num_batched_tokens (config/vllm.py max_in_flight_tokens, 0.26+); 1 x T before.
  const std::uint64_t batches = max_concurrent_batches(rules, options);
  const std::uint64_t max_batched =
      checked_mul(batches, limits.max_num_batched_tokens, "max_in_flight_tokens");
  if (batches > 1)
    result.assumptions.push_back({"max_in_flight_tokens", std::to_string(max_batched),
                                  std::to_string(batches) +
                                      " concurrent batches x max_num_batched_tokens (async scheduling"
                                      " / PP; config/vllm.py max_concurrent_batches)"});
  result.assumptions.push_back(
      {"max_num_batched_tokens / max_num_seqs",
       std::to_string(limits.max_num_batched_tokens) + " / " + std::to_string(limits.max_num_seqs),
       limits.why});

  // Stages 1-3: per-layer specs, groups, per-stage projection.
  const bool align_mode = prefix_caching_align(model, options, rules);
  const Layout layout = group_kv_cache_specs(
      layer_cache_specs(model, types, options.tp, block,
                        options.vllm.speculative ? options.vllm.speculative->num_speculative_tokens : 0,
                        mamba_checkpoint_blocks(model, rules, gdn_prefill_checkpoints(model, options, rules, gpu))),
      model.num_layers());
  describe_block_and_layout(model, options, decision.block, align_mode, layout, result);
  const std::vector<StageProjection> stages = project_stages(layout, model.num_layers(), options.pp);

  // The kv.* figures: the stage needing the most KV per block.
  const std::uint64_t context = options.context ? options.context : max_model_len;
  std::uint32_t kv_stage = 0;
  for (std::uint32_t s = 1; s < options.pp; ++s)
    if (stages[s].block_bytes > stages[kv_stage].block_bytes) kv_stage = s;
  const TokenFootprint tf = token_footprint(model, types, options.tp, options.pp, kv_stage);
  result.kv.bytes_per_token = tf.bytes_per_token;
  result.kv.bytes_per_token_all_layers = tf.bytes_per_token_all_layers;
  if (model.indexer) {
    // The indexer K caches grow with context like the MLA latent (stage 1 above).
    std::uint64_t indexer_layers = 0;
    for (std::uint32_t i : pp_stage_layers(model.num_layers(), options.pp, kv_stage))
      indexer_layers += model.layers[i].indexer ? 1 : 0;
    const std::uint64_t ix =
        checked_mul(indexer_layers, indexer_k_bytes_per_token(*model.indexer), "indexer bytes");
    result.kv.bytes_per_token = checked_add(result.kv.bytes_per_token, ix, "kv bytes per token");
    result.kv.bytes_per_token_all_layers =
        checked_add(result.kv.bytes_per_token_all_layers, ix, "kv bytes per token");
    result.notes.push_back(
        "sparse-attention indexer K cache: " + std::to_string(indexer_layers) + " layers x " +
        std::to_string(indexer_k_bytes_per_token(*model.indexer)) +
        " B per token, in the KV cache group beside the MLA latent (deepseek_v2.py, 0.33); "
        "sparse MLA backends take blocks in multiples of 64");
  }
  result.kv.state_bytes_per_sequence = tf.state_bytes_per_sequence;
  result.kv.pool_bytes_per_token = result.kv.bytes_per_token;
  result.kv.block_size = block;
  result.kv.context = context;
  result.kv.batch = options.batch;
  result.kv.blocks_per_sequence = pages_for_request(layout, context, max_batched, align_mode);
  // _max_memory_usage_bytes_from_groups: group_size x page x sum of pages (padding included).
  result.kv.bytes_per_sequence =
      checked_mul(result.kv.blocks_per_sequence, stages[kv_stage].block_bytes, "kv bytes per sequence");
  result.kv.bytes_per_batch = checked_mul(result.kv.bytes_per_sequence, options.batch, "kv bytes per batch");

  result.weights = decision.weights;
  result.assumptions.push_back(decision.weights_assumption);
  if (draft.weight_bytes_per_rank > 0 && !options.overheads.weights_gib) {
    // load_model loads the drafter after the target (gpu_model_runner.py, 0.33.0), so
    // "Model loading took" counts both; a --weights-gib figure is taken as that total.
    result.weights.bytes = checked_add(result.weights.bytes, draft.weight_bytes, "weights");
    result.weights.bytes_per_rank =
        checked_add(result.weights.bytes_per_rank, draft.weight_bytes_per_rank, "weights per rank");
    result.assumptions.push_back(
        {"draft weights per rank", gib_text(draft.weight_bytes_per_rank), draft.weights_why});
  }
  if (const std::uint64_t pad = mxfp4_marlin_padding_bytes(version, target, gpu, options); pad > 0) {
    result.weights.bytes_per_rank = checked_add(result.weights.bytes_per_rank, pad, "weights per rank");
    result.weights.bytes = checked_add(
        result.weights.bytes, checked_mul(pad, std::uint64_t{options.tp} * options.pp, "weights"), "weights");
    result.weights.method +=
        "; + " + gib_text(pad) +
        " per rank: vLLM's Marlin mxfp4 MoE pads experts to hidden 256 / intermediate 128 "
        "(quantization/mxfp4.py create_weights, 0.10.1; oracle/mxfp4.py, 0.19)";
    result.assumptions.push_back(
        {"mxfp4 Marlin padding per rank", gib_text(pad),
         "the Marlin mxfp4 MoE backend (0.10.1-0.11.x: CUDA but SM 10.0 without triton_kernels; 0.12-0.32: "
         "below SM 9.0): experts allocated at round_up(I/tp, 128) x round_up(H, 256)"});
  }

  if (!total && !options.vllm.kv_cache_memory_bytes) return result;

  // The worker's budget.
  const MemoryBudget budget =
      memory_budget(version, target, options, total, result.weights.bytes_per_rank, limits, gpu);
  append(result.assumptions, budget.assumptions);
  append(result.notes, budget.notes);
  append(result.warnings, budget.warnings);
  Capacity cap;
  cap.gpu_memory_bytes = total.value_or(0);
  cap.requested_bytes = budget.requested_bytes;
  cap.overhead_bytes = budget.overhead_bytes;
  cap.available_kv_bytes = budget.available_bytes;
  cap.available_kv_signed_gib = budget.available_gib_signed;
  const std::uint64_t available = budget.available_bytes;

  // Stages 4-5: blocks on each worker, the minimum over workers.
  const BlockPool pool = min_blocks_over_workers(stages, available, options.tp);
  cap.num_blocks = pool.num_blocks;
  cap.page_bytes = pool.page_bytes;
  cap.limiting_rank = pool.limiting_rank;

  // Stage 6: the memory check. BlockPool permanently holds one null block; from PR #47272
  // (merged 2026-08, with the auto-fit counterpart #48724; release assumed 0.28) the capacity
  // checks use only the usable blocks: (num_blocks - 1) x bytes per block (kv_cache_utils.py).
  const bool reserve_null = rules.null_block_reserved;
  if (reserve_null)
    result.notes.push_back("one block is held back as the null block in the fits check (PR #47272)");
  auto fits = [&](std::uint64_t len) {
    return enough_kv_memory(layout, stages, available, len, max_batched, align_mode, reserve_null);
  };
  // Stage 7: the max-length search, up to max(derived, max_model_len).
  const std::uint64_t upper = std::max(length.derived, max_model_len);
  const std::uint64_t largest = layout.groups.empty() ? upper : estimate_max_model_len(fits, upper);
  cap.largest_max_model_len = largest;
  if (length.search) {
    if (largest == 0)
      result.warnings.push_back(
          "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
          "single token. Try increasing `gpu_memory_utilization`.");
    else if (largest < max_model_len) {
      result.engine_log.push_back("Auto-fit max_model_len: reduced from " + std::to_string(max_model_len) +
                                  " to " + std::to_string(largest) + " to fit in available GPU memory (" +
                                  fixed_text(to_gib(available), 2) + " GiB available for KV cache)");
      max_model_len = largest;
    } else {
      result.engine_log.push_back("Auto-fit max_model_len: full model context length " +
                                  std::to_string(max_model_len) + " fits in available GPU memory");
    }
  }
  cap.max_model_len = max_model_len;
  cap.fits = !layout.groups.empty() ? fits(max_model_len) : true;

  // Stage 8: the report.
  ReportInputs in;
  in.version = &version;
  in.layout = &layout;
  in.pool = &pool;
  in.max_model_len = max_model_len;
  in.req_pages = pages_for_request(layout, max_model_len, max_batched, align_mode);
  in.block_size = block;
  in.available_bytes = available;
  in.available_gib_signed = budget.available_gib_signed;
  in.total_gib = total ? to_gib(*total) : 0.0;
  in.util = budget.util;
  in.fits = cap.fits;
  in.largest = largest;
  in.kv_cache_memory_given = options.vllm.kv_cache_memory_bytes.has_value();
  in.extensible = budget.extensible;
  in.reserved_gib_signed = budget.reserved_gib_signed;
  ReportFigures report = report_figures(in);
  cap.kv_tokens = report.kv_tokens;
  cap.max_concurrency = report.max_concurrency;
  // config/scheduler.py max_num_seqs: the scheduler runs at most this many requests per step,
  // however many the KV cache would hold.
  cap.max_running = limits.max_num_seqs;
  cap.max_running_source =
      options.vllm.max_num_seqs ? "--max-num-seqs" : "vLLM default max_num_seqs (" + limits.why + ")";
  append(result.engine_log, report.engine_log);
  if (!cap.fits)
    result.warnings.push_back("max_model_len " + std::to_string(max_model_len) +
                              " does not fit: largest that fits is " + std::to_string(largest));
  result.capacity = cap;
  return result;
}

}  // namespace

std::unique_ptr<Engine> make_vllm_engine() { return std::make_unique<VllmEngine>(); }

std::uint32_t vllm_block_size(const ModelSpec& model, const EngineOptions& options, const GpuSpec* gpu) {
  return vllm::block_figures(model, options, gpu).tokens;
}

vllm::BlockFigures vllm::block_figures(const ModelSpec& model, const EngineOptions& options, const GpuSpec* gpu) {
  if (options.block_size && *options.block_size == 0) throw InputError("--block-size", "is 0; allowed: >= 1");
  if (options.tp == 0) throw InputError("--tp", "is 0; allowed: a positive integer");
  const vllm::VersionRules rules = vllm::rules_for(vllm::resolve_version(options));
  const bool mla = vllm::is_mla_model(model);
  const bool hybrid = vllm::has_recurrent(model) && model.attention_layer_count() > 0;
  std::uint64_t block = options.block_size.value_or(vllm::default_block_size(rules));
  if (mla) {
    const bool fp8 = options.kv_cache_dtype.rfind("fp8", 0) == 0;
    // Sparse MLA (DeepSeek V3.2 indexer) runs only on the *_MLA_SPARSE backends, all
    // MultipleOf(64) (mla/flashmla_sparse.py, flashattn_mla_sparse.py, 0.33).
    const bool sparse = model.indexer.has_value();
    if (rules.mla_flash_attn && !fp8 && !hybrid && !sparse) {
      // 0.33, Hopper assumed (no device here): FLASH_ATTN_MLA first in platforms/cuda.py,
      // kernel blocks MultipleOf(16) (v1/attention/backends/mla/flashattn_mla.py): the default
      // 16 and any user multiple of 16 stand; otherwise FlashMLA's 64 (mla/flashmla.py).
      if (block % 16 != 0) block = 64;
    } else if (block % 64 != 0) {
      // Before 0.33, and with an fp8 cache in 0.33: FlashMLA, kernel block 64 only
      // (mla/flashmla.py get_supported_kernel_block_sizes); CUTLASS MLA 128 on Blackwell.
      block = 64;
    }
  }
  if (!hybrid) return {static_cast<std::uint32_t>(block), 0, 0};

  // Hybrid attention + Mamba (HybridAttentionMambaModelConfig.verify_and_update_config,
  // vllm/model_executor/models/config.py; Platform._align_hybrid_block_size in newer trees):
  // the attention page must be >= the Mamba state page.
  const KvTypes types = resolve_kv_types(model, options.kv_cache_dtype);
  // Per-token attention page: the largest over attention layers (newer trees take the max
  // over the KV dtypes in use when some layers skip the quantized cache dtype).
  const std::uint64_t attn_1tok = vllm::attn_bytes_per_token_max(model, types, options.tp);
  const std::uint64_t mamba_page = recurrent_state_bytes(*model.recurrent, options.tp).total();
  if (attn_1tok == 0 || mamba_page == 0) return {static_cast<std::uint32_t>(block), mamba_page, attn_1tok};
  std::uint64_t needed = 0;
  if (rules.hybrid_prefix_caching) {
    // 0.28+ (platforms/interface.py _align_hybrid_block_size, read in 0.33 and 0.34): alignment =
    // max(the backend's smallest kernel block, cache block size), 128 for hybrid MLA; in "align"
    // mode lcm with the Mamba layers' prefill-checkpoint alignment, 64 with FlashInfer's GDN
    // prefill (gdn_prefill_checkpoints), none otherwise. The block is set after the model is
    // built (v1/executor/*_executor.py update_block_size_for_backend), so the layers' choice counts.
    std::uint64_t align = std::max<std::uint64_t>(16, block);
    if (mla) align = std::max<std::uint64_t>(align, 128);
    if (vllm::gdn_prefill_checkpoints(model, options, rules, gpu))
      align = std::lcm<std::uint64_t>(align, vllm::kGdnCheckpointAlignment);
    needed = align * ceil_div(mamba_page, checked_mul(align, attn_1tok, "attention page"));
    needed = 16 * ceil_div(needed, 16);  // backend_block_alignment: lcm of the kernel minimums
  } else if (options.vllm.enable_prefix_caching) {
    // Before 0.28, prefix caching "all" mode: chunk = lcm(mamba chunk size, alignment);
    // block = chunk x ceil(ceil(mamba_page / attn_1tok) / chunk). The chunk size comes from
    // the config's mamba_chunk_size / chunk_size, 2048 when absent (config/model.py
    // get_mamba_chunk_size); ModelSpec does not carry it, so 2048 is assumed.
    const std::uint64_t chunk = std::lcm<std::uint64_t>(2048, mla ? 64 : 16);
    needed = chunk * ceil_div(ceil_div(mamba_page, attn_1tok), chunk);
  } else {
    // attn_block_size = align x cdiv(mamba_page, align x attn_page_1_token); FlashAttention /
    // FlashInfer need multiples of 16, MLA kernels 64.
    const std::uint64_t align = mla ? 64 : 16;
    needed = align * ceil_div(mamba_page, checked_mul(align, attn_1tok, "attention page"));
  }
  // Raised only when unset or too small; the Mamba page is then padded to the attention page.
  if (!options.block_size || block < needed) block = needed;
  if (block > 0xffffffffull) throw InputError("--block-size", "hybrid block size overflows 32 bits");
  return {static_cast<std::uint32_t>(block), mamba_page, attn_1tok};
}

}  // namespace kvsight
