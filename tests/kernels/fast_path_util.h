// Shared pieces of the norm / rope / attention / indexer kernel tests: seeded
// random inputs, poisoned outputs, and the implementations each test runs: the scalar
// reference and the CPU paths a family has kernels of its own for, one test instance
// each, run through the family's entry under ScopedCpuPath. A path this CPU lacks is
// skipped with the reason, never run as a twin of another path.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "tests/support/random_normal.h"

namespace troupe::kernels::testing {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using testing_support::random_normal;

// A fast-path variant under test: `run` calls the op on params it is given.
template <class Params>
struct Variant {
  std::string name;
  std::function<void(const Params&)> run;
};

// One implementation under test: the reference, or a CPU path through dispatch.
struct Impl {
  const char* name;  // also the gtest parameter name
  bool ref;
  CpuPath path;
};
constexpr Impl kRefImpl{"ref", true, CpuPath::Portable};
constexpr Impl kPortableImpl{"portable", false, CpuPath::Portable};
constexpr Impl kAvx2Impl{"avx2", false, CpuPath::Avx2};
constexpr Impl kAvx512Impl{"avx512", false, CpuPath::Avx512};

inline std::string impl_name(const ::testing::TestParamInfo<Impl>& info) {
  return info.param.name;
}

// Parameter lists for INSTANTIATE_TEST_SUITE_P(Impls, Suite, list, impl_name): the
// family's CPU paths (norm, rope, attention and indexer each have portable, AVX2 and
// AVX-512 kernels), with or without the reference.
inline auto fast_impls() {
  return ::testing::Values(kPortableImpl, kAvx2Impl, kAvx512Impl);
}
inline auto impls_and_ref() {
  return ::testing::Values(kRefImpl, kPortableImpl, kAvx2Impl, kAvx512Impl);
}

class ImplTest : public ::testing::TestWithParam<Impl> {
 protected:
  void SetUp() override {
    const Impl& i = GetParam();
    if (!i.ref && !cpu_supports(i.path)) GTEST_SKIP() << i.name << ": " << missing_reason(i.path);
  }
  // The op under this instance's implementation, as a one-element list for the loops.
  template <class Params>
  static std::vector<Variant<Params>> variants(void (*entry)(const Params&)) {
    const Impl i = GetParam();
    return {{i.name, [entry, i](const Params& p) {
               ScopedBackend b(i.ref ? Backend::Ref : Backend::Cpu);
               ScopedCpuPath c(i.ref ? active_cpu_path() : i.path);
               entry(p);
             }}};
  }
};

// Runs the op under the scalar reference backend.
template <class Params>
void run_ref(void (*entry)(const Params&), const Params& p) {
  ScopedBackend s(Backend::Ref);
  entry(p);
}

// |got - want| <= abs_tol + rel_tol·|want|, with NaN and infinities required to match.
inline bool close(float got, float want, float abs_tol, float rel_tol) {
  if (std::isnan(want) || std::isinf(want)) return std::isnan(want) ? std::isnan(got) : got == want;
  return std::fabs(got - want) <= abs_tol + rel_tol * std::fabs(want);
}

}  // namespace troupe::kernels::testing
