// The stopping rule (kvsight/probes/stopping_rule.hpp).
#include "kvsight/probes/stopping_rule.hpp"

#include <cmath>
#include <numeric>

namespace kvsight::probes {

double relative_noise(const std::vector<double>& samples) {
  if (samples.size() < 2) return 0.0;
  const double n = static_cast<double>(samples.size());
  const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  if (mean == 0.0) return 0.0;
  double squares = 0;
  for (const double s : samples) squares += (s - mean) * (s - mean);
  // Sample (Bessel-corrected) standard deviation, as nvbench's statistics::standard_deviation.
  return std::sqrt(squares / (n - 1.0)) / mean;
}

StoppingCriterion::StoppingCriterion(StoppingRule rule) : rule_(rule) {
  if (rule_.min_samples < 2) rule_.min_samples = 2;  // a noise needs two samples
  if (rule_.max_samples < rule_.min_samples) rule_.max_samples = rule_.min_samples;
}

void StoppingCriterion::add(double sample_us, double elapsed_s) {
  samples_.push_back(sample_us);
  elapsed_s_ = elapsed_s;
}

StoppingStatus StoppingCriterion::status() const {
  StoppingStatus s;
  s.samples = static_cast<int>(samples_.size());
  s.elapsed_s = elapsed_s_;
  if (!samples_.empty()) {
    s.mean_us = std::accumulate(samples_.begin(), samples_.end(), 0.0) / static_cast<double>(samples_.size());
  }
  s.noise = relative_noise(samples_);
  s.stdev_us = s.noise * s.mean_us;
  s.converged = s.samples >= rule_.min_samples && s.noise <= rule_.max_noise;
  if (s.converged && elapsed_s_ >= rule_.min_time_s)
    s.stopped_by = "noise";
  else if (s.samples >= rule_.max_samples)
    s.stopped_by = "samples";
  else if (elapsed_s_ >= rule_.max_time_s && s.samples >= 2)
    s.stopped_by = "time";
  return s;
}

bool StoppingCriterion::done() const { return !status().stopped_by.empty(); }

}  // namespace kvsight::probes
