// `troupe make-tiny-model DIR [--seed N]`: writes the deterministic tiny checkpoint.
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "kernels/check.h"
#include "model/tiny_checkpoint.h"

namespace troupe::cli {

int run_make_tiny_model(const CommandArgs& argv) {
  Args a(argv, {"seed"}, {});
  if (a.positional().size() != 1) TROUPE_FAIL("usage: troupe make-tiny-model DIR [--seed N]");
  const int64_t seed = a.get_int("seed", 7);
  model::write_tiny_checkpoint(a.positional()[0], static_cast<uint64_t>(seed));
  std::printf("wrote tiny checkpoint (seed %lld) to %s\n", static_cast<long long>(seed),
              a.positional()[0].c_str());
  return 0;
}

}  // namespace troupe::cli
