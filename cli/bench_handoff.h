// `troupe bench handoff` (cli/cmd_bench_handoff.cpp).
#pragma once

#include "cli/commands.h"

namespace troupe::cli {

int bench_handoff(const CommandArgs& args);

}  // namespace troupe::cli
