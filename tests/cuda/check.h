// The CUDA device check (tests/cuda): every Backend::Cuda kernel against kernels/ref
// on tables of cases, without GTest (the device machine has none). Each family's file
// registers a function; main() runs them on device 0 and exits 0 (all passed),
// 1 (a case failed) or 77 (no GPU: ctest reports the test as skipped).
//
// A case: inputs from a seeded generator, the reference on the host, the same inputs
// uploaded, outputs poisoned (NaN) before the call and surrounded by sentinel cells
// that must survive, the kernel through the family's dispatched entry (kernels/<family>.h
// under Backend::Cuda), outputs downloaded and compared with a stated tolerance.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device_context.h"
#include "tests/support/random_normal.h"

namespace troupe::cuda_check {

using kernels::cuda::DeviceBuffer;
using kernels::cuda::DeviceContext;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.5f;

class Report {
 public:
  // Records one comparison; prints the first few failures of a case.
  void check(bool ok, const std::string& what) {
    ++checks_;
    if (ok) return;
    if (case_failures_++ < 5) std::printf("    FAIL %s\n", what.c_str());
  }
  void begin_case(const std::string& name) {
    name_ = name;
    case_failures_ = 0;
  }
  void end_case() {
    ++cases_;
    if (case_failures_ > 0) {
      ++failed_cases_;
      std::printf("  FAIL %s (%d mismatches)\n", name_.c_str(), case_failures_);
    } else if (verbose_) {
      std::printf("  ok   %s\n", name_.c_str());
    }
  }
  int failed_cases() const { return failed_cases_; }
  int cases() const { return cases_; }
  long checks() const { return checks_; }
  void set_verbose(bool v) { verbose_ = v; }

 private:
  std::string name_;
  int case_failures_ = 0, cases_ = 0, failed_cases_ = 0;
  long checks_ = 0;
  bool verbose_ = false;
};

// |got - want| <= abs + rel·|want|, NaN == NaN, inf == inf of the same sign.
inline bool close(float got, float want, float rel, float abs) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= abs + rel * std::fabs(want);
}

inline std::vector<float> normal(size_t n, uint32_t seed, float stddev = 1.0f) {
  return testing_support::random_normal(n, seed, stddev);
}

// A host vector's device copy in the context's pool.
template <class T>
DeviceBuffer<T> upload(DeviceContext& dev, const std::vector<T>& host) {
  DeviceBuffer<T> d(dev, host.size());
  dev.upload(d.get(), host.data(), host.size() * sizeof(T));
  return d;
}

template <class T>
std::vector<T> download(DeviceContext& dev, const DeviceBuffer<T>& d) {
  std::vector<T> host(d.size());
  dev.download(host.data(), d.get(), host.size() * sizeof(T));
  dev.synchronize();
  return host;
}

using Family = void (*)(DeviceContext&, Report&);
void check_gemm(DeviceContext&, Report&);
void check_norm_rope(DeviceContext&, Report&);
void check_sampling(DeviceContext&, Report&);
void check_attention_indexer(DeviceContext&, Report&);
void check_moe(DeviceContext&, Report&);
void check_graph(DeviceContext&, Report&);
#if defined(TROUPE_HAVE_NCCL)
void check_nccl(DeviceContext&, Report&);  // built where NCCL is found
#endif

}  // namespace troupe::cuda_check
