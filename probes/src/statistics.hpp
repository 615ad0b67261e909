#pragma once
// Statistics of the probes' samples (statistics.cpp; summarize is public, probes.hpp).
#include <vector>

#include "kvsight/probes/probes.hpp"

namespace kvsight::probes::detail {

// The value at `fraction` (0..1) of sorted samples, linearly interpolated between ranks.
double interpolate(const std::vector<double>& sorted, double fraction);

// A sweep's slope (least squares of time_us against context, the planner's one fit:
// kvsight/least_squares.hpp) and growth (last time / first time) from its points.
void fit_sweep(SweepResult& result);

}  // namespace kvsight::probes::detail
