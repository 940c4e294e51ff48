// Timing helpers shared by the benchmark programs (bench_kernels, `troupe bench`):
// a monotonic clock and order statistics of a set of timed samples.
#pragma once

#include <vector>

namespace troupe::bench {

// Seconds on a monotonic clock (differences only).
double now_seconds();

// The q-quantile (0 = min, 0.5 = median, 1 = max) of v, nearest rank; v must not be empty.
double percentile(std::vector<double> v, double q);

}  // namespace troupe::bench
