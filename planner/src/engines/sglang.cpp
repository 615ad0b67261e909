// SGLang KV-cache budget: a token pool sized from what is left after the weights.
//
// Sources (sgl-project/sglang):
//   python/sglang/srt/model_executor/model_runner.py (profile_max_num_token; newer trees
//   model_runner_kv_cache_mixin.py / profile_available_bytes):
//     rest_memory   = available_gpu_memory - total_gpu_memory x (1 - mem_fraction_static)
//     max_num_token = int(rest_memory x 2^30 // cell_size), then floored to page_size
//     where total_gpu_memory is the free memory at start-up and available_gpu_memory the free
//     memory after the weights are loaded (both GiB, the minimum over ranks).
//     cell_size = kv_heads(attention tp) x (head_dim + v_head_dim) x layers x element size;
//     MLA: (kv_lora_rank + qk_rope_head_dim) x layers x element size.
//   python/sglang/srt/server_args.py (mem_fraction_static default):
//     older releases by TP size: >= 16: 0.79, >= 8: 0.81, >= 4: 0.85, >= 2: 0.87, else 0.88;
//     from about 0.4.7: round((gpu_mem - reserved) / gpu_mem, 3), gpu_mem in MiB and reserved by
//     device size, parallel_size = tp x pp: < 35 GiB (2.8 + p/10) GiB; < 90 GiB (9.5 + p/2);
//     < 100 GiB and < 160 GiB (12 + p/2); else 32 GiB.
//   python/sglang/srt/mem_cache/memory_pool.py: "KV Cache is allocated. #tokens: N, K size: X GB,
//     V size: Y GB" (GB = 2^30 bytes; buffers hold size + page_size slots).
// page_size 1 by default (FlashMLA forces 64, CUTLASS MLA 128).
#include <algorithm>
#include <cmath>
#include <string>

#include "common.hpp"
#include "launch_tables.hpp"
#include "kvsight/budget.hpp"
#include "kvsight/checked.hpp"
#include "kvsight/engine_decision.hpp"
#include "kvsight/error.hpp"
#include "log_line.hpp"

namespace kvsight {
namespace {

using namespace engine_detail;

const std::vector<std::string>& sglang_versions() {
  static const std::vector<std::string> v = {"0.4.6", "0.4.7", "0.5.2", "0.5.23"};
  return v;
}

class SglangEngine final : public Engine {
 public:
  std::string name() const override { return "sglang"; }
  std::vector<std::string> known_versions() const override { return sglang_versions(); }
  PlanResult budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                    const EngineOptions& options) const override;

  std::string display_name() const override { return "SGLang"; }
  std::string default_version() const override { return sglang_versions().back(); }
  bool has_gate_rules() const override { return true; }
  // python/sglang/srt/server_args.py add_cli_args: --tensor-parallel-size/--tp-size,
  // --pipeline-parallel-size/--pp-size, --context-length, --page-size.
  // Its server command and what kvsight does with each flag (sglang_launch.cpp, issue #22).
  const Launcher* launcher() const override { return &engine_detail::sglang_launcher(); }
  std::vector<EngineFlag> flags() const override {
    return {{OptionField::tensor_parallel_size, {"--tp-size", "--tensor-parallel-size"}},
            {OptionField::pipeline_parallel_size, {"--pp-size", "--pipeline-parallel-size"}},
            {OptionField::kv_cache_dtype, {"--kv-cache-dtype"}},
            {OptionField::block_size, {"--page-size"}},
            {OptionField::max_model_len, {"--context-length"}},
            {OptionField::mem_fraction_static, {"--mem-fraction-static"}},
            {OptionField::max_num_seqs, {"--max-running-requests"}},
            {OptionField::max_total_tokens, {"--max-total-tokens"}},
            {OptionField::disable_radix_cache, {"--disable-radix-cache"}}};
  }
  // server_args.py --kv-cache-dtype choices (the ones the dtype table models).
  std::vector<std::string> kv_cache_dtypes() const override {
    return {"auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"};
  }
  BlockSizeChoice block_size(const ModelSpec&, const GpuSpec*, const EngineOptions& options) const override {
    return given_or_default_block(
        options, 1, "SGLang default page size 1", [](std::uint32_t b) { return b >= 1; },
        "a positive page size");
  }
  std::vector<StartupCheck> startup_checks(const ModelSpec& model, const GpuSpec*,
                                           const EngineOptions& options) const override {
    std::vector<StartupCheck> checks{tp_divides_heads_check(model, options, display_name())};
    if (auto kv = kv_heads_split_check(model, options)) checks.push_back(*kv);
    return checks;
  }
  std::unique_ptr<EngineLogReader> log_reader() const override;
};

// The pool line of srt/mem_cache/memory_pool.py (KVCache._finalize_allocation_log), which
// budget() prints and explain reads back (log_line.hpp): the K and V buffers' sizes in "GB" of
// 2^30 bytes; an MLA pool (one latent buffer: get_kv_size_bytes returns one number) prints
// "KV size". 0.5.23 prints the pool's torch dtype after "allocated." (the first form; read in its
// source); 0.5.2's has none (the second; the release between that added it was not read).
const LogLine kSglangPoolLine{
    "KV Cache is allocated. dtype: {T:dtype}, #tokens: {N:tokens}, K size: {X:k_gib} GB, V size: {X:v_gib} GB",
    "KV Cache is allocated. #tokens: {N:tokens}, K size: {X:k_gib} GB, V size: {X:v_gib} GB"};
const LogLine kSglangMlaPoolLine{"KV Cache is allocated. dtype: {T:dtype}, #tokens: {N:tokens}, KV size: {X:kv_gib} GB",
                                 "KV Cache is allocated. #tokens: {N:tokens}, KV size: {X:kv_gib} GB"};

// Lines explain reads and plan does not print (srt/model_executor/model_runner.py, 0.5.x; the
// log's "GB" is 2^30 B as above): the free memory before and after the weights ("mem usage" is
// what loading took: the weights per rank; 0.5.8 prints "dtype=..." before "avail mem"), and the
// Mamba state pool's line (mem_cache/memory_pool.py MambaPool, 0.5.21 / 0.5.23).
const LogLine kSglangWeightBeginLine{"Load weight begin. avail mem={X:free} GB"};
const LogLine kSglangWeightEndLine{"Load weight end. {*...}avail mem={X:free} GB, mem usage={X:weights} GB"};
const LogLine kSglangMambaLine{
    "Mamba Cache is allocated. max_mamba_cache_size: {N:slots}, conv_state size: {X:conv}GB, ssm_state size: "
    "{X:ssm}GB"};

// The torch dtype SGLang's pool prints for the KV cache type.
std::string torch_dtype_name(const KvDtype& type) {
  if (type.name == "bf16") return "torch.bfloat16";
  if (type.name == "fp16") return "torch.float16";
  if (type.name == "fp32") return "torch.float32";
  if (type.name == "fp8_e4m3") return "torch.float8_e4m3fn";
  if (type.name == "fp8_e5m2") return "torch.float8_e5m2";
  return type.name;
}

class SglangLogReader final : public EngineLogReader {
 public:
  LogLineRead read(std::string_view line, EngineLogFigures& f) override {
    bool read = kSglangPoolLine.read(line, [&](const LogMatch& m) {
      f.kv_tokens = m.count("tokens");
      f.kv_size_gib = m.number("k_gib") + m.number("v_gib");
    });
    if (!read)
      read = kSglangMlaPoolLine.read(line, [&](const LogMatch& m) {
        f.kv_tokens = m.count("tokens");
        f.kv_size_gib = m.number("kv_gib");
      });
    if (!read)
      read = kSglangWeightBeginLine.read(line, [&](const LogMatch& m) {
        const double free = m.number("free");
        f.pre_load_free_gib = f.pre_load_free_gib ? std::min(*f.pre_load_free_gib, free) : free;
      });
    if (!read)
      read = kSglangWeightEndLine.read(line, [&](const LogMatch& m) { f.weights_gib = m.number("weights"); });
    if (!read)
      read = kSglangMambaLine.read(line, [&](const LogMatch& m) {
        f.state_slots = m.count("slots");
        f.state_size_gib = m.number("conv") + m.number("ssm");
      });
    return read ? LogLineRead::figures : LogLineRead::other;
  }
};

std::unique_ptr<EngineLogReader> SglangEngine::log_reader() const {
  return std::make_unique<SglangLogReader>();
}

PlanResult SglangEngine::budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                                const EngineOptions& options) const {
  check_common_options(options);
  refuse_unused_overheads(options, name(), {OverheadFlag::non_torch});
  if (model.layers.empty()) throw InputError("--model", "the model has no layers");
  PlanResult result;
  result.engine = "sglang";
  // 0.5.23 (the newest release, wheel read for the Mamba pool rule below) is the default.
  const Version& sglang_version = decision.version;
  result.engine_version = sglang_version.text;
  if (auto newer = newer_than_known_warning(*this, decision.version)) result.warnings.push_back(*newer);
  const KvTypes& types = decision.kv_types;
  const std::uint32_t page = decision.block.tokens;

  // Cell: every attention layer on this rank (sliding-window layers are sized like full
  // attention unless SGLang's hybrid SWA pool is in use); recurrent layers carry state.
  const std::uint32_t stage = heaviest_stage(model, types, options);
  std::uint64_t cell = 0, per_token_full = 0;
  std::uint32_t swa_layers = 0;
  for (std::uint32_t i : pp_stage_layers(model.num_layers(), options.pp, stage)) {
    const LayerSpec& l = model.layers[i];
    const std::uint64_t b = layer_kv_bytes_per_token(l, types, options.tp);
    cell = checked_add(cell, b, "cell size");
    if (l.kind == LayerKind::full_attention || l.kind == LayerKind::mla) per_token_full += b;
    if (l.kind == LayerKind::sliding_window || l.kind == LayerKind::chunked_local) ++swa_layers;
  }
  if (swa_layers > 0)
    result.notes.push_back(
        std::to_string(swa_layers) +
        " sliding-window layers are counted in every token's cell "
        "(SGLang's default token pool; its hybrid SWA pool, where enabled, sizes them apart)");
  // SGLang's recurrent state dtypes (configs/mamba_utils.py mamba2_state_dtype, 0.5.23): the conv
  // state in SGLANG_MAMBA_CONV_DTYPE (bfloat16), the ssm state in the config's mamba_ssm_dtype,
  // else float32 (vLLM's default is the model dtype, which the model spec carries).
  ModelSpec state_model = model;
  if (state_model.recurrent && state_model.recurrent->kind != RecurrentKind::lightning) {
    state_model.recurrent->conv_dtype = "bf16";
    if (!state_model.recurrent->ssm_dtype_from_config) state_model.recurrent->ssm_dtype = "fp32";
  }
  const TokenFootprint tf = token_footprint(state_model, types, options.tp, options.pp, stage);
  result.kv.bytes_per_token = per_token_full;
  result.kv.bytes_per_token_all_layers = cell;
  result.kv.pool_bytes_per_token = cell;
  result.kv.state_bytes_per_sequence = tf.state_bytes_per_sequence;
  result.kv.block_size = page;
  // The user's length (--context-length) drives capacity, as for vLLM; unset, the model's
  // derived maximum (Engine::max_model_len).
  const std::uint64_t context_len = decision.length.tokens;
  const std::uint64_t context = options.context ? options.context : context_len;
  result.kv.context = context;
  result.kv.batch = options.batch;
  result.kv.blocks_per_sequence = ceil_div(context, page);
  result.kv.bytes_per_sequence =
      checked_add(checked_mul(checked_mul(result.kv.blocks_per_sequence, page, "tokens"), cell, "kv bytes"),
                  tf.state_bytes_per_sequence, "kv bytes");
  result.kv.bytes_per_batch = checked_mul(result.kv.bytes_per_sequence, options.batch, "kv bytes per batch");
  result.weights = decision.weights;
  result.assumptions.push_back(decision.weights_assumption);

  const std::optional<std::uint64_t> total = total_memory(gpu, options);
  if (!total) return result;

  double fraction = 0.0;
  std::string why;
  if (options.sglang.mem_fraction_static) {
    fraction = check_fraction(*options.sglang.mem_fraction_static, "--mem-fraction-static");
    why = "given";
  } else if (sglang_version.at_least(0, 4, 7)) {
    const double gpu_mib = static_cast<double>(*total) / (1024.0 * 1024.0);
    const double p = static_cast<double>(options.tp) * options.pp;
    double reserved_gib = 0.0;
    if (gpu_mib < 35 * 1024.0)
      reserved_gib = 2.8 + p / 10.0;
    else if (gpu_mib < 90 * 1024.0)
      reserved_gib = 9.5 + p / 2.0;
    else if (gpu_mib < 160 * 1024.0)
      reserved_gib = 12.0 + p / 2.0;
    else
      reserved_gib = 32.0;
    fraction = std::round((gpu_mib - reserved_gib * 1024.0) / gpu_mib * 1000.0) / 1000.0;
    why = "server_args.py: round((gpu_mem - reserved) / gpu_mem, 3) with reserved " +
          fixed_text(reserved_gib, 2) +
          " GiB for this device size and tp x pp = " + std::to_string(options.tp * options.pp) +
          " (gpu_mem from nvidia-smi there, the runtime's figure here)";
  } else {
    fraction = options.tp >= 16  ? 0.79
               : options.tp >= 8 ? 0.81
               : options.tp >= 4 ? 0.85
               : options.tp >= 2 ? 0.87
                                 : 0.88;
    why = "server_args.py (before ~0.4.7): by TP size";
  }
  result.assumptions.push_back({"mem_fraction_static", fixed_text(fraction, 3), why});
  // 0.4.x model_runner.py ModelRunner.__init__, "Automatically reduce --mem-fraction-static to
  // ... because this is a multimodal model": the fraction, given or defaulted, is multiplied by
  // 0.95 (0.4.4.post2) or 0.90 (0.4.5 - 0.4.7; read in each wheel) when the model has a vision
  // tower. 0.5.2 moved this to server_args.py adjust_mem_fraction_for_vlm, applied only to the
  // default (not modelled). A Gemma-3-4B log on an H200 (sglang-pr4826.log, PR #4826) gives
  // 834,615 tokens = 0.88 x 0.95 = 0.836 exactly; 0.88 alone gives 882,844.
  if (model.vision_params > 0 && !sglang_version.at_least(0, 5)) {
    const double factor = sglang_version.at_least(0, 4, 5) ? 0.90 : 0.95;
    fraction *= factor;
    result.assumptions.push_back(
        {"mem_fraction_static (multimodal)", fixed_text(fraction, 3),
         "x " + fixed_text(factor, 2) + " for a model with a vision tower (model_runner.py, SGLang " +
             std::string(sglang_version.at_least(0, 4, 5) ? "0.4.5 - 0.4.7" : "0.4.4") + ")"});
  }

  // Free memory at start-up = total - CUDA context / NCCL (not visible to the fraction).
  // 0.5.2x logs put it at about 0.86 GiB (issue #13's comparison with published logs).
  const bool recent = sglang_version.at_least(0, 5, 23);
  std::uint64_t context_bytes = static_cast<std::uint64_t>((recent ? 0.86 : 0.5) * kGiB);
  std::string ctx_why = recent ? "CUDA context + NCCL before the first snapshot: 0.86 GiB in 0.5.2x logs "
                                 "(issue #13; range 0.5-1.2)"
                               : "CUDA context + NCCL before the first snapshot: 0.5 GiB (range 0.3-1.0)";
  if (options.overheads.non_torch_gib) {
    context_bytes = gib_to_bytes(*options.overheads.non_torch_gib, "--non-torch-gib");
    ctx_why = "given";
  }
  result.assumptions.push_back({"start-up overhead", gib_text(context_bytes), ctx_why});
  Capacity cap;
  cap.gpu_memory_bytes = *total;
  const double free_start = static_cast<double>(*total > context_bytes ? *total - context_bytes : 0);
  const double free_after = free_start - static_cast<double>(result.weights.bytes_per_rank);
  const double rest = free_after - free_start * (1.0 - fraction);
  cap.requested_bytes = static_cast<std::uint64_t>(free_start * fraction);
  cap.overhead_bytes = context_bytes;

  // Hybrid models: the recurrent state pool is carved first
  // (model_runner_kv_cache_mixin.py): mamba_budget = rest x r / (1 + r) with
  // mamba_full_memory_ratio r = 0.9; max_mamba_cache_size = mamba_budget // per-request state
  // (--max-mamba-cache-size, here --max-num-seqs, overrides); the attention pool gets the rest.
  double rest_kv = rest;
  if (tf.state_bytes_per_sequence > 0 && cell > 0 && rest > 0) {
    const double per_req = static_cast<double>(tf.state_bytes_per_sequence);
    const double budget = rest * 0.9 / 1.9;
    // 0.5.23 solves for the slots with the pool's padding slot inside the budget:
    // (budget - per_req) // per_req (mem_cache/kv_cache_configurator.py, "Solve jointly ...
    // including the pool's +1 padding slot"); earlier releases were not read for it.
    std::uint64_t slots = static_cast<std::uint64_t>(recent ? std::max(0.0, (budget - per_req) / per_req)
                                                            : budget / per_req);
    std::string slot_why = recent ? "(rest x 0.9 / 1.9 - state) // state per request (mamba_full_memory_ratio 0.9)"
                                  : "rest x 0.9 / 1.9 // state per request (mamba_full_memory_ratio 0.9)";
    if (options.sglang.max_mamba_cache_size) {
      slots = *options.sglang.max_mamba_cache_size;
      slot_why = "--max-mamba-cache-size";
    } else if (recent && options.sglang.disable_radix_cache && options.sglang.max_running_requests) {
      // kv_cache_configurator.py (0.5.23): with the radix cache off and max_running_requests
      // set, max_mamba_cache_size = max(1, max_running_requests // attn_dp_size).
      slots = std::max<std::uint64_t>(1, *options.sglang.max_running_requests);
      slot_why = "--max-running-requests with --disable-radix-cache";
    }
    // MambaPool allocates size + 1 state slots (sglang/srt/mem_cache/memory_pool.py, conv and
    // temporal states shaped (num_mamba_layers, size + 1, ...); read in 0.5.23).
    const double carve = static_cast<double>(recent ? slots + 1 : slots) * per_req;
    rest_kv -= carve;
    result.assumptions.push_back(
        {"recurrent state pool",
         std::to_string(slots) + " slots, " + gib_text(static_cast<std::uint64_t>(carve)), slot_why});
  }
  cap.available_kv_bytes = rest_kv > 0 ? static_cast<std::uint64_t>(rest_kv) : 0;
  std::uint64_t tokens = cell > 0 ? cap.available_kv_bytes / cell : 0;
  // --max-total-tokens bounds the profiled (page-aligned) pool from above
  // (mem_cache/kv_cache_configurator.py _apply_token_constraints, 0.5.23: min(token_capacity,
  // max_total_tokens), a warning when it is the larger); config_from_budget then re-sizes the
  // pool from the capped count, aligned to the page again.
  tokens = tokens / page * page;
  if (options.sglang.max_total_tokens) {
    if (*options.sglang.max_total_tokens > tokens)
      result.warnings.push_back("max_total_tokens=" + std::to_string(*options.sglang.max_total_tokens) +
                                " is larger than the profiled value " + std::to_string(tokens) +
                                ". Use the profiled value instead.");
    tokens = std::min(tokens, *options.sglang.max_total_tokens) / page * page;
  }
  cap.kv_tokens = tokens;
  cap.num_blocks = tokens / page;
  cap.page_bytes = checked_mul(page, cell, "page bytes");
  cap.max_model_len = context_len;
  cap.max_concurrency =
      context_len > 0 ? static_cast<double>(tokens) / static_cast<double>(context_len) : 0.0;
  cap.fits = tokens >= context_len && tokens > 0;
  cap.largest_max_model_len = tokens;
  cap.limiting_rank = stage * options.tp;
  // --max-running-requests caps the requests running at once; unset, SGLang derives its cap
  // from the pool (not modelled here), so no cap is stated.
  if (options.sglang.max_running_requests) {
    cap.max_running = *options.sglang.max_running_requests;
    cap.max_running_source = "--max-running-requests";
  }
  if (rest_kv <= 0) {
    result.warnings.push_back("Not enough memory. Please try to increase --mem-fraction-static.");
  } else if (!cap.fits) {
    result.warnings.push_back("context length " + std::to_string(context_len) +
                              " does not fit: the pool holds " + std::to_string(tokens) + " tokens");
  }
  // Log lines (model_runner / memory_pool).
  result.engine_log.push_back("Memory profiling: available_gpu_memory=" + fixed_text(free_after / kGiB, 2) +
                              " GB, total_gpu_memory=" + fixed_text(free_start / kGiB, 2) +
                              " GB, mem_fraction_static=" + fixed_text(fraction, 2) +
                              ", rest_memory=" + fixed_text(rest / kGiB, 2) + " GB");
  if (tokens > 0) {
    // K and V buffers hold (size + page_size) slots; MLA keeps one latent buffer.
    std::uint64_t k_bytes = 0, v_bytes = 0;
    for (std::uint32_t i : pp_stage_layers(model.num_layers(), options.pp, stage)) {
      const LayerSpec& l = model.layers[i];
      if (!l.allocates_kv()) continue;
      const std::uint64_t heads = kv_heads_per_rank(l, options.tp);
      if (l.kind == LayerKind::mla) {
        k_bytes += layer_kv_bytes_per_token(l, types, options.tp) * (tokens + page);
      } else {
        k_bytes += heads * types.k.row_bytes(l.head_dim_k) * (tokens + page);
        v_bytes += heads * types.v.row_bytes(l.head_dim_v) * (tokens + page);
      }
    }
    const bool dtype_printed = sglang_version.at_least(0, 5, 23);
    const std::string dtype = torch_dtype_name(types.k);
    const std::string n = std::to_string(tokens), k = fixed_text(to_gib(k_bytes), 2),
                      v = fixed_text(to_gib(v_bytes), 2);
    const bool mla = model.count(LayerKind::mla) > 0;  // MLATokenToKVPool: one latent buffer
    result.engine_log.push_back(mla ? (dtype_printed ? kSglangMlaPoolLine.print({dtype, n, k})
                                                     : kSglangMlaPoolLine.print_form(1, {n, k}))
                                    : (dtype_printed ? kSglangPoolLine.print({dtype, n, k, v})
                                                     : kSglangPoolLine.print_form(1, {n, k, v})));
    result.engine_log.push_back("max_total_num_tokens=" + std::to_string(tokens) +
                                ", context_len=" + std::to_string(context_len));
  }
  result.capacity = cap;
  return result;
}

}  // namespace

std::unique_ptr<Engine> make_sglang_engine() { return std::make_unique<SglangEngine>(); }

}  // namespace kvsight
