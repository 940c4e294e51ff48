// The online cost table's step times kept in a file (speculative-config "table_file"), so
// an engine that restarts, or a scheduler actor restarted after a failure, starts from the
// times it measured instead of calibrating again (docs/dspark.md "Online cost table"):
//
//   {"step_seconds": {"<batch>": [T(b, 0) or null, ..., T(b, k)], ...}}
//
// the "step_seconds" object of speculative-config, a null for a cell never measured. The
// times belong to one setup (model, machine, threads, expert precision): a file is named
// for one. Ranks of one instance may share a file: they run the same steps in lockstep,
// and a write replaces the file whole.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/speculative/draft_length.h"

namespace troupe::runtime {

// The cells of a table file's text; `where` (the path) starts each error. A text that is
// not such a table throws troupe::Error.
std::vector<StepTimeSample> parse_cost_table(std::string_view text, std::string_view where);
// The file's cells; none when it does not exist. Unreadable or not a table: Error.
std::vector<StepTimeSample> read_cost_table(const std::string& path);
// Writes the cells to a temporary file beside `path` and renames it over `path`, so a
// reader (or a rank writing the same file) never sees half a table. Error when it cannot.
void write_cost_table(const std::string& path, std::span<const StepTimeSample> cells);

}  // namespace troupe::runtime
