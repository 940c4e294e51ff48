#include "runtime/step/step_pipeline.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>

#include "kernels/check.h"
#include "runtime/speculative/cost_table_file.h"

namespace troupe::runtime {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void record_plan(EngineFigures& f, const StepPlan& plan, double plan_seconds) {
  f.schedule_cpu_s += plan_seconds;
  if (plan.empty()) return;
  f.steps += 1;
  f.preemptions += static_cast<int64_t>(plan.preempted.size());
  f.admitted += plan.num_admitted;
  f.scheduled_tokens += plan.num_tokens;
  auto& recent = f.recent_steps;
  if (recent.size() == EngineFigures::kMaxRecentSteps)
    recent.erase(recent.begin(), recent.begin() + EngineFigures::kRecentStepsDrop);
  else if (recent.capacity() < EngineFigures::kMaxRecentSteps)
    recent.reserve(EngineFigures::kMaxRecentSteps);  // once: the buffer is kept from here on
  recent.push_back({f.steps, plan.num_admitted, plan_seconds});
}

// The drafts verified in a step and how many of each position were accepted; a step
// with decodes counts under its draft limit.
void record_speculation(EngineFigures& f, const StepPlan& plan, const StepOutcome& outcome) {
  for (const auto& [drafted, accepted] : outcome.drafts) {
    f.spec_num_drafts += 1;
    f.spec_num_draft_tokens += drafted;
    f.spec_num_accepted_tokens += accepted;
    if (static_cast<int64_t>(f.spec_accepted_per_pos.size()) < drafted)
      f.spec_accepted_per_pos.resize(size_t(drafted), 0);
    for (int64_t j = 0; j < accepted; ++j) f.spec_accepted_per_pos[size_t(j)] += 1;
  }
  if (outcome.batch == 0) return;
  if (static_cast<int64_t>(f.spec_steps_by_k.size()) <= plan.draft_limit)
    f.spec_steps_by_k.resize(size_t(plan.draft_limit + 1), 0);
  f.spec_steps_by_k[size_t(plan.draft_limit)] += 1;
}

// What the step tells the cost table: its decodes, the drafts they verified (k: the most
// any chunk drafted, as the time was spent on those), whether the time is theirs alone.
void step_outcome(const StepPlan& plan, std::span<const SampledChunk> sampled, double seconds,
                  StepOutcome& o) {
  o = StepOutcome{0, 0, true, 0, std::move(o.drafts), 0};
  o.drafts.clear();
  o.seconds = seconds;
  o.limit = plan.draft_limit;
  for (size_t i = 0; i < sampled.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (c.prefill || c.fork) o.decode_only = false;
    else o.batch += 1;
    if (sampled[i].num_draft_tokens <= 0) continue;
    o.k = std::max(o.k, sampled[i].num_draft_tokens);
    o.drafts.emplace_back(sampled[i].num_draft_tokens,
                          static_cast<int64_t>(sampled[i].tokens.size()) - 1);
  }
}

}  // namespace

StepPipeline::StepPipeline(Scheduler& scheduler, EngineFigures& figures, int depth, int group_ranks)
    : scheduler_(scheduler), figures_(figures), depth_(depth), group_ranks_(group_ranks) {
  TROUPE_CHECK(depth >= 1, "StepPipeline: depth must be >= 1, got ", depth);
  plans_.resize(size_t(depth));
  const SchedulerConfig& c = scheduler.config();
  if (!c.adaptive_speculation) return;
  std::vector<StepTimeSample> seed = c.speculation_seed;
  if (!c.speculation_table_file.empty()) {
    // A file that cannot be read is not worth refusing to serve for: the table is then
    // calibrated as without one, and the file replaced at the first write.
    try {
      const std::vector<StepTimeSample> kept = read_cost_table(c.speculation_table_file);
      seed.insert(seed.end(), kept.begin(), kept.end());  // after the seed: the newer times
      if (!kept.empty())
        spdlog::info("speculative-config table_file {}: {} step times read",
                     c.speculation_table_file, kept.size());
    } catch (const Error& e) {
      spdlog::warn("speculative-config table_file: {} (starting without it)", e.what());
    }
  }
  // A group's table is by the group's batch: up to every rank's max-num-seqs.
  chooser_ = std::make_unique<DraftLengthChooser>(c.num_speculative_tokens,
                                                  c.max_num_running * std::max(1, group_ranks), seed);
}

StepPipeline::~StepPipeline() {
  if (timed_since_save_ > 0) save_table();
}

void StepPipeline::save_table() {
  const std::string& path = scheduler_.config().speculation_table_file;
  timed_since_save_ = 0;
  if (!chooser_ || path.empty()) return;
  try {
    write_cost_table(path, chooser_->table().cells());
  } catch (const std::exception& e) {  // Error, or bad_alloc: serving goes on regardless
    if (!save_failed_) spdlog::warn("speculative-config table_file: {}", e.what());
    save_failed_ = true;
  }
}

const StepPlan* StepPipeline::plan_next(std::vector<RequestOutput>& outputs) {
  if (in_flight() >= depth_) return nullptr;
  const double t0 = thread_cpu_seconds();
  if (chooser_ && !group_draft_length())
    scheduler_.set_draft_limit(chooser_->choose(scheduler_.num_running()));
  StepPlan& plan = plans_[size_t((head_ + count_) % depth_)];
  scheduler_.schedule(plan);
  record_plan(figures_, plan, thread_cpu_seconds() - t0);
  if (plan.empty()) {
    // Nothing to run; update() still reports requests that finished outside a step.
    scheduler_.update(plan, {}, outputs);
    return nullptr;
  }
  ++count_;
  return &plan;
}

std::vector<RequestOutput> StepPipeline::complete(std::span<const SampledChunk> sampled,
                                                  double run_seconds) {
  std::vector<RequestOutput> outputs;
  complete(sampled, run_seconds, outputs);
  return outputs;
}

void StepPipeline::complete(std::span<const SampledChunk> sampled, double run_seconds,
                            std::vector<RequestOutput>& outputs) {
  TROUPE_CHECK(count_ > 0, "StepPipeline::complete: no plan in flight");
  const StepPlan& plan = plans_[size_t(head_)];
  figures_.rank_busy_seconds += run_seconds;
  if (scheduler_.config().num_speculative_tokens > 0) {
    step_outcome(plan, sampled, run_seconds, outcome_);
    record_speculation(figures_, plan, outcome_);
    if (chooser_ && !group_draft_length()) learn(outcome_);
  }
  const double t0 = thread_cpu_seconds();
  scheduler_.update(plan, sampled, outputs);
  figures_.update_cpu_s += thread_cpu_seconds() - t0;
  head_ = (head_ + 1) % depth_;  // the plan stays as it is until a later plan reuses it
  --count_;
}

void StepPipeline::learn(const StepOutcome& outcome) {
  chooser_->observe(outcome);
  if (outcome.decode_only && outcome.batch > 0 && ++timed_since_save_ >= kSaveEvery &&
      !scheduler_.config().speculation_table_file.empty())
    save_table();
}

DraftStepSummary StepPipeline::step_summary(bool ran_plan, double seconds) const {
  DraftStepSummary s;
  if (ran_plan) s = summarize(outcome_, scheduler_.config().num_speculative_tokens, 0);
  else s.seconds = seconds;
  return s;
}

void StepPipeline::agree_draft_length(const DraftStepSummary& group) {
  TROUPE_CHECK(group_draft_length(), "StepPipeline: no group draft length to agree on");
  group_outcome(group, scheduler_.config().num_speculative_tokens, group_);
  learn(group_);
  if (group.running > 0) scheduler_.set_draft_limit(chooser_->choose(group.running));
}

std::vector<RequestOutput> StepPipeline::complete_failed(const std::string& why,
                                                         double run_seconds) {
  TROUPE_CHECK(count_ > 0, "StepPipeline::complete_failed: no plan in flight");
  figures_.failed_steps += 1;
  const StepPlan& plan = oldest();
  for (const ScheduledChunk& c : plan.chunks) scheduler_.fail(c.id, why, ErrorCause::StepFailed);
  const std::vector<SampledChunk> none(plan.chunks.size());
  return complete(none, run_seconds);
}

std::vector<RequestOutput> StepPipeline::step(const RunPlan& run) {
  std::vector<RequestOutput> outputs;
  step([&](const StepPlan& plan, std::vector<SampledChunk>& sampled) { sampled = run(plan); },
       outputs);
  return outputs;
}

void StepPipeline::step(RunPlanInto run, std::vector<RequestOutput>& outputs) {
  scheduler_.recycle(outputs);
  while (plan_next(outputs) != nullptr) {
  }
  if (count_ == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  run(oldest(), sampled_);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  complete(sampled_, seconds, outputs);
}

EngineFigures current_figures(const EngineFigures& counts, const Scheduler& scheduler,
                              const KvCacheManager& kv) {
  EngineFigures f = counts;
  f.running = static_cast<int64_t>(scheduler.running_ids().size());
  f.waiting = static_cast<int64_t>(scheduler.waiting_ids().size());
  f.used_blocks = kv.num_used_blocks();
  f.free_blocks = kv.num_free_blocks();
  f.kv_usage = kv.usage();
  f.prefix_query_tokens += kv.stats().query_tokens;
  f.prefix_hit_tokens += kv.stats().hit_tokens;
  f.prefix_snapshot_hits += kv.stats().snapshot_hits;
  f.prefix_replay_hits += kv.stats().replay_hits;
  f.prefix_replay_tokens += kv.stats().replay_tokens;
  const KvCacheConfig& c = kv.config();
  for (int t = 0; t < kNumKvTiers; ++t) f.prefix_tier_hit_tokens[t] += kv.stats().tier_hit_tokens[t];
  f.kv_pins = int64_t(kv.pins().size());
  f.kv_pinned_bytes = kv.pinned_bytes();
  f.tier_bytes[0] = (kv.num_used_blocks() + kv.num_cached_blocks()) * c.block_bytes;
  if (const KvTiers* tiers = kv.tiers()) {
    const int64_t snap = c.tier_snapshot_bytes;
    f.tier_bytes[1] = tiers->host().num_used() * c.block_bytes + tiers->host_snapshots().num_used() * snap;
    f.tier_bytes[2] = tiers->disk().num_used() * BlockFileGeometry{0, c.block_size, c.block_bytes}.file_bytes() +
                      tiers->disk_snapshots().num_used() * snap;
  }
  return f;
}

}  // namespace troupe::runtime
