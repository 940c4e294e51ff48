#include "kernels/attention.h"

#include <cmath>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {

void attention(const AttentionParams& p) {
  TROUPE_CHECK(p.m >= 0, "attention: m must be >= 0, got ", p.m);
  TROUPE_CHECK(p.heads > 0, "attention: heads must be > 0, got ", p.heads);
  TROUPE_CHECK(p.dim > 0, "attention: dim must be > 0, got ", p.dim);
  TROUPE_CHECK(p.max_keys >= 0, "attention: max_keys must be >= 0, got ", p.max_keys);
  TROUPE_CHECK(std::isfinite(p.scale), "attention: scale must be finite, got ", p.scale);
  if (p.m == 0) return;
  TROUPE_CHECK(p.q != nullptr, "attention: q is null");
  TROUPE_CHECK(p.out != nullptr, "attention: out is null");
  TROUPE_CHECK(p.keys != nullptr || p.max_keys == 0, "attention: keys is null with max_keys ",
               p.max_keys);
  switch (active_backend()) {
    case Backend::Ref:
      return ref::attention(p);
    case Backend::Cpu:
      return cpu::attention(p);
    case Backend::Cuda:
      return cuda::attention(p);
  }
}

}  // namespace troupe::kernels
