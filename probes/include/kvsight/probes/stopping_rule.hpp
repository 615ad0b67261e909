#pragma once
// When to stop taking timing samples, in the manner of nvbench's stdrel criterion
// (NVIDIA/nvbench nvbench/detail/stdrel_criterion.cxx; docs/reference/preflight.md
// "Stopping rule"): keep sampling until the relative noise of the samples (sample
// standard deviation / mean) is under a bound, or a time or sample budget runs out;
// report the noise and whether the bound was met. Pure arithmetic, no clock: the
// caller passes the elapsed time with every sample, so the rule is unit-tested on
// synthetic samples.
#include <cstdint>
#include <string>
#include <vector>

namespace kvsight::probes {

struct StoppingRule {
  // Relative noise bound; 0 turns the rule off (a fixed repeat count, as before).
  // nvbench's default max noise is 0.5% (--max-noise 0.5); kvsight's preflight uses
  // a looser bound on the cpu backend (docs/reference/preflight.md).
  double max_noise = 0;
  int min_samples = 5;      // nvbench needs at least a handful before it trusts a stdev
  int max_samples = 1000;   // hard cap whatever the noise
  double min_time_s = 0;    // keep sampling at least this long (nvbench --min-time, default 0.5 s)
  double max_time_s = 1.0;  // time budget: stop here even if not converged (nvbench --timeout)
  bool enabled() const { return max_noise > 0; }
};

struct StoppingStatus {
  int samples = 0;
  double mean_us = 0, stdev_us = 0;
  double noise = 0;        // stdev / mean; 0 with fewer than two samples
  bool converged = false;  // noise <= max_noise with at least min_samples
  double elapsed_s = 0;
  std::string stopped_by;  // "noise", "time", "samples" or "" (still running)
};

// Sample standard deviation (n - 1) over the mean; 0 for fewer than two samples or a
// mean of 0.
double relative_noise(const std::vector<double>& samples);

class StoppingCriterion {
 public:
  explicit StoppingCriterion(StoppingRule rule);
  // One sample (microseconds) and the wall time spent since sampling began (seconds).
  void add(double sample_us, double elapsed_s);
  // True once the rule says stop: converged (and min_time reached), or a budget ran out.
  bool done() const;
  StoppingStatus status() const;
  const std::vector<double>& samples() const { return samples_; }

 private:
  StoppingRule rule_;
  std::vector<double> samples_;
  double elapsed_s_ = 0;
};

}  // namespace kvsight::probes
