// Statistics of the probes' samples: median, p10, p90 and spread of repeated timings,
// and the fit of a sweep (statistics.hpp).
#include "statistics.hpp"

#include <algorithm>
#include <cmath>

#include "kvsight/error.hpp"
#include "kvsight/least_squares.hpp"

namespace kvsight::probes {

namespace detail {

double interpolate(const std::vector<double>& sorted, double fraction) {
  const double position = fraction * static_cast<double>(sorted.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(position));
  const std::size_t upper = std::min(lower + 1, sorted.size() - 1);
  const double weight = position - static_cast<double>(lower);
  return sorted[lower] * (1.0 - weight) + sorted[upper] * weight;
}

void fit_sweep(SweepResult& result) {
  std::vector<double> x, y;
  for (const ProbePoint& point : result.points) {
    x.push_back(static_cast<double>(point.context));
    y.push_back(point.time_us);
  }
  result.slope_us_per_token = least_squares_slope(x, y);
  result.growth = !y.empty() && y.front() > 0 ? y.back() / y.front() : 0.0;
}

}  // namespace detail

Timing summarize(std::vector<double> samples) {
  if (samples.empty()) throw InputError("samples", "no timing samples");
  std::sort(samples.begin(), samples.end());
  Timing t;
  t.repeats = static_cast<int>(samples.size());
  t.min_us = samples.front();
  t.median_us = detail::interpolate(samples, 0.5);
  t.p10_us = detail::interpolate(samples, 0.1);
  t.p90_us = detail::interpolate(samples, 0.9);
  t.spread = t.median_us > 0 ? (t.p90_us - t.p10_us) / t.median_us : 0.0;
  return t;
}

}  // namespace kvsight::probes
