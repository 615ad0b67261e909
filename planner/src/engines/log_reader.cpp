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
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    // Comments of log excerpts (tests/fixtures/logs) start with '#'; so does vLLM V0's
    // "# GPU blocks" line.
    if (line[0] == '#' && std::none_of(readers.begin(), readers.end(),
                                       [&](const Reader& r) { return r.reader->starts_line(line); }))
      continue;
    bool matched = false;
    for (Reader& r : readers) {
      const LogLineRead read = r.reader->read(line, out);
      if (read == LogLineRead::other) continue;
      matched = true;
      if (read == LogLineRead::figures && out.engine.empty()) out.engine = r.engine;
    }
    if (matched) out.matched_lines.emplace_back(line);
  }
  return out;
}

}  // namespace kvsight
