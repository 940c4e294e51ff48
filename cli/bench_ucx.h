// `troupe bench ucx`: MoE dispatch + combine and the DP sync between two processes over
// UCX (bench/ucx/ucx_bench.h, docs/ucx.md).
#pragma once

#include "cli/commands.h"

namespace troupe::cli {
int bench_ucx(const CommandArgs& args);
}  // namespace troupe::cli
