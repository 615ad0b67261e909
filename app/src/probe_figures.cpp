// The figures of `kvsight probe` (kvsight/app/probe.hpp). The probes' CSV has always been
// their readable table (texts with separators and units) and probe attention's its report
// rows: kept so, each cell written once as the text both views print (issue #26: no output
// changes). Every result that reaches here passed its reference check (a failed one throws
// DeviceError in probes/, exit 3).
#include <nlohmann/json.hpp>

#include "kvsight/app/probe.hpp"
#include "kvsight/number_text.hpp"

namespace kvsight::app {

namespace {

namespace kp = kvsight::probes;

// A cell the CSV prints as the table does.
FigureCell text_cell(const std::string& text) { return {text, text}; }

// A table whose CSV header is its readable one.
FigureTable text_table(std::string title, const std::vector<std::string>& labels,
                       const std::vector<bool>& right) {
  FigureTable table;
  table.title = std::move(title);
  for (std::size_t c = 0; c < labels.size(); ++c) table.columns.push_back({labels[c], labels[c], right[c]});
  return table;
}

// A line of the footer with a blank line above it (above the first, the renderer's).
void add_paragraph(FigureDoc& doc, std::string line) {
  if (!doc.footer.empty()) doc.footer.push_back("");
  doc.footer.push_back(std::move(line));
}

std::string point_status(bool correct) { return correct ? "passed" : "FAILED"; }

std::string shape_text(const kp::AttentionShape& s) {
  return "head_dim " + std::to_string(s.head_dim) + ", block " + std::to_string(s.block_size) + ", " +
         std::to_string(s.kv_heads) + " KV / " + std::to_string(s.q_heads) + " Q heads, batch " +
         std::to_string(s.batch) + ", " + s.dtype + (s.kv_dtype == "auto" ? "" : ", K/V " + s.kv_dtype);
}

}  // namespace

FigureDoc probe_info_figures(const std::vector<kp::BackendInfo>& backends) {
  FigureDoc doc;
  doc.sections.push_back(json_object_section({{"backends", backends}}));
  FigureTable table = text_table("Probe backends (memory in GiB = 2^30 bytes)",
                                 {"backend", "status", "device", "arch", "memory total", "memory free",
                                  "SM/CU", "LLC MiB", "clock MHz", "wave"},
                                 {false, false, false, false, true, true, true, true, true, true});
  for (const kp::BackendInfo& backend : backends) {
    if (backend.devices.empty()) {
      std::vector<FigureCell> row = {text_cell(backend.name), text_cell(backend.status)};
      row.resize(table.columns.size(), text_cell("-"));
      table.rows.push_back(std::move(row));
    }
    for (const kp::DeviceInfo& device : backend.devices) {
      table.rows.push_back(
          {text_cell(backend.name), text_cell(backend.status), text_cell(device.name), text_cell(device.arch),
           text_cell(gib_text(device.memory_total)), text_cell(gib_text(device.memory_free)),
           text_cell(std::to_string(device.multiprocessors)),
           text_cell(fixed_text(static_cast<double>(device.last_level_cache) / (1024.0 * 1024.0), 1)),
           text_cell(fixed_text(device.clock_mhz, 0)), text_cell(std::to_string(device.wave_size))});
      if (device.cpu_kernel.empty()) continue;
      add_paragraph(doc, "cpu kernel: " + device.cpu_kernel + " (--cpu-kernel chooses)");
    }
  }
  doc.tables.push_back(std::move(table));
  doc.csv_footer = true;  // the cpu kernel line has always followed the CSV too
  return doc;
}

FigureDoc probe_bandwidth_figures(const kp::BandwidthResult& result) {
  FigureDoc doc;
  doc.sections.push_back(json_object_section(result));
  FigureTable table =
      text_table("Bandwidth on " + result.device + " (" + result.backend + "), buffer " +
                     commas_text(result.buffer_bytes) + " bytes, GB/s = 1e9 bytes/s",
                 {"kernel", "bytes", "median us", "p10 us", "p90 us", "spread", "GB/s", "check"},
                 {false, true, true, true, true, true, true, false});
  const auto row = [&](const std::string& name, std::uint64_t bytes, const kp::Timing& t, double gbps) {
    table.rows.push_back({text_cell(name), text_cell(commas_text(bytes)),
                          text_cell(fixed_text(t.median_us, 1)), text_cell(fixed_text(t.p10_us, 1)),
                          text_cell(fixed_text(t.p90_us, 1)), text_cell(fixed_text(t.spread, 3)),
                          text_cell(fixed_text(gbps, 2)), text_cell(point_status(result.correct))});
  };
  row("read", result.read_bytes, result.read, result.read_gbps);
  row("copy", result.copy_bytes, result.copy, result.copy_gbps);
  doc.tables.push_back(std::move(table));
  return doc;
}

FigureDoc probe_attention_figures(const kp::AttentionResult& result) {
  FigureDoc doc;
  doc.title =
      "Paged decode attention: " + result.kernel + " on " + result.device + " (" + result.backend + ")";
  doc.csv_readable = true;
  const kp::ProbePoint& p = result.point;
  doc.sections.push_back(
      {"shape",
       {shown_figure("shape", shape_text(result.shape), ""),
        shown_figure("context", commas_text(p.context), "tokens per sequence"),
        shown_figure("splits", std::to_string(p.splits), result.kernel == "splitkv" ? "split-KV" : "")}});
  doc.sections.push_back(
      {"timing",
       {shown_figure("time", fixed_text(p.time_us, 2) + " us",
              "median of " + std::to_string(result.repeats) + " runs after " + std::to_string(result.warmup) +
                  " warm-up"),
        shown_figure("spread", fixed_text(p.spread, 3), "(p90 - p10) / median"),
        shown_figure("bytes", commas_text(p.bytes), "K+V for the context + block table + seq lens + q + out"),
        shown_figure("bandwidth", fixed_text(p.gbps, 2) + " GB/s", "1e9 bytes/s"),
        shown_figure("input sets", std::to_string(p.buffer_sets), "rotated between runs")}});
  doc.sections.push_back({"check",
                          {shown_figure("reference", point_status(p.correct), "float64 on the same inputs"),
                           shown_figure("max relative error", fixed_text(p.max_error * 1e6, 3) + "e-6",
                                 "bound " + fixed_text(p.error_bound * 1e6, 1) + "e-6")}});
  doc.sections.push_back(json_object_section(result));
  return doc;
}

FigureDoc probe_sweep_figures(const std::vector<kp::SweepResult>& results,
                              const std::vector<std::string>& kernels,
                              const std::vector<std::uint64_t>& contexts) {
  FigureDoc doc;
  const kp::SweepResult& first = results.front();
  nlohmann::json out = {
      {"backend", first.backend}, {"device", first.device}, {"shape", first.shape}, {"kernels", kernels}};
  for (const kp::SweepResult& result : results) out[result.kernel] = result;
  doc.sections.push_back(json_object_section(out));

  std::vector<std::string> labels = {"context"};
  for (const kp::SweepResult& result : results) {
    labels.push_back(result.kernel + " us");
    labels.push_back(result.kernel + " GB/s");
    if (result.kernel == "splitkv") labels.push_back("splits");
  }
  labels.push_back("bytes");
  labels.push_back("check");
  std::vector<bool> right(labels.size(), true);
  right.back() = false;
  FigureTable table =
      text_table("Decode sweep on " + first.device + " (" + first.backend + "): " + shape_text(first.shape),
                 labels, right);
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    std::vector<FigureCell> row = {text_cell(commas_text(contexts[i]))};
    bool correct = true;
    for (const kp::SweepResult& result : results) {
      const kp::ProbePoint& p = result.points[i];
      row.push_back(text_cell(fixed_text(p.time_us, 1)));
      row.push_back(text_cell(fixed_text(p.gbps, 2)));
      if (result.kernel == "splitkv") row.push_back(text_cell(std::to_string(p.splits)));
      correct = correct && p.correct;
    }
    row.push_back(text_cell(commas_text(first.points[i].bytes)));
    row.push_back(text_cell(point_status(correct)));
    table.rows.push_back(std::move(row));
  }
  doc.tables.push_back(std::move(table));
  for (const kp::SweepResult& result : results) {
    add_paragraph(doc, result.kernel + ": slope " + fixed_text(result.slope_us_per_token, 4) +
                           " us per context token (least squares), growth " + fixed_text(result.growth, 2) +
                           "x (last / first time)");
  }
  return doc;
}

}  // namespace kvsight::app
