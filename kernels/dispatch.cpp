#include "kernels/dispatch.h"

#include "kernels/exec_context.h"

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "kernels/check.h"

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
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
  }
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = b & (1u << 5);
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

// TROUPE_CPU caps the rung: "portable" hides every extension, "avx2" the AVX-512 and
// AMX ones, "avx512" the AMX ones (the VNNI kernels where AMX would run); "amx" or unset
// keeps what the CPU has.
CpuFeatures detect_with_override() {
  const char* forced = std::getenv("TROUPE_CPU");
  if (forced && std::strcmp(forced, "portable") == 0) return {};
  CpuFeatures f = detect();
  if (forced && std::strcmp(forced, "avx2") == 0) {
    CpuFeatures capped;
    capped.avx2 = f.avx2;
    capped.fma = f.fma;
    capped.f16c = f.f16c;
    return capped;
  }
  if (forced && std::strcmp(forced, "avx512") == 0) {
    f.amx_bf16 = f.amx_int8 = false;
    return f;
  }
  if (forced && *forced && std::strcmp(forced, "amx") != 0)
    std::fprintf(stderr, "troupe: TROUPE_CPU=%s is not amx, avx512, avx2 or portable; ignored\n",
                 forced);
  return f;
}

std::atomic<Backend> g_backend{Backend::Cpu};
// First use, not static initialization: other translation units' initializers may ask.
std::atomic<CpuPath>& cpu_path_slot() {
  static std::atomic<CpuPath> path{best_cpu_path()};
  return path;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect_with_override();
  return features;
}

Backend active_backend() {
  const ExecContext* ctx = bound_context();  // a rank's own setting wins
  if (ctx != nullptr && ctx->backend()) return *ctx->backend();
  return g_backend.load(std::memory_order_relaxed);
}
void set_active_backend(Backend b) { g_backend.store(b, std::memory_order_relaxed); }

bool cpu_supports(CpuPath p) {
  switch (p) {
    case CpuPath::Portable: return true;
    case CpuPath::Avx2: return cpu_features().has_avx2();
    case CpuPath::Avx512: return cpu_features().has_avx512();
  }
  return false;
}

const char* missing_reason(CpuPath p) {
  if (cpu_supports(p)) return "";
  return p == CpuPath::Avx2 ? "this CPU (or TROUPE_CPU) lacks AVX2+FMA"
                            : "this CPU (or TROUPE_CPU) lacks AVX-512 F/BW/VL/DQ";
}

CpuPath best_cpu_path() {
  if (cpu_supports(CpuPath::Avx512)) return CpuPath::Avx512;
  if (cpu_supports(CpuPath::Avx2)) return CpuPath::Avx2;
  return CpuPath::Portable;
}

CpuPath active_cpu_path() { return cpu_path_slot().load(std::memory_order_relaxed); }

void set_active_cpu_path(CpuPath p) {
  TROUPE_CHECK(cpu_supports(p), "set_active_cpu_path: ", missing_reason(p));
  cpu_path_slot().store(p, std::memory_order_relaxed);
}

const char* to_string(CpuPath p) {
  switch (p) {
    case CpuPath::Portable: return "portable";
    case CpuPath::Avx2: return "avx2";
    case CpuPath::Avx512: return "avx512";
  }
  return "?";
}

const char* to_string(Backend b) {
  switch (b) {
    case Backend::Ref: return "ref";
    case Backend::Cpu: return "cpu";
    case Backend::Cuda: return "cuda";
  }
  return "?";
}

}  // namespace troupe::kernels
