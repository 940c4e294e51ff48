// `troupe info`: what this build and this CPU offer (backend selection is visible).
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace troupe::cli {

int run_info(const CommandArgs& argv) {
  Args args(argv, {}, {});
  const auto& f = kernels::cpu_features();
  std::printf("troupe\n");
  std::printf("  backend:    %s\n", kernels::to_string(kernels::active_backend()));
  std::printf("  cpu path:   %s (AVX-512 > AVX2+FMA > portable; TROUPE_CPU=avx512|avx2|portable caps it)\n",
              kernels::to_string(kernels::active_cpu_path()));
  std::printf("  threads:    %d\n", kernels::num_threads());
  std::printf("  avx2:       %s (fma %s, f16c %s)\n", f.avx2 ? "yes" : "no", f.fma ? "yes" : "no",
              f.f16c ? "yes" : "no");
  std::printf("  avx512:     %s (bf16 %s, vnni %s, fp16 %s)\n", f.has_avx512() ? "yes" : "no",
              f.avx512bf16 ? "yes" : "no", f.avx512vnni ? "yes" : "no", f.avx512fp16 ? "yes" : "no");
  std::printf("  amx:        bf16 %s, int8 %s\n", f.amx_bf16 ? "yes" : "no", f.amx_int8 ? "yes" : "no");
  return 0;
}

}  // namespace troupe::cli
