#pragma once
// A reader of engine start-up logs (vLLM V0/V1, SGLang, llama.cpp, TensorRT-LLM) into typed
// figures, for `kvsight explain --log FILE`: the lines the engines print about memory and KV
// capacity, each figure optional (a log excerpt may lack any of them). Each engine reads its own
// lines (EngineLogReader); line formats and the engine file that prints each: the engine's file
// in planner/src/engines and docs/reference/engine-versions.md "Log lines".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvsight {

struct EngineLogFigures {
  std::string engine;  // "vllm", "sglang", "llamacpp", "trtllm"; "" when no known line was found
  std::optional<double> total_gpu_gib;           // vLLM V0 total_gpu_memory
  std::optional<double> gpu_memory_utilization;  // vLLM V0 gpu_memory_utilization
  std::optional<double> weights_gib;       // "Loading model weights took X GB" / "Model loading took X GiB"
  std::optional<double> available_kv_gib;  // vLLM "Available KV cache memory" / V0 kv_cache_size / reserved
  std::optional<double> cuda_graph_gib;    // vLLM "Graph capturing finished ..., took X GiB"
  // vLLM's CUDA-graph estimate, the figure its budget subtracts (0.20+ by default): "Estimated
  // CUDA graph memory: X GiB total" or "CUDA graph pool memory: A GiB (actual), X GiB (estimated)".
  std::optional<double> cuda_graph_estimate_gib;
  // vLLM's profile, printed by 0.10-0.26 ("Memory profiling takes ... torch peak memory increase:
  // XGiB; non-torch forward increase memory: YGiB", a DEBUG line; "Actual usage is W GiB for
  // weight, X GiB for peak activation, Y GiB for non-torch memory, ...").
  std::optional<double> activation_gib;
  std::optional<double> non_torch_gib;
  std::optional<std::uint64_t> num_gpu_blocks;  // vLLM "# GPU blocks: N"
  std::optional<std::uint64_t> kv_tokens;       // vLLM "GPU KV cache size", SGLang "#tokens", llama.cpp cells
  std::optional<std::uint64_t> max_model_len;   // "Maximum concurrency for N tokens per request" / non-default args
  std::optional<double> max_concurrency;        // "... : X.XXx"
  std::optional<double> kv_size_gib;    // SGLang K + V size ("GB" = 2^30 B, memory_pool.py), llama.cpp MiB
  // SGLang "Load weight begin. avail mem=X GB": free memory before the weights, the smallest over
  // the ranks that print it (the budget's pre-load snapshot, model_runner.py).
  std::optional<double> pre_load_free_gib;
  // SGLang "Mamba Cache is allocated. max_mamba_cache_size: N, conv_state size: A GB, ssm_state
  // size: B GB": the state pool's requests and its conv + ssm bytes (N + 1 slots, memory_pool.py).
  std::optional<std::uint64_t> state_slots;
  std::optional<double> state_size_gib;
  std::optional<double> kv_needed_gib;  // vLLM "(X GiB KV cache is needed, ..." at max_model_len
  std::optional<std::uint64_t> estimated_max_model_len;  // vLLM "the estimated maximum model length is N"
  std::optional<std::string> engine_version;              // vLLM "vLLM API server version X" / banner "version X"
  // vLLM "non-default args: {... 'tensor_parallel_size': N": as logged, unchecked; explain validates
  // it as the --tp flag and names tensor_parallel_size_line (1-based) when it refuses it.
  std::optional<std::uint64_t> tensor_parallel_size;
  std::size_t tensor_parallel_size_line = 0;
  std::vector<std::string> matched_lines;                // the lines a figure came from, in order
  // llama.cpp "(N cells, L layers, S/T seqs)": S = n_seq_max, T = n_stream (1: a unified cache);
  // kv_tokens is N x T (llamacpp.cpp, its log reader).
  std::optional<std::uint32_t> llamacpp_seqs;
  std::optional<std::uint32_t> llamacpp_streams;
};

// What one log line was to an engine's reader.
enum class LogLineRead {
  other,    // not one of the engine's lines
  figures,  // the engine's line, read into the figures: the log is this engine's
  context,  // the engine's line, kept for a later one (llama.cpp's old n_ctx line); names no engine
};

// An engine's reader of the start-up lines it prints (Engine::log_reader, kvsight/budget.hpp),
// one per log: it may carry what a line said to a later line. Each engine defines the format of
// its lines once, beside the code that prints them (planner/src/engines/log_line.hpp).
class EngineLogReader {
 public:
  virtual ~EngineLogReader() = default;
  // Reads the figures of `line` into `figures`. Never throws on content.
  virtual LogLineRead read(std::string_view line, EngineLogFigures& figures) = 0;
  // Whether `line`, which starts with '#' as a log excerpt's comment does, starts one of the
  // engine's lines (vLLM V0's "# GPU blocks: N").
  virtual bool starts_line(std::string_view) const { return false; }
};

// The longest log line read: 1 MiB. The longest real start-up lines are vLLM's "non-default
// args" with a chat template in it (about 65,000 characters) and a redirected progress bar's
// '\r'-joined updates (a few hundred of ~150 characters); 1 MiB is 16x the longest of them.
inline constexpr std::size_t kMaxLogLineBytes = 1u << 20;

// Reads every line some engine's reader knows; unknown lines are skipped. Throws InputError
// ("--log") for a log it refuses: a line longer than kMaxLogLineBytes, or lines of two engines
// (each named with the first line it read); never for a line's content otherwise.
EngineLogFigures read_engine_log(std::string_view text);

}  // namespace kvsight
