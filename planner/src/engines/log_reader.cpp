// Engine start-up log reader (kvsight/engine_log.hpp): every line goes to the reader of each
// engine that prints lines (Engine::log_reader); each engine defines the format of its lines
// once, in its own file, beside the code that prints them (log_line.hpp, issue #26 item 4):
// vllm.cpp, sglang.cpp, trtllm.cpp, llamacpp.cpp.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kvsight/budget.hpp"
#include "kvsight/engine_log.hpp"
#include "kvsight/error.hpp"

namespace kvsight {

EngineLogFigures read_engine_log(std::string_view text) {
  struct Reader {
    std::string engine;
    std::unique_ptr<EngineLogReader> reader;
  };
  std::vector<Reader> readers;
  for (const auto& engine : all_engines())
    if (auto reader = engine->log_reader()) readers.push_back({engine->name(), std::move(reader)});

  EngineLogFigures out;
  std::size_t engine_line = 0;  // the first line of out.engine's figures
  std::size_t start = 0;
  for (std::size_t number = 1; start <= text.size(); ++number) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.size() > kMaxLogLineBytes)
      throw InputError("--log",
                       "line " + std::to_string(number) + " is " + std::to_string(line.size()) +
                           " bytes long; allowed: at most " + std::to_string(kMaxLogLineBytes) +
                           " (1 MiB; the longest real start-up line, vLLM's \"non-default args\" with "
                           "a chat template, is about 65,000)");
    if (line.empty()) continue;
    // Comments of log excerpts (tests/fixtures/logs) start with '#'; so does vLLM V0's
    // "# GPU blocks" line.
    if (line[0] == '#' && std::none_of(readers.begin(), readers.end(),
                                       [&](const Reader& r) { return r.reader->starts_line(line); }))
      continue;
    bool matched = false;
    const auto tensor_parallel_size = out.tensor_parallel_size;
    for (Reader& r : readers) {
      const LogLineRead read = r.reader->read(line, out);
      if (read == LogLineRead::other) continue;
      matched = true;
      if (read != LogLineRead::figures) continue;
      if (out.engine.empty()) {
        out.engine = r.engine;
        engine_line = number;
      } else if (out.engine != r.engine) {
        // One start-up is one engine's: a log of two would be replayed as one, figures mixed.
        throw InputError("--log", "holds lines of two engines: " + out.engine + " (line " +
                                      std::to_string(engine_line) + ") and " + r.engine + " (line " +
                                      std::to_string(number) + "); give the log of one engine's start-up");
      }
    }
    if (out.tensor_parallel_size != tensor_parallel_size) out.tensor_parallel_size_line = number;
    if (matched) out.matched_lines.emplace_back(line);
  }
  return out;
}

}  // namespace kvsight
