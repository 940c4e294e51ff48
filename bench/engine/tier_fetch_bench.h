// `troupe bench replay --tiers ...`'s last lines: what it costs to bring a prefix back
// from the host tier and from the disk tier (read and checked, from the page cache and
// with its pages dropped first), against recomputing it (a cold prefill of as many
// tokens on the Engine), per 1K tokens. The copies are TierStorage::apply and
// read_block_file, exactly what a hit runs; the SWA replay a hit adds on top (the same
// for every tier, docs/kv-cache.md) is not in them.
#pragma once

#include <cstdint>
#include <string>

#include "bench/engine/engine_setup.h"
#include "model/batch_forward.h"

namespace troupe::bench {

struct TierFetchTimes {
  int64_t tokens = 0, blocks = 0, block_bytes = 0;
  int repeats = 0;
  double recompute_s = 0;   // median cold prefill of `tokens` tokens (+ one sample)
  double host_s = 0;        // median: every block host slot -> primary
  double disk_warm_s = 0;   // median: every block's file read, checked, copied (page cache)
  double disk_cold_s = 0;   // the same after dropping the files' pages (posix_fadvise)
};

// disk_dir: an empty folder it may fill (and leaves filled).
TierFetchTimes time_tier_fetch(const model::BatchForward& forward, const EngineBenchConfig& c,
                               int64_t tokens, const std::string& disk_dir);
void print_tier_fetch(const TierFetchTimes& t);

}  // namespace troupe::bench
