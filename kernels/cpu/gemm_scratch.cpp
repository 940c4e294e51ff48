// The GEMMs' per-thread scratch (kernels/cpu/gemm_weight_src.h), compiled for the
// baseline ISA so every SIMD path can share it.
#include <sys/mman.h>

#include <cstdlib>

#include "kernels/check.h"
#include "kernels/cpu/gemm_weight_src.h"

namespace troupe::kernels::cpu {

Scratch::~Scratch() {
  std::free(p_);
}

void* Scratch::get_bytes(size_t want) {
  const size_t bytes = (want + 63) / 64 * 64;
  if (bytes > cap_) {
    std::free(p_);
    // A prefill's activation copy spans thousands of 4 KiB pages; 2 MiB pages keep
    // the TLB out of the way (measured ~8% on M = 2048).
    constexpr size_t kHuge = size_t{2} << 20;
    if (bytes >= 2 * kHuge) {
      cap_ = (bytes + kHuge - 1) / kHuge * kHuge;
      p_ = std::aligned_alloc(kHuge, cap_);
      if (p_) madvise(p_, cap_, MADV_HUGEPAGE);
    } else {
      cap_ = bytes;
      p_ = std::aligned_alloc(64, cap_);
    }
    TROUPE_CHECK(p_ != nullptr, "gemm: out of memory for ", bytes, " bytes of scratch");
  }
  return p_;
}

void Scratch::trim(size_t keep) {
  if (cap_ <= keep) return;
  std::free(p_);
  p_ = nullptr;
  cap_ = 0;
}

Scratch& gemm_x_scratch() {
  thread_local Scratch s;
  return s;
}

Scratch& gemm_w_scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace troupe::kernels::cpu
