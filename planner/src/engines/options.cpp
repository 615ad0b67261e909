// The option field table (kvsight/engine_options.hpp).
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kvsight/counts.hpp"
#include "kvsight/engine_options.hpp"
#include "kvsight/error.hpp"
#include "kvsight/input_file.hpp"
#include "kvsight/speculative.hpp"

namespace kvsight {

namespace {

using K = OptionKind;
using F = OptionField;

// A block or page of more than 2^20 tokens, or a TP/PP of more than 2^16 ranks, is
// not a configuration any engine serves; the bounds keep products far from overflow.
constexpr std::uint64_t kMaxRanks = 65536;
constexpr std::uint64_t kMaxBlock = 1u << 20;
constexpr std::uint64_t kMaxLength = 1ull << 40;
// kv_cache_memory_bytes: 1 PiB, above any device's memory.
constexpr std::uint64_t kMaxBytes = 1ull << 50;

}  // namespace

const std::vector<OptionFieldInfo>& option_fields() {
  static const std::vector<OptionFieldInfo> fields = {
      {F::tensor_parallel_size, "tensor_parallel_size", {"--tp"}, K::count, "tensor-parallel ranks", {}},
      {F::pipeline_parallel_size, "pipeline_parallel_size", {"--pp"}, K::count, "pipeline stages", {}},
      {F::kv_cache_dtype,
       "kv_cache_dtype",
       {"--kv-cache-dtype"},
       K::text,
       "KV cache dtype: auto (the model dtype) or one of the engine's types",
       {}},
      {F::block_size,
       "block_size",
       {"--block-size"},
       K::count,
       "tokens per KV block (vLLM block, SGLang page, TensorRT-LLM tokens_per_block)",
       {}},
      {F::max_model_len,
       "max_model_len",
       {"--max-model-len"},
       K::length,
       "longest sequence the engine admits; capacity is computed at it (-1: vLLM's largest that fits)",
       {}},
      {F::gpu_memory_utilization,
       "gpu_memory_utilization",
       {},
       K::fraction,
       "fraction of total GPU memory vLLM may use (default 0.92; 0.90 through 0.11.x)",
       {}},
      {F::max_num_batched_tokens,
       "max_num_batched_tokens",
       {},
       K::count,
       "tokens per scheduler step (default by GPU and version)",
       {}},
      {F::max_num_seqs,
       "max_num_seqs",
       {},
       K::count,
       "sequences running at once (default by engine, GPU and version)",
       {}},
      {F::max_total_tokens,
       "max_total_tokens",
       {},
       K::count,
       "upper bound on the KV pool's tokens (SGLang; the profiled pool when smaller)",
       {}},
      {F::kv_cache_memory_bytes,
       "kv_cache_memory_bytes",
       {},
       K::count,
       "KV cache size in bytes, skipping the memory profile",
       {}},
      {F::enforce_eager, "enforce_eager", {}, K::flag, "no CUDA graphs (no graph memory estimate)", {}},
      {F::enable_prefix_caching,
       "enable_prefix_caching",
       {},
       K::flag,
       "prefix caching (hybrid models keep one more state page)",
       {}},
      {F::disable_prefix_caching,
       "disable_prefix_caching",
       {},
       K::flag,
       "no prefix caching (on by default for hybrid models from vLLM 0.28: align mode, 2 state pages)",
       {}},
      {F::async_scheduling,
       "async_scheduling",
       {},
       K::flag,
       "async scheduling: 2 batches in flight, sliding-window layers reserve 2 x max_num_batched_tokens",
       {}},
      {F::no_async_scheduling,
       "no_async_scheduling",
       {},
       K::flag,
       "no async scheduling: 1 batch in flight (default: the version's; on from 0.26 at PP 1)",
       {}},
      {F::offline, "offline", {}, K::flag, "defaults of the offline LLM class instead of `vllm serve`", {}},
      {F::mem_fraction_static, "mem_fraction_static", {}, K::fraction, "fraction for weights + KV pool", {}},
      {F::free_gpu_memory_fraction,
       "free_gpu_memory_fraction",
       {},
       K::fraction,
       "fraction of free memory for KV (default 0.9)",
       {}},
      {F::ctx_size,
       "ctx_size",
       {},
       K::count0,
       "KV cells / cache tokens (llama.cpp n_ctx: default 4096, 0 = the training context; exllama cache "
       "size)",
       {}},
      {F::parallel, "parallel", {}, K::count, "slots sharing n_ctx", {}},
      {F::cache_type_k,
       "cache_type_k",
       {},
       K::text,
       "K cache type: f16, bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl",
       {}},
      {F::cache_type_v, "cache_type_v", {}, K::text, "V cache type (same values)", {}},
      {F::flash_attn,
       "flash_attn",
       {},
       K::choice,
       "flash attention: on, off or auto (default auto)",
       {"on", "off", "auto"}},
      {F::swa_full, "swa_full", {}, K::flag, "full-size cache for sliding-window layers", {}},
      {F::ubatch_size, "ubatch_size", {}, K::count, "n_ubatch (default 512)", {}},
      {F::kv_unified, "kv_unified", {}, K::flag, "one KV buffer shared by all slots", {}},
      {F::no_kv_offload, "no_kv_offload", {}, K::flag, "keep the KV cache in host memory (llama.cpp -nkvo)", {}},
      {F::disable_radix_cache,
       "disable_radix_cache",
       {},
       K::flag,
       "no radix (prefix) cache: SGLang sizes a hybrid model's state pool from --max-running-requests",
       {}},
      {F::speculative_config,
       "speculative_config",
       {},
       K::text,
       "speculative decoding as vLLM's JSON, e.g. '{\"method\": \"eagle\", \"model\": \"DRAFT\", "
       "\"num_speculative_tokens\": 3}' or '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}': "
       "adds the draft's KV layers and weights",
       {}},
      {F::kv_transfer_config,
       "kv_transfer_config",
       {},
       K::text,
       "vLLM's KV-transfer JSON, e.g. '{\"kv_connector\": \"LMCacheConnectorV1\", \"kv_role\": "
       "\"kv_both\"}': "
       "names the connector; state its GPU memory with --kv-transfer-gib",
       {}},
      {F::gdn_prefill_backend,
       "gdn_prefill_backend",
       {},
       K::choice,
       "vLLM's GDN prefill kernel (0.33+): flashinfer on SM 9.0 / Blackwell by default, whose prefill "
       "checkpoints keep a third state page and a block multiple of 64 for Qwen3-Next / Qwen3.5",
       {"flashinfer", "triton", "cutedsl", "aiter_flydsl", "sycl", "hip"}},
      {F::n_gpu_layers,
       "n_gpu_layers",
       {},
       K::text,
       "layers on the GPU: auto, all, or a number N (llama.cpp counts the output layer as one: the rest "
       "and their KV stay in host memory)",
       {}},
  };
  return fields;
}

const OptionFieldInfo& option_field(OptionField field) {
  for (const OptionFieldInfo& info : option_fields())
    if (info.field == field) return info;
  throw std::logic_error("option_field: field missing from option_fields()");
}

std::vector<SpellingOwner> spelling_owners(std::string_view spelling) {
  std::vector<SpellingOwner> owners;
  for (const auto& engine : all_engines())
    for (const EngineFlag& flag : engine->flags())
      if (std::find(flag.spellings.begin(), flag.spellings.end(), spelling) != flag.spellings.end())
        owners.push_back({engine->name(), engine->display_name(), flag.field});
  return owners;
}

const OptionFieldInfo* option_field_named(std::string_view name) {
  for (const OptionFieldInfo& info : option_fields()) {
    if (info.name == name) return &info;
    if (std::find(info.neutral.begin(), info.neutral.end(), name) != info.neutral.end()) return &info;
  }
  const auto owners = spelling_owners(name);
  return owners.empty() ? nullptr : &option_field(owners.front().field);
}

void store_option(EngineOptions& o, OptionField field, std::uint64_t value) {
  switch (field) {
    case F::tensor_parallel_size:
      o.tp = static_cast<std::uint32_t>(value);
      return;
    case F::pipeline_parallel_size:
      o.pp = static_cast<std::uint32_t>(value);
      return;
    case F::block_size:
      o.block_size = static_cast<std::uint32_t>(value);
      return;
    // The tokens of one scheduler step and the sequences running at once: vLLM's
    // max_num_batched_tokens / max_num_seqs, TensorRT-LLM's max_num_tokens / max_batch_size,
    // SGLang's max_running_requests; each engine reads its own.
    case F::max_num_batched_tokens:
      o.vllm.max_num_batched_tokens = value;
      o.trtllm.max_num_tokens = value;
      return;
    case F::max_num_seqs:
      o.vllm.max_num_seqs = value;
      o.sglang.max_running_requests = value;
      o.trtllm.max_batch_size = value;
      return;
    case F::kv_cache_memory_bytes:
      o.vllm.kv_cache_memory_bytes = value;
      return;
    case F::max_total_tokens:
      o.sglang.max_total_tokens = value;
      return;
    // Read by llama.cpp (n_ctx) and by ExLlama (the cache size in tokens): the value goes
    // to each engine's struct, and each engine reads its own.
    case F::ctx_size:
      o.llamacpp.ctx_size = value;
      o.exllama.cache_size = value;
      return;
    case F::parallel:
      o.llamacpp.parallel = static_cast<std::uint32_t>(value);
      o.llamacpp.parallel_given = true;
      return;
    case F::ubatch_size:
      o.llamacpp.ubatch_size = value;
      return;
    default:
      throw std::logic_error("store_option: " + option_field(field).name + " is not a count field");
  }
}

void store_option(EngineOptions& o, OptionField field, const std::string& value) {
  switch (field) {
    case F::kv_cache_dtype:
      o.kv_cache_dtype = value;
      return;
    // llama.cpp's K cache type, and ExLlama's one cache mode for K and V.
    case F::cache_type_k:
      o.llamacpp.cache_type_k = value;
      o.exllama.cache_mode = value;
      return;
    case F::cache_type_v:
      o.llamacpp.cache_type_v = value;
      return;
    case F::flash_attn:
      o.llamacpp.flash_attn = value;
      return;
    case F::n_gpu_layers:
      o.llamacpp.n_gpu_layers = value;
      return;
    case F::gdn_prefill_backend:
      o.vllm.gdn_prefill_backend = value;
      return;
    default:
      throw std::logic_error("store_option: " + option_field(field).name + " is not a text field");
  }
}

std::string engine_spelling(const Engine& engine, OptionField field) {
  for (const EngineFlag& flag : engine.flags())
    if (flag.field == field && !flag.spellings.empty()) return flag.spellings.front();
  return "";
}

void set_option(EngineOptions& o, OptionField field, std::string_view text) {
  const OptionFieldInfo& info = option_field(field);
  const std::string& name = info.name;
  auto count = [&](std::uint64_t min, std::uint64_t max) { return parse_count_in(text, name, min, max); };
  auto fraction = [&] { return parse_number_in(text, name, 0.0, 1.0, "a fraction in (0, 1]"); };
  auto positive_fraction = [&] {
    const double value = fraction();
    if (value <= 0.0) throw InputError(name, "is " + std::string(text) + "; allowed: a fraction in (0, 1]");
    return value;
  };
  switch (field) {
    case F::tensor_parallel_size:
    case F::pipeline_parallel_size:
    case F::parallel:
      store_option(o, field, count(1, kMaxRanks));
      return;
    case F::block_size:
      store_option(o, field, count(1, kMaxBlock));
      return;
    case F::max_num_batched_tokens:
    case F::max_num_seqs:
    case F::max_total_tokens:
    case F::ubatch_size:
      store_option(o, field, count(1, kMaxLength));
      return;
    case F::ctx_size:
      store_option(o, field, count(0, kMaxLength));
      return;
    case F::kv_cache_memory_bytes:
      store_option(o, field, count(1, kMaxBytes));
      return;
    case F::kv_cache_dtype:
      if (text.empty())
        throw InputError(name, "is empty; allowed: auto or one of the engine's KV cache types");
      store_option(o, field, std::string(text));
      return;
    case F::cache_type_k:
    case F::cache_type_v:
      if (text.empty()) throw InputError(name, "is empty; allowed: one of the engine's cache types");
      store_option(o, field, std::string(text));
      return;
    case F::n_gpu_layers:
      // common/arg.cpp -ngl: "auto" (-1), "all" (-2) or a number of layers.
      if (text != "auto" && text != "all" && text != "-1" && text != "-2")
        (void)count(0, kMaxLength);
      store_option(o, field, text == "-1" ? std::string("auto") : text == "-2" ? std::string("all") : std::string(text));
      return;
    case F::flash_attn:
      if (std::find(info.choices.begin(), info.choices.end(), text) == info.choices.end())
        throw InputError(name, "is '" + std::string(text) + "'; allowed: on, off, auto");
      store_option(o, field, std::string(text));
      return;
    case F::gdn_prefill_backend:
      // engine/arg_utils.py (0.33.0, 0.34.0): argparse choices of --gdn-prefill-backend.
      if (std::find(info.choices.begin(), info.choices.end(), text) == info.choices.end())
        throw InputError(name, "is '" + std::string(text) +
                                   "'; allowed: flashinfer, triton, cutedsl, aiter_flydsl, sycl, hip");
      store_option(o, field, std::string(text));
      return;
    case F::max_model_len:
      // vLLM: -1 asks for the largest length that fits (formulas.md step 6).
      if (text == "-1") {
        o.max_model_len = -1;
        return;
      }
      if (!text.empty() && text[0] == '-')
        throw InputError(name,
                         "is '" + std::string(text) +
                             "'; allowed: a positive length (K/M allowed), or -1 for the largest that fits");
      o.max_model_len = static_cast<std::int64_t>(count(1, kMaxLength));
      return;
    case F::gpu_memory_utilization:
      o.vllm.gpu_memory_utilization = positive_fraction();
      return;
    case F::enforce_eager:
      o.vllm.enforce_eager = true;
      return;
    // A flag and its --no- form (argparse BooleanOptionalAction in vLLM's arg_utils.py):
    // both given is refused whatever their order, rather than one silently winning.
    case F::enable_prefix_caching:
    case F::disable_prefix_caching:
      if (o.vllm.enable_prefix_caching || o.vllm.disable_prefix_caching)
        throw InputError(name,
                         "contradicts the other prefix-caching flag; give --enable-prefix-caching or "
                         "--no-enable-prefix-caching, not both");
      (field == F::enable_prefix_caching ? o.vllm.enable_prefix_caching : o.vllm.disable_prefix_caching) =
          true;
      return;
    case F::async_scheduling:
    case F::no_async_scheduling:
      if (o.vllm.async_scheduling)
        throw InputError(name,
                         "contradicts the other async-scheduling flag; give --async-scheduling or "
                         "--no-async-scheduling, not both");
      o.vllm.async_scheduling = field == F::async_scheduling;
      return;
    case F::disable_radix_cache:
      o.sglang.disable_radix_cache = true;
      return;
    case F::offline:
      o.vllm.api_server = false;
      return;
    case F::mem_fraction_static:
      o.sglang.mem_fraction_static = positive_fraction();
      return;
    case F::free_gpu_memory_fraction:
      o.trtllm.free_gpu_memory_fraction = positive_fraction();
      return;
    case F::swa_full:
      o.llamacpp.swa_full = true;
      return;
    case F::kv_unified:
      o.llamacpp.kv_unified = true;
      return;
    case F::no_kv_offload:
      o.llamacpp.no_kv_offload = true;
      return;
    case F::speculative_config:
      o.vllm.speculative = parse_speculative_config(text);
      return;
    case F::kv_transfer_config: {
      // vllm/config/kv_transfer.py KVTransferConfig: kv_connector names the connector class.
      const nlohmann::json j = parse_json_input(text, name, 8);
      const auto it = j.is_object() ? j.find("kv_connector") : j.end();
      if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
        throw InputError(
            name + ".kv_connector",
            "is missing or not a non-empty string; allowed: vLLM's JSON with a connector name, e.g. "
            "'{\"kv_connector\": \"LMCacheConnectorV1\", \"kv_role\": \"kv_both\"}'");
      o.vllm.kv_connector = it->get<std::string>();
      return;
    }
  }
}

}  // namespace kvsight
