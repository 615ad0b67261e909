#pragma once
// A small self-contained SVG line plot for --plot: linear axes with ticks, one
// polyline per series (or markers only), a legend. Written to a temporary name and
// renamed, so a reader never sees half a file.
#include <string>
#include <utility>
#include <vector>

namespace kvsight::cli {

struct PlotSeries {
  std::string name;
  std::string color;  // "#1f77b4"
  std::vector<std::pair<double, double>> points;
  bool markers_only = false;  // published points: markers, no line
  bool dashed = false;
};

struct Plot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
};

// The SVG text (exposed for tests).
std::string render_svg(const Plot& plot);
// Writes render_svg(plot) to path atomically; throws InputError("--plot", ...) on failure.
void write_svg(const Plot& plot, const std::string& path);

}  // namespace kvsight::cli
