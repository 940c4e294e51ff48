// `troupe bench peer`: troupe's side of the llama.cpp comparison (bench/peer/).
#pragma once

#include "cli/commands.h"

namespace troupe::cli {
int bench_peer(const CommandArgs& args);
}  // namespace troupe::cli
