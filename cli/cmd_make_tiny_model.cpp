// `troupe make-tiny-model DIR [--seed N] [--preset v41-tiny|v41-small]`: writes a
// deterministic random checkpoint of MODEL.md §10's init, the tiny config by default.
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "kernels/check.h"
#include "model/tiny_checkpoint.h"

namespace troupe::cli {

int run_make_tiny_model(const CommandArgs& argv) {
  Args a(argv, {"seed", "preset"}, {});
  if (a.positional().size() != 1)
    TROUPE_FAIL("usage: troupe make-tiny-model DIR [--seed N] [--preset v41-tiny|v41-small]");
  const int64_t seed = a.get_int("seed", 7);
  const std::string preset = a.get_or("preset", "v41-tiny");
  if (preset == "v41-flash") TROUPE_FAIL("--preset v41-flash: the full-size model is not written at random");
  const model::ModelConfig config = model::preset_config(preset);  // an unknown name fails here
  model::write_checkpoint(a.positional()[0], config, static_cast<uint64_t>(seed));
  std::printf("wrote %s checkpoint (seed %lld) to %s\n", preset.c_str(), static_cast<long long>(seed),
              a.positional()[0].c_str());
  return 0;
}

}  // namespace troupe::cli
