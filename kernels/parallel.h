// The one way kernels use threads: parallel_for over [0, n) in contiguous chunks, run
// by the fork-join pool of the calling thread's execution context (kernels/exec_context.h:
// a rank's own, else the process default). Each output element is written by
// exactly one chunk with a fixed summation order, so results do not depend on the
// thread count or on how the range is chunked.
#pragma once

#include <cstdint>
#include "kernels/function_ref.h"

namespace troupe::kernels {

// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks are at least
// min_chunk long. Runs inline when n is small or one thread is configured.
// fn is referenced, not copied (no allocation per call).
using RangeFn = FunctionRef<void(int64_t, int64_t)>;
void parallel_for(int64_t n, int64_t min_chunk, RangeFn fn);

int num_threads();             // the calling thread's context's count
int default_num_threads();     // the process default's
void set_num_threads(int n);  // the process default; <= 0: all hardware threads

}  // namespace troupe::kernels
