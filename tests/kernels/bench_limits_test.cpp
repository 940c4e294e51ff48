// Which machine limit a bench_kernels figure is judged against (bench/common/limits.h):
// the AVX2 path on a machine with wider units gets the AVX2 probes, everything else the
// machine's widest. Limits written by hand here, so no probe runs.
#include <gtest/gtest.h>

#include "bench/common/limits.h"

namespace troupe::bench {
namespace {

using kernels::CpuPath;

// An AVX-512 VNNI machine as measure_limits reports one: the AVX2 probes beside.
MachineLimits avx512_machine() {
  MachineLimits l;
  l.dram_gbs_all = 60;
  l.fp32 = {"fp32 FMA (avx512)", 200, 400};
  l.fp32_avx2 = {"fp32 FMA (avx2)", 100, 210};
  l.bf16 = {"bf16 dot (avx512)", 400, 800};
  l.int8 = {"int8 dot (vnni)", 850, 1700};
  l.int8_avx2 = {"int8 dot (avx2)", 230, 470};
  return l;
}

TEST(BenchLimits, TheAvx2PathIsJudgedAgainstTheAvx2Probes) {
  const MachineLimits l = avx512_machine();
  EXPECT_EQ(limit_for(l, Bound::Int8, CpuPath::Avx2), 470);
  EXPECT_EQ(limit_for(l, Bound::Fp32, CpuPath::Avx2), 210);
  EXPECT_EQ(limit_for(l, Bound::Bf16, CpuPath::Avx2), 210);  // no bf16 dot on AVX2
  EXPECT_EQ(limit_for(l, Bound::Memory, CpuPath::Avx2), 60);
  EXPECT_EQ(bound_tag(l, Bound::Int8, CpuPath::Avx2), "int8 avx2");
  EXPECT_EQ(bound_tag(l, Bound::Bf16, CpuPath::Avx2), "fp32 avx2");
  EXPECT_EQ(bound_tag(l, Bound::Memory, CpuPath::Avx2), "DRAM");
}

TEST(BenchLimits, OtherPathsKeepTheWidestUnits) {
  const MachineLimits l = avx512_machine();
  for (CpuPath path : {CpuPath::Avx512, CpuPath::Portable}) {
    EXPECT_EQ(limit_for(l, Bound::Int8, path), 1700);
    EXPECT_EQ(limit_for(l, Bound::Fp32, path), 400);
    EXPECT_EQ(limit_for(l, Bound::Bf16, path), 800);
    EXPECT_EQ(bound_tag(l, Bound::Int8, path), "int8");
  }
}

TEST(BenchLimits, AnAvx2OnlyMachineHasOneSetOfProbes) {
  MachineLimits l;
  l.dram_gbs_all = 30;
  l.fp32 = {"fp32 FMA (avx2)", 100, 200};
  l.int8 = {"int8 dot (avx2)", 230, 460};
  EXPECT_EQ(limit_for(l, Bound::Int8, CpuPath::Avx2), 460);
  EXPECT_EQ(limit_for(l, Bound::Fp32, CpuPath::Avx2), 200);
  EXPECT_EQ(limit_for(l, Bound::Bf16, CpuPath::Avx2), 200);  // no bf16 dot: the fp32 peak
  EXPECT_EQ(bound_tag(l, Bound::Int8, CpuPath::Avx2), "int8");
}

}  // namespace
}  // namespace troupe::bench
