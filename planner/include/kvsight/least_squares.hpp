#pragma once
// The one least-squares fit of the project (the decode model's curves and
// calibration, the probes' sweep slopes).
#include <vector>

namespace kvsight {

// Slope of the least-squares line of y against x over the first min(|x|, |y|)
// points; 0 for fewer than two points or when every x is the same.
double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace kvsight
