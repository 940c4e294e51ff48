// troupe_cuda_check [-v] [family...]: runs the device check (tests/cuda/check.h).
#include <algorithm>
#include <cstring>
#include <exception>

#include "kernels/dispatch.h"
#include "kernels/exec_context.h"
#include "tests/cuda/check.h"

int main(int argc, char** argv) {
  using namespace troupe;
  std::string why;
  if (kernels::cuda::device_count(&why) == 0) {
    std::printf("SKIP troupe_cuda_check: %s\n", why.c_str());
    return 77;
  }
  const struct {
    const char* name;
    cuda_check::Family run;
  } families[] = {{"gemm", cuda_check::check_gemm},
                  {"norm_rope", cuda_check::check_norm_rope},
                  {"sampling", cuda_check::check_sampling},
                  {"attention_indexer", cuda_check::check_attention_indexer},
                  {"moe", cuda_check::check_moe},
                  {"graph", cuda_check::check_graph},
#if defined(TROUPE_HAVE_NCCL)
                  {"nccl", cuda_check::check_nccl},
#endif
  };
  cuda_check::Report report;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-v") == 0) report.set_verbose(true);
    else only.push_back(argv[i]);
  }
  try {
    kernels::cuda::DeviceContext gpu(0);
    kernels::ExecContext ctx(1);
    ctx.set_device(&gpu);
    ctx.set_backend(kernels::Backend::Cuda);
    kernels::ScopedExecContext bind(ctx);
    std::printf("troupe_cuda_check on device 0: %s (%d SMs)\n", gpu.name().c_str(), gpu.sm_count());
    for (const auto& f : families) {
      if (!only.empty() && std::find(only.begin(), only.end(), f.name) == only.end()) continue;
      const int before = report.failed_cases();
      std::printf("%s\n", f.name);
      f.run(gpu, report);
      gpu.synchronize();
      std::printf("%s: %s\n", f.name, report.failed_cases() == before ? "passed" : "FAILED");
    }
  } catch (const std::exception& e) {
    std::printf("ERROR %s\n", e.what());
    return 1;
  }
  std::printf("%d cases, %ld checks, %d failed\n", report.cases(), report.checks(),
              report.failed_cases());
  return report.failed_cases() == 0 ? 0 : 1;
}
