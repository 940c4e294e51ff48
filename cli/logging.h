// Process-wide logging for `troupe serve`: spdlog's default logger on stderr at the
// configured level, as text lines or one JSON object per line (log-format). stdout
// stays for the daemon's "troupe: ..." status lines that supervisors and tests read.
#pragma once

#include "config/serve_config.h"

namespace troupe::cli {

void setup_logging(config::LogLevel level, config::LogFormat format);

}  // namespace troupe::cli
