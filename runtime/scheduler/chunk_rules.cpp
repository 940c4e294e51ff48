#include "runtime/scheduler/chunk_rules.h"

#include <algorithm>
#include <array>

namespace troupe::runtime {

StepBudget::StepBudget(const SchedulerConfig& c)
    : tokens_left(c.max_num_batched_tokens),
      context_read_left(c.max_prefill_context_read),
      admissions_left(c.max_admissions_per_step),
      kv_loads_left(c.max_kv_loads_per_step) {}

void StepBudget::take(const ScheduledChunk& c) {
  tokens_left -= c.num_tokens;
  if (!c.prefill) return;
  context_read_left -= c.end();
  ++num_prefill_chunks;
}

void StepBudget::give_back(const ScheduledChunk& c) {
  tokens_left += c.num_tokens;
  if (!c.prefill) return;
  context_read_left += c.end();
  --num_prefill_chunks;
}

int64_t clip_to_token_budget(const ChunkCandidate&, int64_t n, const StepBudget& b,
                             const SchedulerConfig&) {
  return std::min(n, b.tokens_left);
}

// Without chunked prefill a prompt runs in one step or not at all. (A prompt longer than
// the whole token budget could then never run; validate() leaves that to the caller, as
// vLLM does, and the request is reported as an error by the scheduler.)
int64_t clip_unchunked_prefill(const ChunkCandidate& c, int64_t n, const StepBudget&,
                               const SchedulerConfig& cfg) {
  if (cfg.enable_chunked_prefill || !c.prefill) return n;
  return n == c.r.num_tokens_planned() - c.start ? n : 0;
}

// Chunk [start, start + n) reads `start + n` tokens of context. The first prefill chunk
// of a step is exempt: its start alone may exceed the cap.
int64_t clip_context_read(const ChunkCandidate& c, int64_t n, const StepBudget& b,
                          const SchedulerConfig&) {
  if (!c.prefill || b.num_prefill_chunks == 0) return n;
  return std::clamp<int64_t>(b.context_read_left - c.start, 0, n);
}

// Window snapshots (docs/kv-cache.md): a prefill chunk that would run past the last block
// boundary of the tokens known so far ends on it, so the executor can copy the rings at
// that boundary (the state a next turn's prefix hit there needs; a chunk's rings hold
// only its last W positions). The rest follows in the next step.
int64_t end_at_snapshot_boundary(const ChunkCandidate& c, int64_t n, const StepBudget&,
                                 const SchedulerConfig& cfg) {
  const int64_t bs = cfg.snapshot_block_size;
  if (bs <= 0 || !c.prefill || !cfg.enable_chunked_prefill) return n;
  const int64_t last = c.r.num_tokens() / bs * bs;
  return c.start < last && c.start + n > last ? last - c.start : n;
}

int64_t end_at_clip_boundary(const ChunkCandidate& c, int64_t n, const StepBudget&,
                             const SchedulerConfig& cfg) {
  if (cfg.clip_prefix_depth <= 0 || !c.prefill) return n;
  const int64_t cut = c.r.num_prompt_tokens - cfg.clip_prefix_depth;
  return c.start < cut && c.start + n > cut ? cut - c.start : n;
}

bool clips_decoder(int64_t end, int64_t num_prompt_tokens, const SchedulerConfig& cfg) {
  return cfg.clip_prefix_depth > 0 && end <= num_prompt_tokens - cfg.clip_prefix_depth;
}

namespace {
constexpr std::array<ChunkRule, 5> kChunkRules = {
    clip_to_token_budget,
    clip_unchunked_prefill,
    clip_context_read,
    end_at_clip_boundary,
    end_at_snapshot_boundary,
};
}  // namespace

int64_t num_new_tokens(const ChunkCandidate& c, const StepBudget& b, const SchedulerConfig& cfg) {
  int64_t n = c.r.num_tokens_planned() - c.start;
  for (ChunkRule rule : kChunkRules) {
    if (n <= 0) return 0;
    n = rule(c, n, b, cfg);
  }
  return std::max<int64_t>(n, 0);
}

}  // namespace troupe::runtime
