#include "kernels/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace troupe::kernels {
namespace {

#if defined(__x86_64__)
// Linux gates AMX tile state behind a per-process permission request.
bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx512f = b & (1u << 16);
  f.avx512dq = b & (1u << 17);
  f.avx512bw = b & (1u << 30);
  f.avx512vl = b & (1u << 31);
  f.avx512vnni = c & (1u << 11);
  f.avx512fp16 = d & (1u << 23);
  const bool amx_bf16 = d & (1u << 22);
  const bool amx_int8 = d & (1u << 25);
  unsigned a1, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512bf16 = a1 & (1u << 5);
  if ((amx_bf16 || amx_int8) && request_amx_permission()) {
    f.amx_bf16 = amx_bf16;
    f.amx_int8 = amx_int8;
  }
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

CpuFeatures detect_with_override() {
  const char* forced = std::getenv("TROUPE_CPU");
  if (forced && std::strcmp(forced, "portable") == 0) return {};
  return detect();
}

std::atomic<Backend> g_backend{Backend::Cpu};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect_with_override();
  return features;
}

Backend active_backend() { return g_backend.load(std::memory_order_relaxed); }
void set_active_backend(Backend b) { g_backend.store(b, std::memory_order_relaxed); }

const char* to_string(Backend b) {
  switch (b) {
    case Backend::Ref: return "ref";
    case Backend::Cpu: return "cpu";
  }
  return "?";
}

}  // namespace troupe::kernels
