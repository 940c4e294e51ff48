// cuda::attention, cuda::indexer_score and cuda::topk against ref. Tolerances as the
// CPU tests: attention rel 2e-5 / abs 1e-5 (f32 against ref's f64), indexer scores rel
// 1e-4 / abs 1e-5 with -inf cells exact; top-k exact (count and indices, ties included).
#include <bit>

#include "kernels/attention.h"
#include "kernels/indexer.h"
#include "tests/cuda/check.h"

namespace troupe::cuda_check {
namespace {

void attention_case(DeviceContext& dev, Report& rep, int64_t m, int64_t heads, int64_t dim,
                    int64_t max_keys, bool sink, uint32_t seed) {
  char name[96];
  std::snprintf(name, sizeof name, "attention m=%ld heads=%ld dim=%ld keys=%ld%s", long(m),
                long(heads), long(dim), long(max_keys), sink ? " sink" : "");
  rep.begin_case(name);
  const int64_t pool_rows = max_keys + 3;
  const std::vector<float> q = normal(m * heads * dim, seed, 0.2f);
  const std::vector<float> pool = normal(pool_rows * dim, seed + 1);
  const std::vector<float> sinks = normal(heads, seed + 2);
  // Row index per (query, slot); -1 = null. Query 1 (if any) sees no keys at all.
  std::vector<int64_t> slot(m * max_keys);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < m * max_keys; ++i) {
    const bool null = (i / std::max<int64_t>(max_keys, 1)) == 1 || rng() % 7 == 0;
    slot[i] = null ? -1 : int64_t(rng() % pool_rows);
  }
  const auto dpool = upload(dev, pool);
  std::vector<const float*> host_keys(slot.size()), dev_keys(slot.size());
  for (size_t i = 0; i < slot.size(); ++i) {
    host_keys[i] = slot[i] < 0 ? nullptr : pool.data() + slot[i] * dim;
    dev_keys[i] = slot[i] < 0 ? nullptr : dpool.get() + slot[i] * dim;
  }
  std::vector<float> want(m * heads * dim, kNaN);
  kernels::AttentionParams p;
  p.m = m, p.heads = heads, p.dim = dim, p.max_keys = max_keys;
  p.scale = 1.0f / std::sqrt(float(dim));
  p.q = q.data(), p.keys = host_keys.data(), p.sink = sink ? sinks.data() : nullptr;
  p.out = want.data();
  kernels::ref::attention(p);
  const auto dq = upload(dev, q), dsink = upload(dev, sinks);
  const auto dkeys = upload(dev, dev_keys);
  auto dout = upload(dev, std::vector<float>(want.size(), kNaN));
  p.q = dq.get(), p.keys = dkeys.get(), p.sink = sink ? dsink.get() : nullptr;
  p.out = dout.get();
  kernels::attention(p);
  const std::vector<float> got = download(dev, dout);
  for (size_t i = 0; i < got.size(); ++i) {
    char what[96];
    std::snprintf(what, sizeof what, "out[%zu] = %g, ref %g", i, got[i], want[i]);
    rep.check(close(got[i], want[i], 2e-5f, 1e-5f), what);
  }
  rep.end_case();
}

void indexer_case(DeviceContext& dev, Report& rep, int64_t m, int64_t heads, int64_t dim,
                  int64_t rows, int64_t max_candidates, uint32_t seed) {
  char name[112];
  std::snprintf(name, sizeof name, "indexer_score m=%ld heads=%ld dim=%ld rows=%ld cand=%ld",
                long(m), long(heads), long(dim), long(rows), long(max_candidates));
  rep.begin_case(name);
  const std::vector<float> q = normal(m * heads * dim, seed);
  const std::vector<float> w = normal(m * heads, seed + 1, 0.1f);
  std::vector<float> keys = normal(rows * dim, seed + 2);
  for (int64_t j = 0; j < rows; j += 5)  // zero keys: every relu is 0, the score exactly 0
    for (int64_t d = 0; d < dim; ++d) keys[j * dim + d] = 0.0f;
  std::mt19937 rng(seed);
  std::vector<int64_t> visible(m);
  for (auto& v : visible) v = rows == 0 ? 0 : int64_t(rng() % (rows + 1));
  std::vector<int32_t> cand(m * max_candidates);
  for (auto& c : cand) c = rng() % 4 == 0 ? -1 : int32_t(rng() % std::max<int64_t>(rows, 1));
  const bool use_cand = max_candidates > 0;
  std::vector<float> want(m * rows, kNaN);
  kernels::IndexerScoreParams p;
  p.m = m, p.heads = heads, p.dim = dim, p.rows = rows, p.max_candidates = max_candidates;
  p.q = q.data(), p.w = w.data(), p.keys = keys.data(), p.visible = visible.data();
  p.candidates = use_cand ? cand.data() : nullptr, p.score = want.data();
  kernels::ref::indexer_score(p);
  const auto dq = upload(dev, q), dw = upload(dev, w), dk = upload(dev, keys);
  const auto dv = upload(dev, visible);
  const auto dc = upload(dev, cand);
  auto ds = upload(dev, std::vector<float>(want.size(), kNaN));
  p.q = dq.get(), p.w = dw.get(), p.keys = dk.get(), p.visible = dv.get();
  p.candidates = use_cand ? dc.get() : nullptr, p.score = ds.get();
  kernels::indexer_score(p);
  const std::vector<float> got = download(dev, ds);
  for (size_t i = 0; i < got.size(); ++i) {
    char what[96];
    std::snprintf(what, sizeof what, "score[%zu] = %g, ref %g", i, got[i], want[i]);
    const bool exact_needed = std::isinf(want[i]) || want[i] == 0.0f;
    rep.check(exact_needed ? got[i] == want[i] : close(got[i], want[i], 1e-4f, 1e-5f), what);
  }
  rep.end_case();
}

// kind: 0 normal, 1 all tied zeros, 2 coarse values (many ties) with -inf/NaN/±0/+inf.
void topk_case(DeviceContext& dev, Report& rep, int64_t n, int64_t k, int kind, uint32_t seed) {
  char name[64];
  std::snprintf(name, sizeof name, "topk n=%ld k=%ld kind=%d", long(n), long(k), kind);
  rep.begin_case(name);
  std::vector<float> s = normal(n, seed);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    if (kind == 1) s[i] = 0.0f;
    if (kind == 2) {
      const float specials[] = {-INFINITY, kNaN, -0.0f, 0.0f, INFINITY};
      s[i] = rng() % 5 == 0 ? specials[rng() % 5] : std::round(s[i] * 3.0f);
    }
  }
  std::vector<int32_t> want(std::min(n, k), -1);
  const int64_t want_count = kernels::ref::topk(s.data(), n, k, want.data());
  const auto ds = upload(dev, s);
  auto dout = upload(dev, std::vector<int32_t>(want.size(), -7));
  const int64_t got_count = kernels::topk(ds.get(), n, k, dout.get());
  const std::vector<int32_t> got = download(dev, dout);
  rep.check(got_count == want_count, "count " + std::to_string(got_count) + ", ref " +
                                         std::to_string(want_count));
  for (int64_t i = 0; i < std::min(got_count, want_count); ++i)
    rep.check(got[i] == want[i], "out[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                                     ", ref " + std::to_string(want[i]));
  for (int64_t i = want_count; i < int64_t(got.size()); ++i)
    rep.check(got[i] == -7, "out[" + std::to_string(i) + "] written past the count");
  rep.end_case();
}

}  // namespace

void check_attention_indexer(DeviceContext& dev, Report& rep) {
  uint32_t seed = 700;
  for (int64_t dim : {1, 64, 512})
    for (int64_t keys : {0, 1, 128, 700})
      for (bool sink : {false, true}) attention_case(dev, rep, 3, 8, dim, keys, sink, seed++);
  attention_case(dev, rep, 2, 64, 512, 640, true, seed++);
  for (int64_t rows : {0, 1, 100, 4096})
    for (int64_t cand : {0, 64}) indexer_case(dev, rep, 3, 8, 128, rows, cand, seed++);
  indexer_case(dev, rep, 2, 64, 128, 3000, 0, seed++);
  for (int64_t n : {1, 100, 65536})
    for (int64_t k : {1, 10, 2048, 70000})
      for (int kind : {0, 1, 2}) topk_case(dev, rep, n, k, kind, seed++);
}

}  // namespace troupe::cuda_check
