// Backend selection. Every kernel family's entry function (kernels/<family>.cpp)
// validates its Params and then dispatches on active_backend():
//
//   Backend::Ref  -> ref::op   scalar reference, the definition tests compare against
//   Backend::Cpu  -> cpu::op   fast path; inside, one if/else on cpu_features() picks
//                              AMX / AVX-512 code or the portable C++ fallback
//
// (Backend::Cuda joins when kernels/cuda is built.) The default is Cpu; tests and
// benchmarks switch it with ScopedBackend.
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
  // The AVX-512 kernels need F+BW+VL+DQ; TROUPE_CPU=portable forces the fallback.
  bool has_avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
};
const CpuFeatures& cpu_features();

enum class Backend : uint8_t { Ref, Cpu };
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

}  // namespace troupe::kernels
