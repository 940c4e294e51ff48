// Backend selection. Every kernel family's entry function (kernels/<family>.cpp)
// validates its Params and then dispatches on active_backend():
//
//   Backend::Ref  -> ref::op   scalar reference, the definition tests compare against
//   Backend::Cpu  -> cpu::op   fast path; inside, one switch on active_cpu_path() picks
//                              the AVX-512, AVX2+FMA or portable C++ kernels
//
// The CPU path defaults to the best the CPU has (AVX-512 > AVX2+FMA > portable);
// TROUPE_CPU=avx512|avx2|portable caps it for the process (the features above the cap read as
// absent), and tests and benchmarks switch it with ScopedCpuPath.
//
//   Backend::Cuda -> cuda::op  kernels/cuda on the device of the calling thread's
//                              ExecContext (its cuda::DeviceContext: device, stream, pool);
//                              every pointer in the Params is then device memory, and the
//                              entry skips the checks that would read array contents
//                              (indices, per-row parameters): the kernels assume them valid.
//                              Built without CUDA, it throws (kernels/cuda/device_context.h).
//
// The default is Cpu; tests and benchmarks switch it with ScopedBackend.
#pragma once

#include <cstdint>

namespace troupe::kernels {

struct CpuFeatures {
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512bf16 = false;
  bool avx512vnni = false;
  bool avx512fp16 = false;
  bool amx_bf16 = false;   // also requires the OS permission (arch_prctl), checked here
  bool amx_int8 = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  // The AVX-512 kernels need F+BW+VL+DQ; the AVX2 kernels AVX2+FMA.
  bool has_avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  bool has_avx2() const { return avx2 && fma && f16c; }  // F16C: f16 weights and scales
};
const CpuFeatures& cpu_features();  // after the TROUPE_CPU cap

// The CPU kernels' instruction-set rungs, best last.
enum class CpuPath : uint8_t { Portable, Avx2, Avx512 };
const char* to_string(CpuPath p);           // "portable", "avx2", "avx512"
bool cpu_supports(CpuPath p);               // this CPU (after the TROUPE_CPU cap) has it
const char* missing_reason(CpuPath p);      // why not, for skips ("" when supported)
CpuPath best_cpu_path();                    // the default: the best supported rung
CpuPath active_cpu_path();
void set_active_cpu_path(CpuPath p);        // TROUPE_CHECKs cpu_supports(p)

enum class Backend : uint8_t { Ref, Cpu, Cuda };
// The calling thread's execution context's backend where it pins one
// (kernels/exec_context.h), else the process-wide setting below.
Backend active_backend();
void set_active_backend(Backend b);
const char* to_string(Backend b);

class ScopedBackend {
 public:
  explicit ScopedBackend(Backend b) : saved_(active_backend()) { set_active_backend(b); }
  ~ScopedBackend() { set_active_backend(saved_); }
  ScopedBackend(const ScopedBackend&) = delete;
  ScopedBackend& operator=(const ScopedBackend&) = delete;

 private:
  Backend saved_;
};

class ScopedCpuPath {
 public:
  explicit ScopedCpuPath(CpuPath p) : saved_(active_cpu_path()) { set_active_cpu_path(p); }
  ~ScopedCpuPath() { set_active_cpu_path(saved_); }
  ScopedCpuPath(const ScopedCpuPath&) = delete;
  ScopedCpuPath& operator=(const ScopedCpuPath&) = delete;

 private:
  CpuPath saved_;
};

}  // namespace troupe::kernels
