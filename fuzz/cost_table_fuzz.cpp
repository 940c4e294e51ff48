// The online cost table's file (runtime/speculative/cost_table_file, speculative-config
// "table_file"): the bytes are the file's text, read when an engine starts. Contract: a
// malformed file is a troupe::Error from the reader; the cells it accepts seed a chooser
// that then picks k without throwing, and they are written back as the same cells.
#include "fuzz/targets.h"
#include "kernels/check.h"
#include "runtime/speculative/cost_table_file.h"
#include "runtime/speculative/speculative_config.h"

namespace troupe::fuzz {

void cost_table(const uint8_t* data, size_t size) {
  std::vector<runtime::StepTimeSample> cells;
  try {
    cells = runtime::parse_cost_table(as_text(data, size), "fuzz.json");
  } catch (const Error&) {
    return;
  }
  runtime::DraftLengthChooser chooser(3, 16, cells);
  for (int64_t b : {1, 4, 16, 40}) {
    const int64_t k = chooser.choose(b);
    if (k < 0 || k > 3) std::abort();
  }
  const std::string again =
      "{\"step_seconds\": " + runtime::step_seconds_json(cells) + "}";
  if (runtime::parse_cost_table(again, "again") != cells) std::abort();
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::cost_table)
