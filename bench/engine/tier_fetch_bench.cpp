#include "bench/engine/tier_fetch_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "bench/common/stats.h"
#include "kernels/check.h"
#include "runtime/kv_cache/block_hash.h"
#include "runtime/kv_cache/tier_storage.h"

namespace troupe::bench {
namespace {

using runtime::TierOp;
using runtime::TierOpKind;

// Drops a file's pages from the page cache (written back first), so the next read
// comes from the device.
void drop_pages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

template <class F>
double median_seconds(int repeats, F&& run) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = now_seconds();
    run(i);
    t.push_back(now_seconds() - t0);
  }
  return percentile(t, 0.5);
}

}  // namespace

TierFetchTimes time_tier_fetch(const model::BatchForward& forward, const EngineBenchConfig& c,
                               int64_t tokens, const std::string& disk_dir) {
  const model::ServingShape& m = forward.shape();
  TierFetchTimes t;
  t.tokens = tokens;
  t.blocks = tokens / c.block_size;
  t.block_bytes = runtime::PagedKvStorage::block_bytes_of(m, c.block_size);
  t.repeats = 5;
  TROUPE_CHECK(t.blocks >= 1, "the fetch timing needs at least one block of tokens");

  // Blocks of random bytes under a hash chain of random tokens, saved to host and disk.
  runtime::PagedKvStorage primary(m, c.block_size, t.blocks, 1);
  std::mt19937 rng(3);
  for (int32_t b = 0; b < int32_t(t.blocks); ++b)
    for (uint8_t& x : primary.block_data(b)) x = uint8_t(rng());
  const runtime::BlockFileGeometry g{
      runtime::kv_disk_model_tag(m, c.block_size, t.block_bytes, "bench"), c.block_size,
      t.block_bytes};
  runtime::TierStorage tiers(t.blocks, g, disk_dir);
  std::vector<TierOp> save, spill, load_host;
  const std::vector<int32_t> prompt = random_tokens(tokens, m.vocab_size, 11);
  uint64_t parent = runtime::kRootBlockHash;
  for (int32_t b = 0; b < int32_t(t.blocks); ++b) {
    TierOp op;
    op.block = op.host_slot = b;
    op.parent_hash = parent;
    op.tokens.assign(prompt.begin() + b * c.block_size, prompt.begin() + (b + 1) * c.block_size);
    op.hash = parent = runtime::block_hash(parent, op.tokens);
    op.kind = TierOpKind::SaveToHost, save.push_back(op);
    op.kind = TierOpKind::SpillToDisk, spill.push_back(op);
    op.kind = TierOpKind::LoadFromHost, load_host.push_back(op);
  }
  tiers.apply(save, primary);
  tiers.apply(spill, primary);

  t.host_s = median_seconds(t.repeats, [&](int) { tiers.apply(load_host, primary); });
  // The page drops stay outside the clock.
  auto disk_pass = [&](bool cold) {
    std::vector<double> times;
    for (int i = 0; i < t.repeats; ++i) {
      if (cold)
        for (const TierOp& op : spill) drop_pages(runtime::block_file_path(disk_dir, op.hash));
      const double t0 = now_seconds();
      std::vector<TierOp> loads;
      std::vector<uint8_t> snapshot;
      for (const TierOp& op : spill) {
        TierOp l;
        l.kind = TierOpKind::LoadFromDisk;
        l.block = op.block;
        TROUPE_CHECK(runtime::read_block_file(disk_dir, g, op.hash, op.parent_hash, op.tokens,
                                              l.payload, snapshot),
                     "the bench's own block file did not read back");
        loads.push_back(std::move(l));
      }
      tiers.apply(loads, primary);
      times.push_back(now_seconds() - t0);
    }
    return percentile(times, 0.5);
  };
  t.disk_warm_s = disk_pass(false);
  t.disk_cold_s = disk_pass(true);

  // Recompute: a cold prefill of the same number of tokens on an engine with no cache.
  t.recompute_s = median_seconds(3, [&](int i) {
    runtime::Engine engine(forward, nullptr, make_engine_config(m, c, /*prefix_cache=*/false));
    engine.add_request(0, random_tokens(tokens, m.vocab_size, 20 + uint64_t(i)), greedy_params(1));
    drain(engine);
  });
  return t;
}

void print_tier_fetch(const TierFetchTimes& t) {
  const double k = 1024.0 / double(t.tokens);
  std::printf(
      "\nbring back a %lld-token prefix (%lld blocks of %lld bytes), median of %d: recompute "
      "(cold prefill) %.3f ms, host copy %.3f ms, disk read+check %.3f ms (page cache), "
      "%.3f ms (pages dropped)\n",
      static_cast<long long>(t.tokens), static_cast<long long>(t.blocks),
      static_cast<long long>(t.block_bytes), t.repeats, 1e3 * t.recompute_s, 1e3 * t.host_s,
      1e3 * t.disk_warm_s, 1e3 * t.disk_cold_s);
  std::printf(
      "per 1K tokens: recompute %.3f ms, host %.3f ms (%.0fx faster), disk %.3f ms page cache "
      "(%.0fx), %.3f ms pages dropped (%.0fx)\n",
      1e3 * k * t.recompute_s, 1e3 * k * t.host_s, t.recompute_s / t.host_s,
      1e3 * k * t.disk_warm_s, t.recompute_s / t.disk_warm_s, 1e3 * k * t.disk_cold_s,
      t.recompute_s / t.disk_cold_s);
  std::fflush(stdout);
}

}  // namespace troupe::bench
