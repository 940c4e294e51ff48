#include "runtime/scheduler/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>

#include "kernels/check.h"

namespace troupe::runtime {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, int32_t eos_token_id,
                     const model::TextTokenizer* tokenizer)
    : config_(config), kv_(kv) {
  config_.validate();
  draft_limit_ = config_.num_speculative_tokens;
  limits_.eos_token_id = eos_token_id;
  limits_.max_model_len = config_.max_model_len;
  limits_.tokenizer = tokenizer;
}

void Scheduler::check_params(RequestId id, const RequestParams& params) const {
  params.validate();
  TROUPE_CHECK(params.stop.empty() || limits_.tokenizer != nullptr, "request ", id,
               ": stop strings need a tokenizer");
  TROUPE_CHECK(!requests_.count(id) && !kv_.contains(id), "request id ", id, " is in use");
}

void Scheduler::add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                            std::vector<Sibling> siblings) {
  check_params(id, params);
  const auto n = static_cast<int64_t>(prompt.size());
  TROUPE_CHECK(n > 0, "request ", id, ": the prompt is empty");
  TROUPE_CHECK(n < config_.max_model_len, "request ", id, ": a prompt of ", n,
               " tokens leaves no room for output under max_model_len ", config_.max_model_len);
  for (size_t i = 0; i < siblings.size(); ++i) {
    check_params(siblings[i].id, siblings[i].params);
    const bool dup = siblings[i].id == id ||
                     std::any_of(siblings.begin(), siblings.begin() + i,
                                 [&](const Sibling& o) { return o.id == siblings[i].id; });
    TROUPE_CHECK(!dup, "request id ", siblings[i].id, " appears twice in the group");
  }
  // Every token the request can reach, once: decode steps then append without reallocating.
  const auto capacity = [&](const RequestParams& p) {
    return size_t(std::min(n + std::min(p.max_tokens, config_.max_model_len), config_.max_model_len));
  };
  auto r = std::make_unique<Request>(id, prompt, std::move(params), next_arrival_++);
  r->tokens.reserve(capacity(r->params));
  waiting_.emplace(queue_key(*r), r.get());
  // Siblings wait in no queue until the leader forks or drops them; their arrivals follow
  // the leader's, so one queued as a plain request keeps the group's place.
  for (Sibling& sib : siblings) {
    auto s = std::make_unique<Request>(sib.id, prompt, std::move(sib.params), next_arrival_++);
    s->tokens.reserve(capacity(s->params));
    s->leader = id;
    r->siblings.push_back(sib.id);
    requests_.emplace(sib.id, std::move(s));
  }
  requests_.emplace(id, std::move(r));
}

void Scheduler::add_imported(RequestId id, std::shared_ptr<const KvHandoff> h,
                             RequestParams params) {
  check_params(id, params);
  TROUPE_CHECK(h != nullptr, "request ", id, ": no KV to import");
  const auto n = static_cast<int64_t>(h->tokens.size());
  const int64_t outputs = n - h->num_prompt_tokens;
  TROUPE_CHECK(h->num_prompt_tokens >= 1 && outputs >= 1, "request ", id,
               ": a hand-off needs a prompt and a sampled token");
  TROUPE_CHECK(n < config_.max_model_len, "request ", id, ": ", n,
               " tokens leave no room for output under max_model_len ", config_.max_model_len);
  TROUPE_CHECK(outputs < params.max_tokens, "request ", id, " has ", outputs,
               " output tokens already, max_tokens is ", params.max_tokens);
  auto r = std::make_unique<Request>(
      id, std::span<const int32_t>(h->tokens.data(), size_t(h->num_prompt_tokens)),
      std::move(params), next_arrival_++);
  r->tokens.reserve(size_t(std::min(h->num_prompt_tokens + r->params.max_tokens, config_.max_model_len)));
  r->tokens.insert(r->tokens.end(), h->tokens.begin() + h->num_prompt_tokens, h->tokens.end());
  TROUPE_CHECK(h->text_tokens >= 0 && h->text_tokens <= outputs &&
                   h->streamed_text_bytes <= h->text.size(),
               "request ", id, ": its text state is out of range");
  // The text the sender streamed is not streamed again.
  r->detok.restore(h->text, h->text_tokens, size_t(h->streamed_text_bytes));
  if (carries_kv(*h)) r->kv_load = std::move(h);  // else it recomputes (import_handoff)
  waiting_.emplace(queue_key(*r), r.get());
  requests_.emplace(id, std::move(r));
}

const Scheduler::ParkedRequest* Scheduler::parked(RequestId id) const {
  auto it = parked_.find(id);
  return it == parked_.end() ? nullptr : &it->second;
}

void Scheduler::release_parked(RequestId id) {
  auto it = parked_.find(id);
  if (it == parked_.end()) return;
  kv_.free(id, it->second.keep_snapshot);
  parked_.erase(it);
}

Scheduler::HandOff Scheduler::hand_off(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second->finished()) return HandOff::Unknown;
  Request& r = *it->second;
  if (r.status != RequestStatus::Running) return HandOff::NotHeld;
  // Between steps with every token but its last sampled one computed. (A prompt whose
  // last chunk is still to come may also have one token left: it is not decoding yet.)
  if (r.num_placeholders == 0 && r.num_uncomputed() == 1 && r.num_output_tokens() > 0) {
    park(r);
    return HandOff::Now;
  }
  // After the samples in flight; one still (re)filling its prompt after its next sample.
  r.params.kv_hand_off_after = r.num_placeholders > 0 ? r.num_output_tokens_planned()
                                                       : r.num_output_tokens() + 1;
  return HandOff::AfterStep;
}

bool Scheduler::hands_off(const Request& r) const {
  return r.params.kv_hand_off_after > 0 && r.num_output_tokens() >= r.params.kv_hand_off_after;
}

// Outside update(): the output waits for the next one, as an abort's.
void Scheduler::park(Request& r) {
  r.status = RequestStatus::HandedOff;
  pending_.push_back(make_output(r, {}));
  release(r);
}

void Scheduler::abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second->finished()) return;
  finish_now(*it->second, RequestStatus::FinishedAborted);
}

// One step: decodes, continuing prefills, admissions - each adds chunks while the step's
// budget lasts; then the plan's chunks get their tokens and block tables.
StepPlan Scheduler::schedule() {
  StepPlan plan;
  schedule(plan);
  return plan;
}

void Scheduler::schedule(StepPlan& plan) {
  for (ScheduledChunk& c : plan.chunks) spare_chunks_.push_back(std::move(c));
  plan.chunks.clear();
  plan.preempted.clear();
  plan.tier_ops.clear();
  plan.kv_loads.clear();
  plan.placement_epoch = 0;
  plan.num_tokens = plan.prefill_context_read = plan.num_admitted = 0;
  plan.step = step_++;
  plan.draft_limit = draft_limit_;
  plan.finished.clear();
  plan.finished.swap(finished_since_plan_);
  StepBudget budget(config_);
  schedule_running(plan, budget, /*decodes=*/true);
  schedule_running(plan, budget, /*decodes=*/false);
  schedule_admissions(plan, budget);
  finalize(plan);
  // An empty plan may never reach an executor (the actors do not send one): keep the
  // finished ids (and any tier copies, which stay in kv_) for the next plan that does.
  // A plan of tier copies alone runs too: a saved prefix's disk writes must not wait for
  // the next request.
  if (plan.chunks.empty() && !kv_.has_pending_tier_ops()) {
    finished_since_plan_.swap(plan.finished);
  } else {
    plan.tier_ops = kv_.take_tier_ops();
  }
}

void Scheduler::schedule_running(StepPlan& plan, StepBudget& budget, bool decodes) {
  order_.assign(running_.begin(), running_.end());  // a copy: preemption edits running_
  // Async scheduling: a speculating decode is not planned ahead (its start waits for its
  // accepted count), so requests whose decodes speculate would settle into two phases,
  // each verified every other step with half of them (staggered arrivals: 32 steps where
  // sync scheduling takes 22 for the same tokens, tests/runtime/speculative_engine_test.cpp).
  // So while a plan in flight verifies drafts, no other request starts to: the ones
  // ready now join the next plan's verify, and every speculating request runs in one.
  const bool verify_in_flight = decodes && std::any_of(running_.begin(), running_.end(), [](const Request* q) {
    return q->num_speculative_in_flight > 0;
  });
  for (Request* r : order_) {
    const int64_t uncomputed = r->num_uncomputed();
    // Preempted earlier in this step, or waiting for its sampled token (planner ahead).
    if (r->status != RequestStatus::Running || uncomputed == 0 || !may_decode_ahead(*r)) continue;
    const bool prefill = uncomputed > 1;
    if (prefill == decodes) continue;
    const ChunkCandidate c{*r, r->num_computed_tokens, prefill};
    int64_t n = num_new_tokens(c, budget, config_);
    const int64_t drafts = n == 1 && !prefill ? num_draft_tokens(*r, budget) : 0;
    if (drafts > 0 && verify_in_flight) continue;
    n += drafts;
    if (n == 0 || !reserve(*r, c.start + n, plan, budget)) continue;
    add_chunk(*r, c.start, n, prefill, plan, budget);
    if (drafts == 0) continue;
    plan.chunks.back().num_draft_tokens = drafts;
    plan.chunks.back().sample = true;  // ends at its last token: the drafts are not tokens yet
  }
}

// Greedy and sampled requests alike: verification draws each token as plain decoding
// would (Executor::verify), so sampling stays exact.
bool Scheduler::speculates(const Request& r) const { return draft_limit_ > 0; }

void Scheduler::set_draft_limit(int64_t k) {
  draft_limit_ = std::clamp<int64_t>(k, 0, config_.num_speculative_tokens);
}

// Drafts a speculating decode verifies: k, cut so that the accepted drafts and the
// target's token fit max_tokens, max_model_len and the step's token budget (the decode's
// own token is already taken out of tokens_left).
int64_t Scheduler::num_draft_tokens(const Request& r, const StepBudget& budget) const {
  if (!speculates(r)) return 0;
  const int64_t until = r.params.kv_hand_off_after > 0 ? r.params.kv_hand_off_after : r.params.max_tokens;
  const int64_t k = std::min({draft_limit_, until - r.num_output_tokens() - 1,
                              config_.max_model_len - r.num_tokens() - 1, budget.tokens_left - 1});
  return std::max<int64_t>(0, k);
}

void Scheduler::schedule_admissions(StepPlan& plan, StepBudget& budget) {
  // Blocks ran out this step: admitting now would only preempt again (as vLLM).
  if (!plan.preempted.empty()) return;
  while (!waiting_.empty() && budget.admissions_left > 0 && budget.tokens_left > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_num_running) {
    if (!try_admit(*waiting_.begin()->second, plan, budget)) return;  // FCFS: no overtaking
  }
}

// Admits the head of the waiting queue with its first chunk. Returns false when it has
// to wait (the step is full or the KV cache is); a request that can never run is
// finished with an error instead, so the queue never blocks on it.
bool Scheduler::try_admit(Request& r, StepPlan& plan, StepBudget& budget) {
  if (r.kv_load) return try_admit_loaded(r, plan, budget);
  if (fails_to_fit(r)) return true;
  CachedPrefix hit = kv_.find_cached_prefix(r.tokens, false, r.num_prompt_tokens);
  // Extension point: bounded-replay planning picks where the first chunk starts.
  const int64_t start = hit.replay_from;
  const ChunkCandidate c{r, start, r.num_tokens() - start > 1};
  if (!config_.enable_chunked_prefill && r.num_tokens() - start > config_.max_num_batched_tokens) {
    fail(r, "prompt exceeds max_num_batched_tokens and chunked prefill is off");
    return true;
  }
  const int64_t n = num_new_tokens(c, budget, config_);
  if (n == 0) return false;
  std::optional<Admission> adm = kv_.admit(r.id, std::move(hit), start + n);
  if (!adm) return waits_for_room(r);
  start_running(r, adm->replay_from, adm->num_cached_tokens, adm->restore_slot, plan, budget);
  add_chunk(r, start, n, c.prefill, plan, budget);
  return true;
}

// Admits a request that brings its KV: its blocks past the longest prefix cached here
// are loaded (KvLoad), its window comes with them (no replay), and its first chunk
// decodes its last token in this plan.
bool Scheduler::try_admit_loaded(Request& r, StepPlan& plan, StepBudget& budget) {
  if (budget.kv_loads_left == 0) return false;
  if (fails_to_fit(r)) return true;
  const int64_t computed = r.num_tokens() - 1;
  CachedPrefix hit = kv_.find_cached_prefix(r.tokens, /*has_window=*/true, r.num_prompt_tokens);
  std::optional<Admission> adm = kv_.admit(r.id, std::move(hit), computed + 1);
  if (!adm) return waits_for_room(r);
  start_running(r, computed, r.kv_load->num_cached_tokens, -1, plan, budget);
  --budget.kv_loads_left;
  KvLoad& load = plan.kv_loads.emplace_back();
  load.id = r.id;
  load.first_block = adm->num_cached_tokens / kv_.config().block_size;
  const auto table = kv_.block_table(r.id);
  load.blocks.assign(table.begin() + load.first_block, table.begin() + r.kv_load->num_blocks);
  load.swa_slot = adm->swa_slot;
  load.generation = r.num_preemptions;
  load.handoff = std::move(r.kv_load);
  add_chunk(r, computed, 1, /*prefill=*/false, plan, budget);
  return true;
}

// A request longer than the whole cache can never run: it fails (true).
bool Scheduler::fails_to_fit(Request& r) {
  const int64_t need = kv_.blocks_for(r.num_tokens());
  if (need <= kv_.pool().num_blocks()) return false;
  fail(r, "needs " + std::to_string(need) + " KV blocks, the cache has " +
              std::to_string(kv_.pool().num_blocks()));
  return true;
}

// The cache had no room for r: it waits (false) while running requests or parked ones
// hold it - room comes back as they finish or are released - and fails (true) alone.
bool Scheduler::waits_for_room(Request& r) {
  if (!running_.empty() || !parked_.empty()) return false;
  fail(r, "does not fit in an empty KV cache");
  return true;
}

// r leaves the waiting queue holding its admission: tokens [0, num_computed) have KV.
void Scheduler::start_running(Request& r, int64_t num_computed, int64_t num_cached,
                              int32_t restore_slot, StepPlan& plan, StepBudget& budget) {
  waiting_.erase(queue_key(r));
  kv_.reserve(r.id, static_cast<int64_t>(r.tokens.capacity()));
  r.status = RequestStatus::Running;
  r.num_computed_tokens = num_computed;
  r.num_cached_tokens = num_cached;
  r.restore_slot = restore_slot;
  running_.push_back(&r);
  --budget.admissions_left;
  ++plan.num_admitted;
}

// Grows r's block table to total_tokens, preempting the newest running requests while
// blocks are short. False if r itself was preempted or failed, or if it is alone and
// parked requests hold the blocks it needs (it waits for their release).
bool Scheduler::reserve(Request& r, int64_t total_tokens, StepPlan& plan, StepBudget& budget) {
  while (!kv_.allocate(r.id, total_tokens)) {
    if (running_.size() == 1 && !parked_.empty()) return false;  // waits for their release
    if (running_.size() == 1) {  // r alone, every other block free or evictable
      fail(r, "needs more KV blocks than the whole cache holds at " + std::to_string(total_tokens) +
                  " tokens");
      return false;
    }
    Request& victim = preemption_victim();
    preempt(victim, plan, budget);
    if (&victim == &r) return false;
  }
  return true;
}

// A request whose last sample is still in flight may decode it in this plan (the
// executor fills in the token), unless that sample may be its last: max_tokens or
// max_model_len reached counting it. EOS and stop strings are only known at update();
// a decode planned past them is dropped then (one wasted row, as vLLM's async scheduling).
bool Scheduler::may_decode_ahead(const Request& r) const {
  // Its hand-off point is planned: it parks when that sample comes back.
  if (r.params.kv_hand_off_after > 0 && r.num_output_tokens_planned() >= r.params.kv_hand_off_after)
    return false;
  if (r.num_placeholders == 0) return true;
  // Where its next decode starts depends on the accepted count (of a speculative chunk in
  // flight); a decode that would speculate waits for its bonus token.
  if (speculates(r) || r.num_speculative_in_flight > 0) return false;
  if (r.num_placeholders > 1) return false;  // one plan ahead at most (lookback stays known)
  return r.num_output_tokens_planned() < r.params.max_tokens &&
         r.num_tokens_planned() < config_.max_model_len;
}

Scheduler::QueueKey Scheduler::queue_key(const Request& r) const {
  const int64_t p = config_.policy == SchedulePolicy::Priority ? r.params.priority : 0;
  return {p, r.arrival};
}

// The running request that would be admitted last: newest arrival (lowest priority first
// under the priority policy).
Request& Scheduler::preemption_victim() {
  auto it = std::max_element(running_.begin(), running_.end(),
                             [&](Request* a, Request* b) { return queue_key(*a) < queue_key(*b); });
  return **it;
}

void Scheduler::preempt(Request& r, StepPlan& plan, StepBudget& budget) {
  spdlog::debug("scheduler: preempting request {} at {} tokens (it recomputes)", r.id,
                r.num_tokens());
  auto chunk = std::find_if(plan.chunks.begin(), plan.chunks.end(),
                            [&](const ScheduledChunk& c) { return c.id == r.id; });
  if (chunk != plan.chunks.end()) {
    budget.give_back(*chunk);
    plan.chunks.erase(chunk);
  }
  kv_.free(r.id, r.snapshot_writes_in_flight == 0);
  running_.erase(std::find(running_.begin(), running_.end(), &r));
  r.status = RequestStatus::Preempted;
  r.restore_slot = -1;
  r.num_computed_tokens = 0;  // recompute prompt and output; a prefix hit may shorten it
  r.num_placeholders = 0;     // the plan in flight's sample is dropped (a stale generation)
  r.num_speculative_in_flight = 0;
  r.num_cached_tokens = 0;
  ++r.num_preemptions;
  waiting_.emplace(queue_key(r), &r);
  plan.preempted.push_back(r.id);
}

// A chunk with its buffers from a spare one where there is one. Every chunk has room for
// a decode's tokens (the drafts and one more) and the full lookback from the start: chunks
// are taken in no fixed order, so one that had only ever held short ones would otherwise
// grow the first time it carries a decode of a long request.
ScheduledChunk& Scheduler::new_chunk(StepPlan& plan) {
  ScheduledChunk& c = plan.chunks.emplace_back();
  if (!spare_chunks_.empty()) {
    ScheduledChunk& spare = spare_chunks_.back();
    c.token_ids = std::move(spare.token_ids);
    c.lookback = std::move(spare.lookback);
    c.block_table = std::move(spare.block_table);
    spare_chunks_.pop_back();
    c.token_ids.clear();
    c.lookback.clear();
    c.block_table.clear();
  }
  c.token_ids.reserve(size_t(config_.num_speculative_tokens + 1));
  c.lookback.reserve(size_t(config_.chunk_lookback_tokens));
  return c;
}

void Scheduler::add_chunk(Request& r, int64_t start, int64_t n, bool prefill, StepPlan& plan,
                          StepBudget& budget) {
  ScheduledChunk& c = new_chunk(plan);
  c.id = r.id;
  c.start = start;
  c.num_tokens = n;
  c.num_cached_tokens = r.num_cached_tokens;
  c.sample = start + n == r.num_tokens_planned();
  c.sampling = r.params.sampling;
  c.num_logprobs = r.params.num_logprobs;
  c.sample_counter = static_cast<uint64_t>(r.num_output_tokens_planned());
  c.generation = r.num_preemptions;
  c.prefill = prefill;
  c.clip_decoder = prefill && clips_decoder(c.end(), r.num_prompt_tokens, config_);
  budget.take(c);
}

// After every preemption is settled: copy tokens and final block tables into the plan
// and advance num_computed_tokens (as vLLM, at schedule time, so a next plan can follow
// before this one ran).
void Scheduler::finalize(StepPlan& plan) {
  for (ScheduledChunk& c : plan.chunks) {
    Request& r = *requests_.at(c.id);
    // A position not sampled yet (a plan in flight samples it) travels as kPlaceholderToken.
    const int64_t known = std::min(c.end(), r.num_tokens());
    // Chunks are recycled across requests in no fixed order (new_chunk): each gets room
    // for the longest request's table seen so far (its whole length, as its own table
    // had at admission: KvCacheManager::reserve), so a table grows only when a longer
    // request arrives, never block by block.
    const auto table = kv_.block_table(c.id);
    chunk_table_room_ = std::max({chunk_table_room_, table.size(),
                                  size_t(kv_.blocks_for(static_cast<int64_t>(r.tokens.capacity())))});
    c.block_table.reserve(chunk_table_room_);
    c.token_ids.assign(r.tokens.begin() + c.start, r.tokens.begin() + known);
    c.token_ids.resize(size_t(c.num_tokens - c.num_draft_tokens), kPlaceholderToken);
    const int64_t back = std::max<int64_t>(0, c.start - config_.chunk_lookback_tokens);
    TROUPE_CHECK(c.start <= r.num_tokens(), "request ", r.id, ": its chunk at ", c.start,
                 " would need placeholders in its lookback");
    c.lookback.assign(r.tokens.begin() + back, r.tokens.begin() + c.start);
    c.num_prompt_tokens = r.num_prompt_tokens;
    c.block_table.assign(table.begin(), table.end());
    c.swa_slot = kv_.swa_slot(c.id);
    c.restore_slot = std::exchange(r.restore_slot, -1);  // only the first chunk restores
    // A speculative chunk's end depends on its accepted count: no window snapshot there;
    // nor after a clipped chunk, whose decoder rings lack the rows full compute has.
    if (config_.snapshot_block_size > 0 && c.num_draft_tokens == 0 && !c.clip_decoder &&
        c.end() % config_.snapshot_block_size == 0) {
      c.snapshot_slot = kv_.snapshot_slot_for(c.id);
      r.snapshot_writes_in_flight += c.snapshot_slot >= 0;
    }
    // Drafts are computed only once accepted (update()).
    r.num_computed_tokens = c.end() - c.num_draft_tokens;
    if (c.sample) ++r.num_placeholders;
    if (c.num_draft_tokens > 0) ++r.num_speculative_in_flight;
    plan.num_tokens += c.num_tokens;
    if (c.prefill) plan.prefill_context_read += c.end();
  }
  // After the loop: forks append chunks. A leader's first sample ends its prompt.
  for (size_t i = 0, n = plan.chunks.size(); i < n; ++i) {
    Request& r = *requests_.at(plan.chunks[i].id);
    if (plan.chunks[i].sample && !r.siblings.empty()) fork_siblings(r, plan);
  }
}

// The leader's prompt ends in this plan: each sibling becomes a running request that
// shares the prompt's KV, with its first sample in this plan; one that finds no room is
// queued as a plain request (the prefix cache serves it later).
void Scheduler::fork_siblings(Request& leader, StepPlan& plan) {
  for (RequestId id : std::exchange(leader.siblings, {})) {
    Request& s = *requests_.at(id);
    s.leader = -1;
    if (!try_fork(leader, s, plan)) waiting_.emplace(queue_key(s), &s);
  }
}

bool Scheduler::try_fork(Request& leader, Request& s, StepPlan& plan) {
  if (static_cast<int64_t>(running_.size()) >= config_.max_num_running) return false;
  const int64_t n = leader.num_prompt_tokens;
  std::optional<Fork> f = kv_.fork(leader.id, s.id, n);
  if (!f) return false;
  kv_.reserve(s.id, static_cast<int64_t>(s.tokens.capacity()));
  s.status = RequestStatus::Running;
  s.num_computed_tokens = n;
  s.num_placeholders = 1;   // its first sample, from the leader's logits in this plan
  s.num_cached_tokens = n;  // its whole prompt came from the leader's KV
  running_.push_back(&s);
  ScheduledChunk& c = new_chunk(plan);
  c.id = s.id;
  c.start = n;
  c.num_cached_tokens = n;
  c.num_prompt_tokens = n;
  c.sample = true;
  c.sampling = s.params.sampling;
  c.num_logprobs = s.params.num_logprobs;
  const auto table = kv_.block_table(s.id);
  c.block_table.assign(table.begin(), table.end());
  c.swa_slot = f->swa_slot;
  c.fork = ForkOp{leader.id, kv_.swa_slot(leader.id), f->src_block, f->dst_block};
  return true;
}

std::vector<RequestOutput> Scheduler::update(const StepPlan& plan,
                                             std::span<const SampledChunk> sampled) {
  std::vector<RequestOutput> outputs;
  update(plan, sampled, outputs);
  return outputs;
}

void Scheduler::recycle(std::vector<RequestOutput>& outputs) {
  for (RequestOutput& o : outputs) spare_outputs_.push_back(std::move(o));
  outputs.clear();
}

void Scheduler::update(const StepPlan& plan, std::span<const SampledChunk> sampled,
                       std::vector<RequestOutput>& outputs) {
  TROUPE_CHECK(sampled.size() == plan.chunks.size(), "update: ", sampled.size(),
               " sampled lists for ", plan.chunks.size(), " chunks");
  for (RequestOutput& o : pending_) outputs.push_back(std::move(o));
  pending_.clear();
  kv_.tier_ops_done(plan.tier_ops);  // its spills' files are written: disk hits from now
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    auto it = requests_.find(c.id);
    if (it == requests_.end()) continue;  // aborted (and reported) since the plan
    Request& r = *it->second;
    r.snapshot_writes_in_flight -= c.snapshot_slot >= 0;
    if (r.status != RequestStatus::Running || r.num_preemptions != c.generation) continue;
    if (c.sample) --r.num_placeholders;
    if (c.num_draft_tokens > 0) --r.num_speculative_in_flight;
    kv_.commit_full_blocks(r.id, r.tokens, c.end() - c.num_draft_tokens);
    if (c.snapshot_slot >= 0) kv_.note_snapshot(r.id, c.end());
    if (!c.sample) continue;
    const SampledChunk& got = sampled[i];
    TROUPE_CHECK(!got.tokens.empty(), "update: no sampled token for request ", r.id);
    const auto accepted = static_cast<int64_t>(got.tokens.size()) - 1;  // drafts kept in the KV
    TROUPE_CHECK(accepted <= c.num_draft_tokens, "update: ", got.tokens.size(),
                 " tokens for request ", r.id, "'s chunk of ", c.num_draft_tokens, " drafts");
    r.num_computed_tokens += accepted;
    RequestOutput& o = append_output(r, outputs);
    for (size_t j = 0; j < got.tokens.size(); ++j) {
      r.tokens.push_back(got.tokens[j]);
      o.new_tokens.push_back(got.tokens[j]);
      if (j < got.logprobs.size()) o.new_logprobs.push_back(got.logprobs[j]);
      if (check_stop(r, limits_)) break;
    }
    if (accepted > 0 && !r.finished())
      kv_.commit_full_blocks(r.id, r.tokens, r.num_computed_tokens);
    if (!r.finished() && hands_off(r)) r.status = RequestStatus::HandedOff;
    fill_output(r, o);  // the state after the appended tokens
    if (r.finished()) release(r);
  }
  if (config_.check_kv_invariants) kv_.check_invariants();
}

void Scheduler::fail(RequestId id, std::string why, ErrorCause cause) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second->finished()) return;
  fail(*it->second, std::move(why), cause);
}

std::vector<RequestOutput> Scheduler::take_finished() {
  return std::exchange(pending_, {});
}

void Scheduler::fail(Request& r, std::string why, ErrorCause cause) {
  if (cause == ErrorCause::NoFit) spdlog::warn("scheduler: request {}: {}", r.id, why);
  r.error = std::move(why);
  r.error_cause = cause;
  finish_now(r, RequestStatus::FinishedError);
}

// Ends a request outside update() (abort, error): its blocks are freed at once, the
// output waits for the next update().
void Scheduler::finish_now(Request& r, RequestStatus status) {
  if (limits_.tokenizer != nullptr) {
    r.detok.flush(*limits_.tokenizer, r.output(), r.params.skip_special_tokens);
  }
  r.status = status;
  pending_.push_back(make_output(r, {}));
  release(r);
}

RequestOutput Scheduler::make_output(Request& r, std::vector<int32_t> new_tokens) {
  RequestOutput o;
  o.new_tokens = std::move(new_tokens);
  fill_output(r, o);
  return o;
}

RequestOutput& Scheduler::append_output(Request& r, std::vector<RequestOutput>& outputs) {
  if (spare_outputs_.empty()) {
    outputs.emplace_back();
  } else {
    outputs.push_back(std::move(spare_outputs_.back()));
    spare_outputs_.pop_back();
  }
  RequestOutput& o = outputs.back();
  o.id = r.id;
  o.new_tokens.clear();
  o.new_logprobs.clear();
  o.new_text.clear();
  return o;
}

// Everything but the new tokens and logprobs, as of r's state now.
void Scheduler::fill_output(Request& r, RequestOutput& o) {
  o.id = r.id;
  o.status = r.status;
  o.stop_reason = r.stop_reason;
  o.error = r.error;
  o.error_cause = r.error_cause;
  o.num_cached_tokens = r.num_cached_tokens;
  if (limits_.tokenizer != nullptr) {
    const std::string& text = r.detok.text();
    // A request handed off streams on elsewhere: it holds back as a running one.
    const bool final = r.finished() && r.status != RequestStatus::HandedOff;
    const size_t hold = final ? 0 : stop_holdback(text, r.params.stop);
    o.new_text = r.detok.take_stream(text.size() - hold);
  }
}

// Drops a request that ended: its KV, its queue entry, and the request itself. A leader
// that ends before its prompt did leaves its siblings as plain queued requests.
void Scheduler::release(Request& r) {
  for (RequestId id : std::exchange(r.siblings, {})) {
    Request& s = *requests_.at(id);
    s.leader = -1;
    waiting_.emplace(queue_key(s), &s);
  }
  if (r.leader >= 0) {  // a sibling not forked yet
    auto& group = requests_.at(r.leader)->siblings;
    group.erase(std::find(group.begin(), group.end(), r.id));
  }
  if (!r.params.kv_save.empty()) {  // KV save: the finished prompt's blocks stay pinned
    const bool ok = r.status != RequestStatus::FinishedError && r.status != RequestStatus::FinishedAborted &&
                    r.status != RequestStatus::HandedOff;
    if (ok) kv_.pin_finished(r.id);
    else kv_.cancel_pin(r.id);
  }
  if (r.status == RequestStatus::HandedOff) {  // its KV stays until release_parked()
    parked_[r.id] = ParkedRequest{r.tokens,
                                  r.params,
                                  r.num_prompt_tokens,
                                  r.num_cached_tokens,
                                  r.detok.text(),
                                  r.detok.read_offset(),
                                  r.detok.streamed(),
                                  r.snapshot_writes_in_flight == 0};
  } else {
    kv_.free(r.id, r.snapshot_writes_in_flight == 0);
  }
  auto run = std::find(running_.begin(), running_.end(), &r);
  if (run != running_.end()) {
    running_.erase(run);
  } else {
    waiting_.erase(queue_key(r));
  }
  finished_since_plan_.push_back(r.id);
  requests_.erase(r.id);  // r dies here
}

const Request* Scheduler::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::vector<RequestId> Scheduler::running_ids() const {
  std::vector<RequestId> ids;
  for (const Request* r : running_) ids.push_back(r->id);
  return ids;
}

std::vector<RequestId> Scheduler::waiting_ids() const {
  std::vector<RequestId> ids;
  for (const auto& [key, r] : waiting_) ids.push_back(r->id);
  // Siblings waiting for their leader's prompt (in no queue) wait too, as vLLM counts
  // the n child requests; in id order after the queue.
  std::vector<RequestId> siblings;
  for (const auto& [id, r] : requests_)
    if (r->leader >= 0) siblings.push_back(id);
  std::sort(siblings.begin(), siblings.end());
  ids.insert(ids.end(), siblings.begin(), siblings.end());
  return ids;
}

}  // namespace troupe::runtime
