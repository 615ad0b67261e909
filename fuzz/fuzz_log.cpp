// Fuzzes the engine start-up log reader (kvsight::read_engine_log, `kvsight explain --log`),
// which reads logs users paste: a chat template in vLLM's "non-default args", a profiling line
// of 65,000 characters, invalid UTF-8 (issue #25 class 1: a backtracking regex crashed on one
// long line). The reader never throws on content; every figure it accepts must be a finite
// number, non-negative unless the engine prints it signed (a NaN would be replayed as a
// confident wrong term),
// each figure must come with the line it was read from, and a log with no known line names no
// engine.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_common.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"

using namespace kvsight;
using kvsight::fuzz::require;

namespace {

void require_figure(const std::optional<double>& value, const char* name, bool signed_ok = false) {
  if (!value) return;
  require(std::isfinite(*value), std::string(name) + " not finite");
  require(signed_ok || *value >= 0, std::string(name) + " negative");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  EngineLogFigures f;
  try {
    f = read_engine_log(text);
  } catch (const InputError& e) {
    // A refusal is an answer (issue #25: a line over the cap, lines of two engines, a logged TP
    // the flag would refuse): it must name the log.
    require(std::string(e.what()).rfind("--log", 0) == 0, "a refusal that does not name --log");
    return 0;
  }
  for (const auto& [value, name] :
       {std::pair{f.total_gpu_gib, "total_gpu_gib"}, {f.gpu_memory_utilization, "gpu_memory_utilization"},
        {f.weights_gib, "weights_gib"}, {f.max_concurrency, "max_concurrency"}, {f.kv_size_gib, "kv_size_gib"},
        {f.kv_needed_gib, "kv_needed_gib"}})
    require_figure(value, name);
  // vLLM prints these signed: available KV memory below 0 when the budget is exceeded, a
  // graph capture that freed memory (planner/src/engines/vllm.cpp, their {-X} fields).
  require_figure(f.available_kv_gib, "available_kv_gib", true);
  require_figure(f.cuda_graph_gib, "cuda_graph_gib", true);
  const bool any = f.total_gpu_gib || f.gpu_memory_utilization || f.weights_gib || f.available_kv_gib ||
                   f.cuda_graph_gib || f.num_gpu_blocks || f.kv_tokens || f.max_model_len || f.max_concurrency ||
                   f.kv_size_gib || f.kv_needed_gib || f.estimated_max_model_len || f.tensor_parallel_size;
  require(!any || !f.matched_lines.empty(), "a figure without the line it was read from");
  require(!f.matched_lines.empty() || f.engine.empty(), "an engine named with no line read");
  for (const std::string& line : f.matched_lines)
    require(text.find(line) != std::string::npos, "a matched line that is not in the log");
  return 0;
}
