// cuda::sample against ref::sample: tokens must be equal, row for row (same Philox
// stream, same rule code; see kernels/cuda/sampling.cu for the one place rounding could
// differ, exp, and why it matches in practice). Rows mix greedy, temperature, top-k,
// top-p and min-p; logits include exact ties, -inf masks and a NaN.
#include "kernels/sampling.h"
#include "tests/cuda/check.h"

namespace troupe::cuda_check {
namespace {

void sampling_case(DeviceContext& dev, Report& rep, int64_t m, int64_t vocab, bool ties,
                   uint32_t seed) {
  char name[80];
  std::snprintf(name, sizeof name, "sample m=%ld vocab=%ld%s", long(m), long(vocab),
                ties ? " ties" : "");
  rep.begin_case(name);
  std::vector<float> logits = normal(m * vocab, seed, 2.0f);
  std::mt19937 rng(seed);
  if (ties)  // coarse logits: many exactly equal weights, ordered by id
    for (float& l : logits) l = std::round(l * 2.0f) / 2.0f;
  if (vocab > 3) {
    logits[1] = -INFINITY;
    if (m > 1) logits[vocab + 2] = kNaN;  // row 1
  }
  std::vector<kernels::SamplingParams> sp(m);
  std::vector<uint64_t> streams(m), counters(m);
  const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
  const int32_t top_ks[] = {0, 1, 5, 50};
  const float top_ps[] = {1.0f, 0.9f, 0.5f, 0.05f};
  const float min_ps[] = {0.0f, 0.05f, 0.3f};
  for (int64_t r = 0; r < m; ++r) {
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    sp[r].temperature = temps[pick(5)];
    sp[r].top_k = top_ks[pick(4)];
    sp[r].top_p = top_ps[pick(4)];
    sp[r].min_p = min_ps[pick(3)];
    sp[r].seed = rng();
    streams[r] = pick(4);
    counters[r] = rng();
  }
  std::vector<int32_t> want(m, -1);
  kernels::SampleParams p;
  p.m = m, p.vocab = vocab;
  p.logits = logits.data(), p.out = want.data(), p.sampling = sp.data();
  p.streams = streams.data(), p.counters = counters.data();
  kernels::ref::sample(p);
  const auto dl = upload(dev, logits);
  const auto dsp = upload(dev, sp);
  const auto dst = upload(dev, streams), dct = upload(dev, counters);
  auto dout = upload(dev, std::vector<int32_t>(m, -7));
  p.logits = dl.get(), p.out = dout.get(), p.sampling = dsp.get();
  p.streams = dst.get(), p.counters = dct.get();
  kernels::sample(p);
  const std::vector<int32_t> got = download(dev, dout);
  for (int64_t r = 0; r < m; ++r) {
    char what[160];
    std::snprintf(what, sizeof what, "row %ld (T=%g k=%d p=%g min_p=%g): token %d, ref %d",
                  long(r), sp[r].temperature, sp[r].top_k, sp[r].top_p, sp[r].min_p, got[r],
                  want[r]);
    rep.check(got[r] == want[r], what);
  }
  rep.end_case();
}

}  // namespace

void check_sampling(DeviceContext& dev, Report& rep) {
  uint32_t seed = 500;
  for (int64_t vocab : {1, 2, 7, 1000, 129280})
    for (bool ties : {false, true}) sampling_case(dev, rep, 64, vocab, ties, seed++);
  for (int i = 0; i < 8; ++i) sampling_case(dev, rep, 33, 32000, i % 2 == 1, seed++);
}

}  // namespace troupe::cuda_check
