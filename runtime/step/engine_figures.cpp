#include "runtime/step/engine_figures.h"

namespace troupe::runtime {

void add_counts(std::vector<int64_t>& to, std::span<const int64_t> from) {
  if (to.size() < from.size()) to.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) to[i] += from[i];
}

void count_kv_transfer(EngineFigures& f, int64_t bytes, double seconds) {
  f.kv_transfer_bytes += bytes;
  f.kv_transfer_seconds_sum += seconds;
  f.kv_transfer_seconds_buckets.resize(kKvTransferSecondsBounds.size() + 1, 0);
  size_t b = 0;
  while (b < kKvTransferSecondsBounds.size() && seconds > kKvTransferSecondsBounds[b]) ++b;
  f.kv_transfer_seconds_buckets[b] += 1;
}

EngineFigures sum_figures(std::span<const EngineFigures> ranks) {
  EngineFigures s;
  for (const EngineFigures& r : ranks) {
    s.running += r.running;
    s.waiting += r.waiting;
    s.used_blocks += r.used_blocks;
    s.free_blocks += r.free_blocks;
    s.steps += r.steps;
    s.preemptions += r.preemptions;
    s.admitted += r.admitted;
    s.scheduled_tokens += r.scheduled_tokens;
    s.prefix_query_tokens += r.prefix_query_tokens;
    s.prefix_hit_tokens += r.prefix_hit_tokens;
    s.prefix_snapshot_hits += r.prefix_snapshot_hits;
    s.prefix_replay_hits += r.prefix_replay_hits;
    s.prefix_replay_tokens += r.prefix_replay_tokens;
    s.failed_steps += r.failed_steps;
    s.kv_pins += r.kv_pins;
    s.kv_pinned_bytes += r.kv_pinned_bytes;
    s.kv_restore_hits += r.kv_restore_hits;
    s.restarts = r.restarts;  // the instance restarts all its ranks together
    s.schedule_cpu_s += r.schedule_cpu_s;
    s.update_cpu_s += r.update_cpu_s;
    s.rank_busy_seconds += r.rank_busy_seconds;
    for (int t = 0; t < 3; ++t) {
      s.tier_bytes[t] += r.tier_bytes[t];
      s.prefix_tier_hit_tokens[t] += r.prefix_tier_hit_tokens[t];
    }
    s.spec_num_drafts += r.spec_num_drafts;
    s.spec_num_draft_tokens += r.spec_num_draft_tokens;
    s.spec_num_accepted_tokens += r.spec_num_accepted_tokens;
    add_counts(s.spec_accepted_per_pos, r.spec_accepted_per_pos);
    add_counts(s.spec_steps_by_k, r.spec_steps_by_k);
    s.kv_transfer_bytes += r.kv_transfer_bytes;
    add_counts(s.kv_transfer_seconds_buckets, r.kv_transfer_seconds_buckets);
    s.kv_transfer_seconds_sum += r.kv_transfer_seconds_sum;
    for (size_t c = 0; c < kKvTransferFailureNames.size(); ++c)
      s.kv_transfer_failures[c] += r.kv_transfer_failures[c];
    s.kv_transfer_fallbacks += r.kv_transfer_fallbacks;
    s.kv_transfer_rma += r.kv_transfer_rma;
    s.kv_transfer_messages += r.kv_transfer_messages;
    s.kv_transfer_descriptors += r.kv_transfer_descriptors;
    s.kv_transfer_leases_expired += r.kv_transfer_leases_expired;
    if (r.eplb_rebalances > s.eplb_rebalances) {  // the ranks switch together: the latest
      s.eplb_rebalances = r.eplb_rebalances;
      s.eplb_balance_before = r.eplb_balance_before;
      s.eplb_balance_after = r.eplb_balance_after;
    }
    if (r.eplb_draft_rebalances > s.eplb_draft_rebalances) {
      s.eplb_draft_rebalances = r.eplb_draft_rebalances;
      s.eplb_draft_balance_before = r.eplb_draft_balance_before;
      s.eplb_draft_balance_after = r.eplb_draft_balance_after;
    }
  }
  const int64_t blocks = s.used_blocks + s.free_blocks;
  s.kv_usage = blocks > 0 ? double(s.used_blocks) / double(blocks) : 0.0;
  s.per_rank.assign(ranks.begin(), ranks.end());
  return s;
}

}  // namespace troupe::runtime
