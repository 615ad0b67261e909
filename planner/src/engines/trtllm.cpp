// TensorRT-LLM KV-cache budget: a fraction of the memory still free once the weights
// and the runtime's activations are in place, cut into fixed blocks.
//
// Sources (NVIDIA/TensorRT-LLM):
//   tensorrt_llm/llmapi/llm_args.py KvCacheConfig: free_gpu_memory_fraction (default 0.9),
//     tokens_per_block (default 32), max_tokens
//   cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: blocks in the primary pool =
//     (free x fraction) / (tokens_per_block x bytes per token of all layers on the rank); logs
//     "Memory usage when calculating max tokens in paged kv cache: total: %.2f GiB, available: %.2f GiB",
//     "Number of blocks in KV cache primary pool: %d", "Max KV cache pages per sequence: %d",
//     "Number of tokens per block: %d.", "[MemUsageChange] Allocated %0.2f GiB for max tokens in
//     paged KV cache (%d)." (the last two read in kvCacheManager.cpp; the others as logged).
// KV heads per rank under TP follow the same max(1, kv_heads / tp) replication as vLLM.
#include <algorithm>
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

const std::vector<std::string>& trtllm_versions() {
  static const std::vector<std::string> v = {"0.20.0", "1.0.0", "1.1.0"};
  return v;
}

class TrtllmEngine final : public Engine {
 public:
  std::string name() const override { return "trtllm"; }
  std::vector<std::string> known_versions() const override { return trtllm_versions(); }
  PlanResult budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                    const EngineOptions& options) const override;

  std::string display_name() const override { return "TensorRT-LLM"; }
  std::vector<std::string> aliases() const override { return {"tensorrt-llm", "tensorrt_llm", "trt-llm"}; }
  std::string default_version() const override { return trtllm_versions().back(); }
  bool has_gate_rules() const override { return true; }
  // trtllm-serve (tensorrt_llm/commands/serve.py): --tp_size, --pp_size, --max_seq_len,
  // --kv_cache_free_gpu_memory_fraction; tokens_per_block is a KvCacheConfig field
  // (extra LLM-API options), given here as --tokens-per-block.
  // Its server command and what kvsight does with each flag (trtllm_launch.cpp, issue #22).
  const Launcher* launcher() const override { return &engine_detail::trtllm_launcher(); }
  std::vector<EngineFlag> flags() const override {
    return {{OptionField::tensor_parallel_size, {"--tp_size"}},
            {OptionField::pipeline_parallel_size, {"--pp_size"}},
            {OptionField::kv_cache_dtype, {"--kv-cache-dtype"}},
            {OptionField::block_size, {"--tokens-per-block"}},
            {OptionField::max_model_len, {"--max_seq_len", "--max-seq-len"}},
            {OptionField::free_gpu_memory_fraction,
             {"--kv_cache_free_gpu_memory_fraction", "--free-gpu-memory-fraction"}},
            // tensorrt_llm/commands/serve.py (trtllm-serve): requests scheduled at once and
            // tokens per step.
            {OptionField::max_num_seqs, {"--max_batch_size"}},
            {OptionField::max_num_batched_tokens, {"--max_num_tokens"}}};
  }
  // LLM-API KvCacheConfig.dtype.
  std::vector<std::string> kv_cache_dtypes() const override { return {"auto", "fp8", "nvfp4", "int8"}; }
  BlockSizeChoice block_size(const ModelSpec&, const GpuSpec*, const EngineOptions& options) const override {
    return given_or_default_block(
        options, 32, "TensorRT-LLM default tokens_per_block 32", [](std::uint32_t b) { return b >= 1; },
        "a positive number of tokens");
  }
  std::vector<StartupCheck> startup_checks(const ModelSpec& model, const GpuSpec* gpu,
                                           const EngineOptions& options) const override {
    std::vector<StartupCheck> checks;
    if (gpu != nullptr && gpu->vendor != "nvidia")
      checks.push_back({"device vendor", false,
                        "TensorRT-LLM runs on NVIDIA GPUs only; " + gpu->id + " is " + gpu->vendor,
                        "TensorRT-LLM documentation (CUDA only)"});
    checks.push_back(tp_divides_heads_check(model, options, display_name()));
    if (auto kv = kv_heads_split_check(model, options)) checks.push_back(*kv);
    return checks;
  }
  std::unique_ptr<EngineLogReader> log_reader() const override;
};

// The pool line of kvCacheManager.cpp, which budget() prints and explain reads back (log_line.hpp),
// and the two lines 0.5-0.8 printed instead, read only: "Allocate N bytes for k/v cache." and
// "Using N tokens in paged KV cache." (NVIDIA/TensorRT-LLM issues #224 and #1400).
const LogLine kTrtllmPoolLine{
    "{*[TensorRT-LLM][INFO] [MemUsageChange] }Allocated {X:gib} GiB for max tokens in paged KV cache "
    "({N:tokens}){*.}"};
const LogLine kTrtllmBytesLine{"Allocate {N:bytes} bytes for k/v cache"};
const LogLine kTrtllmTokensLine{"Using {N:tokens} tokens in paged KV cache"};

class TrtllmLogReader final : public EngineLogReader {
 public:
  LogLineRead read(std::string_view line, EngineLogFigures& f) override {
    bool read = false;
    read |= kTrtllmPoolLine.read(line, [&](const LogMatch& m) {
      f.available_kv_gib = m.number("gib");
      f.kv_tokens = m.count("tokens");
    });
    read |= kTrtllmBytesLine.read(line,
                                  [&](const LogMatch& m) { f.available_kv_gib = to_gib(m.count("bytes")); });
    read |= kTrtllmTokensLine.read(line, [&](const LogMatch& m) { f.kv_tokens = m.count("tokens"); });
    return read ? LogLineRead::figures : LogLineRead::other;
  }
};

std::unique_ptr<EngineLogReader> TrtllmEngine::log_reader() const {
  return std::make_unique<TrtllmLogReader>();
}

PlanResult TrtllmEngine::budget(const EngineDecision& decision, const ModelSpec& model, const GpuSpec* gpu,
                                const EngineOptions& options) const {
  check_common_options(options);
  refuse_unused_overheads(options, name(), {OverheadFlag::activation, OverheadFlag::non_torch});
  if (model.layers.empty()) throw InputError("--model", "the model has no layers");
  PlanResult result;
  result.engine = "trtllm";
  result.engine_version = decision.version.text;
  if (auto newer = newer_than_known_warning(*this, decision.version)) result.warnings.push_back(*newer);
  const KvTypes& types = decision.kv_types;
  const std::uint32_t tokens_per_block = decision.block.tokens;
  if (model.recurrent && model.count(LayerKind::recurrent) > 0)
    result.notes.push_back(
        "recurrent layers: their state is held outside the paged KV pool (not sized here)");

  const std::uint32_t stage = heaviest_stage(model, types, options);
  const TokenFootprint tf = token_footprint(model, types, options.tp, options.pp, stage);
  // Every attention layer holds every token (sliding windows are a max_attention_window
  // setting over the same pool).
  const std::uint64_t per_token = tf.bytes_per_token_all_layers;
  result.kv.bytes_per_token = tf.bytes_per_token;
  result.kv.bytes_per_token_all_layers = per_token;
  result.kv.pool_bytes_per_token = per_token;
  result.kv.state_bytes_per_sequence = tf.state_bytes_per_sequence;
  result.kv.block_size = tokens_per_block;
  // The user's length (--max_seq_len) drives capacity, as for vLLM; unset, the model's
  // derived maximum (Engine::max_model_len).
  const std::uint64_t max_seq_len = decision.length.tokens;
  const std::uint64_t context = options.context ? options.context : max_seq_len;
  result.kv.context = context;
  result.kv.batch = options.batch;
  result.kv.blocks_per_sequence = ceil_div(context, tokens_per_block);
  const std::uint64_t block_bytes = checked_mul(tokens_per_block, per_token, "block bytes");
  result.kv.bytes_per_sequence =
      checked_mul(result.kv.blocks_per_sequence, block_bytes, "kv bytes per sequence");
  result.kv.bytes_per_batch = checked_mul(result.kv.bytes_per_sequence, options.batch, "kv bytes per batch");
  result.weights = decision.weights;
  result.assumptions.push_back(decision.weights_assumption);

  const std::optional<std::uint64_t> total = total_memory(gpu, options);
  if (!total) return result;

  const double fraction =
      options.trtllm.free_gpu_memory_fraction
          ? check_fraction(*options.trtllm.free_gpu_memory_fraction, "--free-gpu-memory-fraction")
          : 0.9;
  result.assumptions.push_back(
      {"free_gpu_memory_fraction", fixed_text(fraction, 2),
       options.trtllm.free_gpu_memory_fraction ? "given" : "KvCacheConfig default 0.9"});
  // Activations of the warm-up at max_num_tokens (default 8192): the same MLP + hidden
  // estimate as overheads.md; plus the CUDA context and runtime buffers.
  const double T =
      options.trtllm.max_num_tokens ? static_cast<double>(*options.trtllm.max_num_tokens) : 8192.0;
  std::uint64_t act =
      static_cast<std::uint64_t>(T *
                                 (3.0 * static_cast<double>(model.intermediate_size) / options.tp +
                                  4.0 * static_cast<double>(model.hidden_size)) *
                                 2.0);
  std::string act_why = "max_num_tokens " + std::to_string(static_cast<std::uint64_t>(T)) +
                        " x (3I/TP + 4H) x 2 B (estimate, range 0.5x-2x)";
  if (options.overheads.activation_gib) {
    act = gib_to_bytes(*options.overheads.activation_gib, "--activation-gib");
    act_why = "given";
  }
  std::uint64_t runtime = static_cast<std::uint64_t>(0.6 * kGiB);
  std::string runtime_why = "CUDA context, cuBLAS/NCCL workspaces, decoder buffers: 0.6 GiB (range 0.4-1.5)";
  if (options.overheads.non_torch_gib) {
    runtime = gib_to_bytes(*options.overheads.non_torch_gib, "--non-torch-gib");
    runtime_why = "given";
  }
  result.assumptions.push_back({"activations", gib_text(act), act_why});
  result.assumptions.push_back({"runtime overhead", gib_text(runtime), runtime_why});

  Capacity cap;
  cap.gpu_memory_bytes = *total;
  cap.overhead_bytes = act + runtime;
  const std::uint64_t used = checked_add(result.weights.bytes_per_rank, cap.overhead_bytes, "non-KV memory");
  const std::uint64_t free_after = used < *total ? *total - used : 0;
  cap.requested_bytes = free_after;
  cap.available_kv_bytes = static_cast<std::uint64_t>(static_cast<double>(free_after) * fraction);
  cap.page_bytes = block_bytes;
  cap.num_blocks = block_bytes > 0 ? cap.available_kv_bytes / block_bytes : 0;
  cap.kv_tokens = cap.num_blocks * tokens_per_block;
  cap.max_model_len = max_seq_len;
  const std::uint64_t pages = ceil_div(max_seq_len, tokens_per_block);
  cap.max_concurrency = pages > 0 ? static_cast<double>(cap.num_blocks) / static_cast<double>(pages) : 0.0;
  cap.fits = cap.num_blocks >= pages && cap.num_blocks > 0;
  cap.largest_max_model_len = cap.kv_tokens;
  cap.limiting_rank = stage * options.tp;
  // max_batch_size: requests the scheduler runs at once (tensorrt_llm/builder.py BuildConfig
  // max_batch_size = 2048, trtllm-serve's default; commands/serve.py --max_batch_size).
  cap.max_running = options.trtllm.max_batch_size.value_or(2048);
  cap.max_running_source =
      options.trtllm.max_batch_size ? "--max_batch_size" : "TensorRT-LLM default max_batch_size (BuildConfig)";
  result.engine_log.push_back(
      "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: "
      "total: " +
      fixed_text(to_gib(*total), 2) + " GiB, available: " + fixed_text(to_gib(free_after), 2) + " GiB");
  result.engine_log.push_back("[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: " +
                              std::to_string(cap.num_blocks));
  result.engine_log.push_back("[TensorRT-LLM][INFO] Max KV cache pages per sequence: " +
                              std::to_string(pages));
  result.engine_log.push_back(
      "[TensorRT-LLM][INFO] Number of tokens per block: " + std::to_string(tokens_per_block) + ".");
  result.engine_log.push_back(kTrtllmPoolLine.print(
      {fixed_text(to_gib(cap.num_blocks * block_bytes), 2), std::to_string(cap.kv_tokens)}));
  if (!cap.fits)
    result.warnings.push_back("max_seq_len " + std::to_string(max_seq_len) +
                              " does not fit: the pool holds " + std::to_string(cap.kv_tokens) +
                              " tokens; TensorRT-LLM lowers max_seq_len / the "
                              "attention window to fit");
  result.capacity = cap;
  return result;
}

}  // namespace

std::unique_ptr<Engine> make_trtllm_engine() { return std::make_unique<TrtllmEngine>(); }

}  // namespace kvsight
