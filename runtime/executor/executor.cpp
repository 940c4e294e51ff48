#include "runtime/executor/executor.h"

#include <algorithm>
#include <memory>

#include "kernels/check.h"
#include "kernels/sampling.h"
#include "model/op_profile.h"
#include "runtime/executor/logprobs.h"
#include "runtime/kv_cache/slot_state.h"
#include "runtime/kv_cache/step_undo.h"

namespace troupe::runtime {

int64_t exact_replay_tokens(const model::ServingShape& m, bool bounded_replay) {
  const int64_t layers = bounded_replay ? m.encoder_layers + 1 : m.layers;
  return layers * std::max<int64_t>(0, m.window - 1);
}

int64_t clip_prefix_depth(const model::ServingShape& m) {
  const int64_t decoder_layers = m.layers - m.encoder_layers;
  return std::max<int64_t>(0, decoder_layers - 1) * std::max<int64_t>(0, m.window - 1) + 1;
}

Executor::Executor(const model::BatchForward& forward, PagedKvStorage& storage,
                   ExecutorOptions options, model::RoutedExperts* routed, const Drafter* drafter,
                   model::RoutedExperts* draft_routed)
    : forward_(forward),
      shape_(forward.shape()),
      storage_(storage),
      options_(options),
      context_(std::make_unique<kernels::ExecContext>(options.kernel_threads)),
      routed_(routed),
      drafter_(drafter),
      draft_routed_(draft_routed) {
  TROUPE_CHECK(!routed_ || shape_.expert_parallel,
               "expert parallelism: this model has no MoE layer to run expert-parallel");
  TROUPE_CHECK(!draft_routed_ || (routed_ && drafter_),
               "executor: an expert-parallel draft needs the target's exchange and a drafter");
}

int64_t Executor::decoder_tail_start(const ScheduledChunk& c) const {
  const int64_t R = shape_.replay_tokens;
  if (c.start >= c.num_prompt_tokens) return -1;  // decode: every layer
  if (options_.bounded_replay && R > 0)
    return std::max(c.start, c.num_prompt_tokens - R);  // T = [max(P', E_prompt - R), E)
  if (c.clip_decoder) return c.end() - 1;  // clip_prefix: the chunk's last row only
  return -1;
}

bool Executor::resolve_tokens(const ScheduledChunk& c, std::vector<int32_t>& tokens) const {
  tokens = c.token_ids;
  for (int32_t& t : tokens) {
    if (t != kPlaceholderToken) continue;
    auto it = last_sampled_.find(c.id);
    if (it == last_sampled_.end() || it->second.generation != c.generation) return false;
    t = it->second.token;
  }
  return true;
}

void Executor::apply_tier_ops(const StepPlan& plan) {
  if (plan.tier_ops.empty()) return;
  TROUPE_CHECK(tiers_ != nullptr, "a plan with host/disk tier copies, but no tier storage");
  tiers_->apply(plan.tier_ops, storage_);
}

void Executor::apply_kv_loads(const StepPlan& plan) {
  for (const KvLoad& load : plan.kv_loads) {
    const KvHandoff& h = *load.handoff;
    for (size_t i = 0; i < load.blocks.size(); ++i) {
      const std::span<const uint8_t> src = h.block(load.first_block + int64_t(i));
      std::copy(src.begin(), src.end(), storage_.block_data(load.blocks[i]).begin());
    }
    SlotStateView slot;
    const std::string why = parse_slot_state(h.slot_state(), shape_, slot);
    TROUPE_CHECK(why.empty(), "request ", load.id, "'s KV hand-off: ", why);
    storage_.load_slot_state(load.swa_slot, slot);
    started_[load.id] = load.generation;  // set up: its first decode must not reset the rings
  }
}

std::vector<SampledChunk> Executor::run(const StepPlan& plan) {
  std::vector<SampledChunk> sampled;
  run(plan, sampled);
  return sampled;
}

PagedSequence& Executor::sequence(size_t i, const ScheduledChunk& c, int64_t kv_length) {
  const int64_t lookback_start = c.start - static_cast<int64_t>(c.lookback.size());
  if (i == step_.seqs.size()) {
    step_.seqs.push_back(std::make_unique<PagedSequence>(storage_, c.block_table, c.swa_slot,
                                                         c.lookback, lookback_start, kv_length));
  } else {
    step_.seqs[i]->reset(c.block_table, c.swa_slot, c.lookback, lookback_start, kv_length);
  }
  return *step_.seqs[i];
}

StepUndo& Executor::undo(size_t i, const ScheduledChunk& c, int64_t end) {
  if (i == step_.undos.size()) {
    step_.undos.push_back(std::make_unique<StepUndo>(storage_, c.swa_slot, c.start, end));
  } else {
    step_.undos[i]->reset(c.swa_slot, c.start, end);
  }
  return *step_.undos[i];
}

void Executor::run(const StepPlan& plan, std::vector<SampledChunk>& sampled) {
  kernels::ScopedExecContext bind(*context_);
  for (RequestId id : plan.preempted) drop(id);
  for (RequestId id : plan.finished) drop(id);
  // Before any chunk reads or writes a block: saves read blocks this plan's chunks will
  // overwrite, loads fill blocks its hits read.
  apply_tier_ops(plan);
  apply_kv_loads(plan);
  StepBuffers& b = step_;
  b.tokens.resize(plan.chunks.size());
  b.ran.clear();
  b.inputs.clear();
  b.undo_of.assign(plan.chunks.size(), nullptr);
  b.drafting.clear();
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (c.fork || !resolve_tokens(c, b.tokens[i])) continue;  // a fork has no rows to run
    // A request starting (or restarting after preemption) gets clean rings and carry, or
    // those of the window snapshot its prefix hit restores (no replay then).
    auto it = started_.find(c.id);
    if (it == started_.end() || it->second != c.generation) {
      if (c.restore_slot >= 0) {
        // restore_slot == swa_slot: a LoadSnapshot tier op filled the rings already.
        if (c.restore_slot != c.swa_slot) storage_.copy_slot(c.restore_slot, c.swa_slot);
      } else {
        storage_.reset_slot(c.swa_slot);
      }
      started_[c.id] = c.generation;
    }
    const bool replay = c.start < c.num_cached_tokens;  // rebuild windows before the hit
    const int64_t kv_length = replay ? c.num_cached_tokens : c.start;
    PagedSequence& seq = sequence(b.inputs.size(), c, kv_length);
    const bool speculative = c.num_draft_tokens > 0 && drafter_ != nullptr;
    if (speculative) b.drafting.push_back(b.inputs.size());  // drafted below, all at once
    model::SequenceInput in{&seq, b.tokens[i], speculative, decoder_tail_start(c)};
    in.first_position = c.start;
    if (replay && options_.prefix_replay == PrefixReplay::Exact) in.window_rows_from = c.start;
    b.inputs.push_back(in);
    b.ran.push_back(i);
  }
  sampled.resize(plan.chunks.size());
  for (SampledChunk& s : sampled) {
    s.tokens.clear();
    s.logprobs.clear();
    s.num_draft_tokens = 0;
  }
  if (routed_ != nullptr) routed_->begin_step();
  // The draft's exchanges come first in the step, on every rank alike (the DP sync agreed
  // whether any rank drafts).
  if (draft_routed_ ? plan.draft_exchange || plan.drafts() : !b.drafting.empty()) draft_batch(plan);
  for (size_t j = 0; j < b.drafting.size(); ++j)
    prepare_verify(b.drafting[j], plan.chunks[b.ran[b.drafting[j]]], j);
  if (b.inputs.empty()) {
    if (routed_ != nullptr) forward_.run_idle(*routed_);  // a dummy step: join the exchange
    return;
  }
  forward_.run(b.inputs, b.logits, nullptr, routed_);
  // Chunks that ended on a block boundary: their rings now hold the state there.
  for (size_t i : b.ran)
    if (plan.chunks[i].snapshot_slot >= 0)
      storage_.copy_slot(plan.chunks[i].swa_slot, plan.chunks[i].snapshot_slot);

  const int64_t V = shape_.vocab_size;
  for (size_t k = 0; k < b.ran.size(); ++k) {
    const size_t i = b.ran[k];
    const ScheduledChunk& c = plan.chunks[i];
    if (!c.sample) continue;
    if (b.undo_of[i] != nullptr) {  // keep the accepted positions' state only
      verify(c, b.tokens[i], b.logits[k], sampled[i]);
      b.undo_of[i]->rollback(c.start + static_cast<int64_t>(sampled[i].tokens.size()));
    } else {
      TROUPE_CHECK(static_cast<int64_t>(b.logits[k].size()) == V, "no logits for request ", c.id);
      sample(c, b.logits[k], sampled[i]);
    }
  }
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (!c.fork) continue;
    // The leader's logits: its sampled chunk in this plan (forks follow their leaders).
    for (size_t k = 0; k < b.ran.size(); ++k) {
      const ScheduledChunk& leader = plan.chunks[b.ran[k]];
      if (leader.id != c.fork->parent || !leader.sample) continue;
      run_fork(c, b.logits[k], sampled[i]);
      break;
    }
  }
}

int32_t Executor::sample(const ScheduledChunk& c, std::span<const float> logits,
                         SampledChunk& out, uint64_t later) {
  int32_t token = 0;
  // The draws depend on the request's seed and output index only (not on its id, batch or
  // step), so a seed reproduces across requests as with vLLM's per-request generator.
  const uint64_t stream = 0, counter = c.sample_counter + later;
  kernels::SampleParams sp;
  sp.logits = logits.data();
  sp.out = &token;
  sp.m = 1;
  sp.vocab = shape_.vocab_size;
  sp.sampling = &c.sampling;
  sp.streams = &stream;
  sp.counters = &counter;
  kernels::sample(sp);
  out.tokens.push_back(token);
  if (c.num_logprobs >= 0) out.logprobs.push_back(sample_logprobs(logits, token, c.num_logprobs));
  last_sampled_[c.id] = {c.generation, token};
  return token;
}

DraftQuery Executor::draft_query(const ScheduledChunk& c, const std::vector<int32_t>& tokens) const {
  TROUPE_CHECK(tokens.size() == 1 && !c.lookback.empty() && c.start >= 1,
               "speculative chunk of request ", c.id, " needs [bonus] and its anchor token");
  return {c.id, c.start - 1, c.lookback.back(), tokens[0], draft_places(c),
          storage_.features(c.swa_slot)};
}

int64_t Executor::draft_places(const ScheduledChunk& c) const {
  // Verify positions start .. start + k' must exist (drafts stop before the last position).
  return std::min(c.num_draft_tokens, shape_.max_positions - 1 - c.start);
}

void Executor::draft_batch(const StepPlan& plan) {
  StepBuffers& b = step_;
  b.queries.clear();
  b.drafts.clear();
  for (size_t k : b.drafting) {
    const size_t i = b.ran[k];
    b.queries.push_back(draft_query(plan.chunks[i], b.tokens[i]));
    b.drafts.push_back(&b.tokens[i]);
  }
  // One batch: the step's queries share each stage's weight reads.
  const model::ScopedDraftOps profiled;  // a profiled step counts the draft's ops apart
  if (draft_routed_) drafter_->propose_batch(b.queries, b.drafts, *draft_routed_);
  else drafter_->propose_all(b.queries, b.drafts);
}

void Executor::prepare_verify(size_t k, const ScheduledChunk& c, size_t undo_index) {
  StepBuffers& b = step_;
  const size_t i = b.ran[k];
  const std::vector<int32_t>& tokens = b.tokens[i];
  TROUPE_CHECK(static_cast<int64_t>(tokens.size()) - 1 <= draft_places(c), "drafter proposed ",
               tokens.size() - 1, " tokens for ", draft_places(c), " places");
  b.inputs[k].tokens = tokens;  // the drafts may have moved the vector
  b.undo_of[i] = &undo(undo_index, c, c.start + static_cast<int64_t>(tokens.size()));
  b.seqs[k]->keep_closed_groups(b.undo_of[i]);
}

void Executor::verify(const ScheduledChunk& c, std::span<const int32_t> tokens,
                      std::span<const float> logits, SampledChunk& out) {
  const int64_t V = shape_.vocab_size;
  const auto rows = static_cast<int64_t>(tokens.size());
  TROUPE_CHECK(static_cast<int64_t>(logits.size()) == rows * V, "no verify logits for request ",
               c.id);
  out.num_draft_tokens = rows - 1;
  // Row j's logits predict position start + j + 1, whose draft is tokens[j + 1]. Each
  // emitted token is drawn by sample() with its own output index, exactly as a plain
  // decode would draw it; a draft is accepted when the draw equals it. For a drafter's
  // point-mass proposal this is the speculative-sampling rule (docs/model-notes.md,
  // "Speculative sampling"): d is kept with probability p(d), else the token comes from
  // p without d, renormalised - so every emitted token has the target's distribution,
  // and with the same seed the very tokens of plain decoding.
  for (int64_t j = 0; j < rows; ++j) {
    const int32_t t = sample(c, logits.subspan(j * V, V), out, static_cast<uint64_t>(j));
    if (j + 1 == rows || t != tokens[j + 1]) break;  // the first disagreement
  }
}

void Executor::run_fork(const ScheduledChunk& c, std::span<const float> leader_logits,
                        SampledChunk& out) {
  storage_.copy_slot(c.fork->src_slot, c.swa_slot);
  if (c.fork->src_block >= 0) storage_.copy_block(c.fork->src_block, c.fork->dst_block);
  started_[c.id] = c.generation;  // set up: its first decode must not reset the copied rings
  sample(c, leader_logits, out);
}

}  // namespace troupe::runtime
