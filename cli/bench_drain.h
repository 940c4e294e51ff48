// `troupe bench drain` (cli/cmd_bench_drain.cpp).
#pragma once

#include "cli/commands.h"

namespace troupe::cli {

int bench_drain(const CommandArgs& args);

}  // namespace troupe::cli
