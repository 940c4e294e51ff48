// TROUPE_CPU caps the CPU features a process sees (kernels/dispatch.cpp), read once per
// process, so each cap runs `troupe info` in a process of its own: "avx512" hides AMX
// (the VNNI kernels run where AMX tiles would), "avx2" AVX-512 too, "portable" all;
// an unknown value is named on stderr and ignored.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/run_troupe.h"

namespace troupe {
namespace {

using testing::run_troupe;

testing::RunResult info_under(const char* cap) {
  ::setenv("TROUPE_CPU", cap, 1);
  testing::RunResult r = run_troupe("info");
  ::unsetenv("TROUPE_CPU");
  return r;
}

TEST(CpuCap, EachCapHidesTheFeaturesAboveIt) {
  const testing::RunResult avx512 = info_under("avx512");
  ASSERT_EQ(avx512.status, 0) << avx512.out;
  EXPECT_NE(avx512.out.find("amx:        bf16 no, int8 no"), std::string::npos) << avx512.out;

  const testing::RunResult avx2 = info_under("avx2");
  ASSERT_EQ(avx2.status, 0) << avx2.out;
  EXPECT_NE(avx2.out.find("avx512:     no"), std::string::npos) << avx2.out;
  EXPECT_NE(avx2.out.find("amx:        bf16 no, int8 no"), std::string::npos) << avx2.out;
  EXPECT_EQ(avx2.out.find("cpu path:   avx512"), std::string::npos) << avx2.out;

  const testing::RunResult portable = info_under("portable");
  ASSERT_EQ(portable.status, 0) << portable.out;
  EXPECT_NE(portable.out.find("cpu path:   portable"), std::string::npos) << portable.out;
  EXPECT_NE(portable.out.find("avx2:       no"), std::string::npos) << portable.out;

  const testing::RunResult bogus = info_under("sse9");
  ASSERT_EQ(bogus.status, 0) << bogus.out;
  EXPECT_NE(bogus.out.find("TROUPE_CPU=sse9 is not amx, avx512, avx2 or portable; ignored"),
            std::string::npos)
      << bogus.out;
}

}  // namespace
}  // namespace troupe
