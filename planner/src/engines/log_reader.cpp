// Engine start-up log reader (kvsight/engine_log.hpp). Each pattern names the engine file
// that prints the line:
//   vLLM V1  v1/worker/gpu_worker.py        "Available KV cache memory: X GiB"
//            v1/core/kv_cache_utils.py      "GPU KV cache size: N tokens" (0.28+: same line as the
//                                           concurrency), "Maximum concurrency for N tokens per
//                                           request: X.XXx", "# GPU blocks: N" (V1 before PR #13596)
//            v1/worker/gpu_model_runner.py  "Loading model weights took X GB" / "Model loading took
//                                           X GiB", "Graph capturing finished in N secs, took X GiB"
//            v1/worker/gpu_worker.py        "reserved X GiB memory for KV Cache" (kv_cache_memory_bytes)
//            entrypoints/utils.py           "non-default args: {'max_model_len': N,
//                                           'gpu_memory_utilization': X, 'tensor_parallel_size': N, ...}"
//                                           (the flags given, as a Python dict; 0.10+)
//            entrypoints/openai/api_server.py "vLLM API server version X"; the start-up banner
//                                           (utils.py, 0.11+) "version X"
//   vLLM V0  worker/worker.py               "Memory profiling results: total_gpu_memory=XGiB ...
//                                           kv_cache_size=XGiB gpu_memory_utilization=X"
//            executor                       "# GPU blocks: N, # CPU blocks: M"
//   SGLang   srt/mem_cache/memory_pool.py   "KV Cache is allocated. #tokens: N, K size: X GB, V size: X GB"
//   llama.cpp src/llama-kv-cache.cpp        "llama_kv_cache: size = X MiB (N cells, L layers, S/T seqs)":
//                                           N is the cells of one stream, S n_seq_max, T n_stream (1 with
//                                           a unified cache, else S): the cache holds N x T cells (b11312;
//                                           older logs print "S seqs", one stream)
//            v1/core/kv_cache_utils.py      "To serve at least one request with the models's max seq len
//                                           (L), (X GiB KV cache is needed, which is larger than the
//                                           available KV cache memory (Y GiB). ... the estimated maximum
//                                           model length is N" (check_enough_kv_cache_memory)
//   vLLM V0  worker                         "maximum number of tokens that can be stored in KV cache (N)"
//   TRT-LLM  kvCacheManager                 "Allocated X GiB for max tokens in paged KV cache (N)"
//            (0.5-0.8)                      "Allocate N bytes for k/v cache.", "Using N tokens in paged KV
//                                           cache." (issues NVIDIA/TensorRT-LLM #224, #1400)
#include <regex>
#include <string>

#include "kvsight/engine_log.hpp"

namespace kvsight {
namespace {

std::uint64_t digits_of(const std::string& text) {
  std::uint64_t n = 0;
  for (char c : text)
    if (c >= '0' && c <= '9') {
      if (n > (UINT64_MAX - 9) / 10) return UINT64_MAX;  // saturate: a log figure never needs 20 digits
      n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
  return n;
}

double number_of(const std::string& text) {
  try {
    return std::stod(text);
  } catch (...) {
    return 0.0;
  }
}

void set_engine(EngineLogFigures& out, const char* engine) {
  if (out.engine.empty()) out.engine = engine;
}

}  // namespace

EngineLogFigures read_engine_log(std::string_view text) {
  static const std::regex available(R"(Available KV cache memory: (-?[0-9.]+) GiB)");
  static const std::regex reserved(R"(reserved (-?[0-9.]+) GiB memory for KV Cache)");
  static const std::regex v0_profile(
      R"(total_gpu_memory=([0-9.]+)GiB.*kv_cache_size=(-?[0-9.]+)GiB.*gpu_memory_utilization=([0-9.]+))");
  static const std::regex kv_size(R"(GPU KV cache size: ([0-9,]+) tokens)");
  static const std::regex concurrency(R"(Maximum concurrency for ([0-9,]+) tokens per request: ([0-9.]+)x)");
  static const std::regex blocks(R"(# GPU blocks: ([0-9]+))");
  static const std::regex weights(R"((?:Loading model weights took|Model loading took) ([0-9.]+) G)");
  static const std::regex graphs(R"(Graph capturing finished in [0-9.]+ secs?, took (-?[0-9.]+) GiB)");
  static const std::regex sglang(
      R"(KV Cache is allocated\. #tokens: ([0-9]+), K size: ([0-9.]+) GB, V size: ([0-9.]+) GB)");
  static const std::regex llamacpp(
      R"(llama_kv_cache[a-z_]*: +size = +([0-9.]+) MiB \( *([0-9]+) cells(?:, +[0-9]+ layers, +([0-9]+)(?:/([0-9]+))? seqs)?)");
  // Builds before the llama_kv_cache rename (~b5000 and older): the context line
  // "llama_new_context_with_model: n_ctx = N" (llama_init_from_model from ~b4500) and
  // "KV self size  = X MiB, K (f16): ..." (src/llama.cpp of llama-cpp-python 0.2.82 / 0.3.8).
  static const std::regex llamacpp_old_ctx(
      R"((?:llama_new_context_with_model|llama_init_from_model): n_ctx +=\s*([0-9]+))");
  static const std::regex llamacpp_old_size(
      R"((?:llama_new_context_with_model|llama_init_from_model): KV self size += +([0-9.]+) MiB)");
  static const std::regex trtllm(R"(Allocated ([0-9.]+) GiB for max tokens in paged KV cache \(([0-9]+)\))");
  static const std::regex not_enough(
      R"(max seq len \(([0-9]+)\), \(([0-9.]+) GiB KV cache is needed.*available KV cache memory \((-?[0-9.]+) GiB\))");
  static const std::regex estimated(R"(estimated maximum model length is ([0-9]+))");
  static const std::regex v0_max_tokens(
      R"(maximum number of tokens that can be stored in KV cache \(([0-9]+)\))");
  static const std::regex trt_bytes(R"(Allocate ([0-9]+) bytes for k/v cache)");
  static const std::regex trt_tokens(R"(Using ([0-9]+) tokens in paged KV cache)");
  static const std::regex vllm_version(
      R"((?:vLLM API server version |utils\.py:[0-9]+\] +(?:[^ ]+ +)*version )v?([0-9]+\.[0-9]+(?:\.[0-9]+)?))");
  static const std::regex non_default_args(R"(non-default args: \{(.*)\})");
  static const std::regex arg_max_model_len(R"('max_model_len': ([0-9]+))");
  static const std::regex arg_utilization(R"('gpu_memory_utilization': ([0-9.]+))");
  static const std::regex arg_tp(R"('tensor_parallel_size': ([0-9]+))");

  EngineLogFigures out;
  bool llamacpp_seen = false;
  std::uint64_t old_n_ctx = 0;  // the n_ctx line that precedes an old "KV self size" line
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string line(text.substr(start, end - start));
    start = end + 1;
    // Fixture comments start with '#'; V0's "# GPU blocks" line does too.
    if (line.empty() || (line[0] == '#' && line.rfind("# GPU blocks", 0) != 0)) continue;
    std::smatch m;
    bool matched = false;
    if (std::regex_search(line, m, available)) {
      out.available_kv_gib = number_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, reserved)) {
      out.available_kv_gib = number_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, v0_profile)) {
      out.total_gpu_gib = number_of(m[1]);
      out.available_kv_gib = number_of(m[2]);
      out.gpu_memory_utilization = number_of(m[3]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, kv_size)) {
      out.kv_tokens = digits_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, concurrency)) {
      out.max_model_len = digits_of(m[1]);
      out.max_concurrency = number_of(m[2]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, blocks)) {
      out.num_gpu_blocks = digits_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, weights)) {
      out.weights_gib = number_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, graphs)) {
      out.cuda_graph_gib = number_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, sglang)) {
      out.kv_tokens = digits_of(m[1]);
      out.kv_size_gib = number_of(m[2]) + number_of(m[3]);
      set_engine(out, "sglang");
      matched = true;
    }
    // An iSWA model (gpt-oss, Gemma 2/3) prints two size lines, the non-SWA cache first
    // (llama-kv-cache-iswa.cpp: "creating non-SWA KV cache", then "creating SWA KV cache"):
    // the first carries n_ctx, so a later line does not replace it.
    if (std::regex_search(line, m, llamacpp) && !llamacpp_seen) {
      llamacpp_seen = true;
      out.kv_size_gib = number_of(m[1]) / 1024.0;
      // Cells per stream x streams ("S/T seqs"; "S seqs" and no seqs part: one stream).
      const std::uint64_t streams = m[4].matched ? digits_of(m[4]) : 1;
      const std::uint64_t cells = digits_of(m[2]), t = streams > 0 ? streams : 1;
      out.kv_tokens = cells > UINT64_MAX / t ? UINT64_MAX : cells * t;  // saturate like digits_of
      if (m[3].matched)
        out.llamacpp_seqs = static_cast<std::uint32_t>(std::min<std::uint64_t>(digits_of(m[3]), 1u << 20));
      if (m[4].matched)
        out.llamacpp_streams = static_cast<std::uint32_t>(std::min<std::uint64_t>(streams, 1u << 20));
      set_engine(out, "llamacpp");
      matched = true;
    }
    if (std::regex_search(line, m, llamacpp_old_ctx)) {
      old_n_ctx = digits_of(m[1]);
      matched = true;
    }
    if (std::regex_search(line, m, llamacpp_old_size) && !llamacpp_seen) {
      llamacpp_seen = true;
      out.kv_size_gib = number_of(m[1]) / 1024.0;
      if (old_n_ctx) out.kv_tokens = old_n_ctx;  // one stream of n_ctx cells in those builds
      set_engine(out, "llamacpp");
      matched = true;
    }
    if (std::regex_search(line, m, trtllm)) {
      out.available_kv_gib = number_of(m[1]);
      out.kv_tokens = digits_of(m[2]);
      set_engine(out, "trtllm");
      matched = true;
    }
    if (std::regex_search(line, m, not_enough)) {
      out.max_model_len = digits_of(m[1]);
      out.kv_needed_gib = number_of(m[2]);
      out.available_kv_gib = number_of(m[3]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, estimated)) {
      out.estimated_max_model_len = digits_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, v0_max_tokens)) {
      out.kv_tokens = digits_of(m[1]);
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, trt_bytes)) {
      out.available_kv_gib = static_cast<double>(digits_of(m[1])) / (1024.0 * 1024.0 * 1024.0);
      set_engine(out, "trtllm");
      matched = true;
    }
    if (std::regex_search(line, m, trt_tokens)) {
      out.kv_tokens = digits_of(m[1]);
      set_engine(out, "trtllm");
      matched = true;
    }
    if (std::regex_search(line, m, vllm_version)) {
      out.engine_version = m[1].str();
      set_engine(out, "vllm");
      matched = true;
    }
    if (std::regex_search(line, m, non_default_args)) {
      const std::string args = m[1].str();
      std::smatch a;
      if (std::regex_search(args, a, arg_max_model_len)) out.max_model_len = digits_of(a[1]);
      if (std::regex_search(args, a, arg_utilization)) out.gpu_memory_utilization = number_of(a[1]);
      if (std::regex_search(args, a, arg_tp)) {
        const std::uint64_t tp = digits_of(a[1]);
        if (tp > 0 && tp <= 4096) out.tensor_parallel_size = static_cast<std::uint32_t>(tp);
      }
      set_engine(out, "vllm");
      matched = true;
    }
    if (matched) out.matched_lines.push_back(line);
  }
  return out;
}

}  // namespace kvsight
