#pragma once
// A reader of engine start-up logs (vLLM V0/V1, SGLang, llama.cpp, TensorRT-LLM) into typed
// figures, for `kvsight explain --log FILE`: the lines the engines print about memory and KV
// capacity, each figure optional (a log excerpt may lack any of them). Line formats and the
// engine file that prints each: docs/reference/engine-versions.md "Log lines".
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
  std::optional<std::uint64_t> num_gpu_blocks;  // vLLM "# GPU blocks: N"
  std::optional<std::uint64_t> kv_tokens;       // vLLM "GPU KV cache size", SGLang "#tokens", llama.cpp cells
  std::optional<std::uint64_t> max_model_len;   // "Maximum concurrency for N tokens per request" / non-default args
  std::optional<double> max_concurrency;        // "... : X.XXx"
  std::optional<double> kv_size_gib;    // SGLang K + V size ("GB" = 2^30 B, memory_pool.py), llama.cpp MiB
  std::optional<double> kv_needed_gib;  // vLLM "(X GiB KV cache is needed, ..." at max_model_len
  std::optional<std::uint64_t> estimated_max_model_len;  // vLLM "the estimated maximum model length is N"
  std::optional<std::string> engine_version;              // vLLM "vLLM API server version X" / banner "version X"
  std::optional<std::uint32_t> tensor_parallel_size;      // vLLM "non-default args: {... 'tensor_parallel_size': N"
  std::vector<std::string> matched_lines;                // the lines a figure came from, in order
  // llama.cpp "(N cells, L layers, S/T seqs)": S = n_seq_max, T = n_stream (1: a unified cache);
  // kv_tokens is N x T (log_reader.cpp).
  std::optional<std::uint32_t> llamacpp_seqs;
  std::optional<std::uint32_t> llamacpp_streams;
};

// Reads every line it knows; unknown lines are skipped. Never throws on content.
EngineLogFigures read_engine_log(std::string_view text);

}  // namespace kvsight
