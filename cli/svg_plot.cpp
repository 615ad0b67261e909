// SVG line plot (see svg_plot.hpp).
#include "svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvsight/error.hpp"
#include "kvsight/number_text.hpp"
#include "output_file.hpp"

namespace kvsight::cli {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '&')
      out += "&amp;";
    else if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

std::string num(double value) { return fixed_text(value, 2); }

// A "nice" tick step (1, 2, 5 x 10^k) giving about `count` ticks over span.
double nice_step(double span, int count) {
  if (span <= 0) return 1.0;
  const double raw = span / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;
  const double nice = fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10;
  return nice * power;
}

std::string tick_label(double value) {
  char buffer[32];
  if (std::fabs(value) >= 1000 && std::fmod(value, 1000.0) == 0) {
    std::snprintf(buffer, sizeof buffer, "%.0fK", value / 1000.0);
  } else if (std::fabs(value - std::round(value)) < 1e-9) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f", value);
  }
  return buffer;
}

}  // namespace

std::string render_svg(const Plot& plot) {
  // The legend sits right of the plot: the canvas widens so the longest name fits
  // (12 px sans-serif, at most about 7.5 px per character; 46 px of swatch and gap).
  std::size_t longest = 0;
  for (const PlotSeries& series : plot.series) longest = std::max(longest, series.name.size());
  const double right = std::max(220.0, 46.0 + 7.5 * static_cast<double>(longest) + 10.0);
  const double width = 580 + right, height = 500, left = 80, top = 50, bottom = 60;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double x_max = 0, y_max = 0;
  for (const PlotSeries& series : plot.series) {
    for (const auto& [x, y] : series.points) {
      x_max = std::max(x_max, x);
      y_max = std::max(y_max, y);
    }
  }
  const double x_step = nice_step(x_max, 8), y_step = nice_step(y_max, 6);
  x_max = std::max(x_step, std::ceil(x_max / x_step) * x_step);
  y_max = std::max(y_step, std::ceil(y_max / y_step) * y_step);
  auto sx = [&](double x) { return left + x / x_max * plot_w; };
  auto sy = [&](double y) { return top + plot_h - y / y_max * plot_h; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
      << escape(plot.title) << "</text>\n";
  // Grid and ticks.
  for (double x = 0; x <= x_max + 1e-9; x += x_step) {
    svg << "<line x1=\"" << num(sx(x)) << "\" y1=\"" << num(top) << "\" x2=\"" << num(sx(x)) << "\" y2=\""
        << num(top + plot_h) << "\" stroke=\"#e5e5e5\"/>\n";
    svg << "<text x=\"" << num(sx(x)) << "\" y=\"" << num(top + plot_h + 18) << "\" text-anchor=\"middle\">"
        << tick_label(x) << "</text>\n";
  }
  for (double y = 0; y <= y_max + 1e-9; y += y_step) {
    svg << "<line x1=\"" << num(left) << "\" y1=\"" << num(sy(y)) << "\" x2=\"" << num(left + plot_w)
        << "\" y2=\"" << num(sy(y)) << "\" stroke=\"#e5e5e5\"/>\n";
    svg << "<text x=\"" << num(left - 8) << "\" y=\"" << num(sy(y) + 4) << "\" text-anchor=\"end\">"
        << tick_label(y) << "</text>\n";
  }
  svg << "<rect x=\"" << num(left) << "\" y=\"" << num(top) << "\" width=\"" << num(plot_w) << "\" height=\""
      << num(plot_h) << "\" fill=\"none\" stroke=\"black\"/>\n";
  svg << "<text x=\"" << num(left + plot_w / 2) << "\" y=\"" << num(height - 15)
      << "\" text-anchor=\"middle\">" << escape(plot.x_label) << "</text>\n";
  svg << "<text transform=\"translate(20," << num(top + plot_h / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">" << escape(plot.y_label) << "</text>\n";
  // Series.
  double legend_y = top + 10;
  for (const PlotSeries& series : plot.series) {
    if (!series.markers_only && series.points.size() > 1) {
      svg << "<polyline fill=\"none\" stroke=\"" << series.color << "\" stroke-width=\"2\""
          << (series.dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"";
      for (const auto& [x, y] : series.points) svg << num(sx(x)) << "," << num(sy(y)) << " ";
      svg << "\"/>\n";
    }
    for (const auto& [x, y] : series.points) {
      svg << "<circle cx=\"" << num(sx(x)) << "\" cy=\"" << num(sy(y)) << "\" r=\""
          << (series.markers_only ? "5" : "3") << "\" fill=\""
          << (series.markers_only ? "white" : series.color) << "\" stroke=\"" << series.color
          << "\" stroke-width=\"2\"/>\n";
    }
    svg << "<line x1=\"" << num(left + plot_w + 15) << "\" y1=\"" << num(legend_y) << "\" x2=\""
        << num(left + plot_w + 40) << "\" y2=\"" << num(legend_y) << "\" stroke=\"" << series.color
        << "\" stroke-width=\"2\"" << (series.dashed ? " stroke-dasharray=\"6,4\"" : "")
        << (series.markers_only ? " stroke-opacity=\"0\"" : "") << "/>\n";
    if (series.markers_only) {
      svg << "<circle cx=\"" << num(left + plot_w + 27) << "\" cy=\"" << num(legend_y)
          << "\" r=\"5\" fill=\"white\""
          << " stroke=\"" << series.color << "\" stroke-width=\"2\"/>\n";
    }
    svg << "<text x=\"" << num(left + plot_w + 46) << "\" y=\"" << num(legend_y + 4) << "\">"
        << escape(series.name) << "</text>\n";
    legend_y += 22;
  }
  svg << "</svg>\n";
  return svg.str();
}

void write_svg(const Plot& plot, const std::string& path) {
  // The one checked writer (cli/output_file.hpp): random O_EXCL temporary, fsync, rename.
  write_output_file(path, "--plot", render_svg(plot));
}

}  // namespace kvsight::cli
