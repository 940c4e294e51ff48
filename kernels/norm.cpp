#include "kernels/norm.h"

#include <cmath>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {

void rms_norm(const RmsNormParams& p) {
  TROUPE_CHECK(p.rows >= 0, "rms_norm: rows must be >= 0, got ", p.rows);
  TROUPE_CHECK(p.n > 0, "rms_norm: n must be > 0, got ", p.n);
  TROUPE_CHECK(p.ld == 0 || p.ld >= p.n, "rms_norm: ld ", p.ld, " < n ", p.n);
  TROUPE_CHECK(p.ld_out == 0 || p.ld_out >= p.n, "rms_norm: ld_out ", p.ld_out, " < n ", p.n);
  TROUPE_CHECK(std::isfinite(p.eps) && p.eps >= 0, "rms_norm: eps must be finite and >= 0, got ",
               p.eps);
  if (p.rows == 0) return;
  TROUPE_CHECK(p.x != nullptr, "rms_norm: x is null");
  TROUPE_CHECK(p.out != nullptr, "rms_norm: out is null");
  switch (active_backend()) {
    case Backend::Ref:
      return ref::rms_norm(p);
    case Backend::Cpu:
      return cpu::rms_norm(p);
    case Backend::Cuda:
      return cuda::rms_norm(p);
  }
}

void softmax(const SoftmaxParams& p) {
  TROUPE_CHECK(p.rows >= 0, "softmax: rows must be >= 0, got ", p.rows);
  TROUPE_CHECK(p.n >= 0, "softmax: n must be >= 0, got ", p.n);
  TROUPE_CHECK(p.ld == 0 || p.ld >= p.n, "softmax: ld ", p.ld, " < n ", p.n);
  if (p.rows == 0 || p.n == 0) return;
  TROUPE_CHECK(p.x != nullptr, "softmax: x is null");
  switch (active_backend()) {
    case Backend::Ref:
      return ref::softmax(p);
    case Backend::Cpu:
      return cpu::softmax(p);
    case Backend::Cuda:
      return cuda::softmax(p);
  }
}

}  // namespace troupe::kernels
