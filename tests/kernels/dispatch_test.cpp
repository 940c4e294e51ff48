#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include "kernels/parallel.h"

namespace troupe::kernels {

TEST(Dispatch, ScopedBackendRestores) {
  const Backend before = active_backend();
  {
    ScopedBackend s(Backend::Ref);
    EXPECT_EQ(active_backend(), Backend::Ref);
  }
  EXPECT_EQ(active_backend(), before);
}

TEST(Parallel, CoversRangeExactlyOnce) {
  for (int64_t n : {0, 1, 7, 1000}) {
    std::vector<int> hits(n, 0);
    parallel_for(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
  }
}

}  // namespace troupe::kernels
