#include "runtime/dep/dep_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <exception>
#include <string>

#include "kernels/check.h"
#include "runtime/dep/rank_choice.h"
#include "runtime/dep/rank_step.h"
#include "runtime/dep/rank_tiers.h"
#include "runtime/eplb/static_placement.h"

namespace troupe::runtime {

struct DepEngine::Rank {
  // tier_config: this rank's share of the host and disk tiers, in its own disk folder.
  // drafter: speculative decoding's (null: none); draft_placement: its MoE's slots when
  // it has MoE layers (null: none).
  Rank(const model::BatchForward& forward, const model::TextTokenizer* tokenizer,
       const EngineConfig& c, const KvCacheConfig& kv_config, Communicator& comm,
       std::shared_ptr<const eplb::ExpertPlacement> placement, const EngineConfig& tier_config,
       const Drafter* drafter, std::shared_ptr<const eplb::ExpertPlacement> draft_placement)
      : kv(kv_config),
        storage(forward.shape(), kv_config.block_size, kv_config.num_blocks,
                kv_config.storage_slots(), drafter != nullptr && drafter->needs_features()),
        tiers(make_tier_storage(forward.shape(), tier_config, kv_config)),
        scheduler(c.scheduler, kv, forward.shape().eos_token_id, tokenizer),
        experts(comm, std::move(placement), forward.routed_layers()),
        draft_experts(draft_placement ? std::make_unique<ExpertParallel>(comm, std::move(draft_placement),
                                                                         drafter->moe_layers())
                                      : nullptr),
        executor(forward, storage, c.executor, &experts, drafter, draft_experts.get()),
        pipeline(scheduler, counts, c.async_scheduling ? 2 : 1, comm.size()) {
    if (tiers) attach_disk_tier(kv, *tiers);  // the disk index, rebuilt from its folder
    executor.set_tier_storage(tiers.get());
  }

  ExpertParallel* experts_of(bool draft) { return draft ? draft_experts.get() : &experts; }

  KvCacheManager kv;
  PagedKvStorage storage;
  std::unique_ptr<TierStorage> tiers;  // null: no host and disk tiers
  Scheduler scheduler;
  ExpertParallel experts;
  std::unique_ptr<ExpertParallel> draft_experts;  // the draft's MoE, on the same group
  Executor executor;
  EngineFigures counts;
  StepPipeline pipeline;
  // This step's result, written by the rank's thread.
  std::vector<SampledChunk> sampled;
  std::string error;
  double seconds = 0;
  bool ran_plan = false;  // this step ran the pipeline's plan (else a dummy step)
  int64_t dummy_steps = 0;
};

namespace {

// The default placement of `layers` MoE layers of `experts` experts each over the ranks.
std::shared_ptr<const eplb::ExpertPlacement> default_placement(int64_t layers, int64_t experts,
                                                               const DepConfig& dep) {
  return std::make_shared<const eplb::ExpertPlacement>(
      eplb::ep_default_placement(layers, experts, dep.ranks, dep.num_redundant_experts));
}

}  // namespace

DepEngine::DepEngine(const model::BatchForward& forward, const model::TextTokenizer* tokenizer,
                     EngineConfig config, DepConfig dep, const Drafter* drafter)
    : config_(config), dep_(dep) {
  TROUPE_CHECK(dep.ranks >= 1, "data-parallel-size must be >= 1, got ", dep.ranks);
  TROUPE_CHECK(forward.shape().expert_parallel,
               "expert parallelism: the model has no MoE layer whose experts could spread");
  TROUPE_CHECK(!config.speculative.enabled() || drafter != nullptr, "speculative-config: method \"",
               config.speculative.method, "\" has no drafter in this engine");
  if (!config.speculative.enabled()) drafter = nullptr;
  config_ = rank_share(std::move(config_), dep.ranks);  // each rank its tiers and threads
  const KvCacheConfig kv = prepare_engine(forward.shape(), config_);
  target_.placement = default_placement(static_cast<int64_t>(forward.routed_layers().size()),
                                        model::routed_expert_count(forward), dep);
  // The draft's MoE on a placement of its own (balanced apart, MODEL.md §9): the same
  // default layout and redundant count over its experts.
  if (drafter != nullptr && !drafter->moe_layers().empty())
    draft_.placement = default_placement(static_cast<int64_t>(drafter->moe_layers().size()),
                                         static_cast<int64_t>(drafter->moe_layers().front()->size()), dep);
  group_ = std::make_unique<InProcessGroup>(dep.ranks);
  threads_ = std::make_unique<RankThreads>(dep.ranks);
  for (Moe* moe : {&target_, &draft_})
    if (dep.eplb.enabled && moe->placement)
      moe->planner = std::make_unique<eplb::EplbPlanner>(dep.eplb, moe->placement->num_layers,
                                                         moe->placement->num_logical,
                                                         moe->placement->num_physical, dep.ranks);
  for (int r = 0; r < dep.ranks; ++r)
    ranks_.push_back(std::make_unique<Rank>(forward, tokenizer, config_, kv, group_->communicator(r),
                                            target_.placement, rank_tier_config(config_, r, dep.ranks),
                                            drafter, draft_.placement));
}

DepEngine::~DepEngine() = default;

int DepEngine::pick_rank(std::span<const int32_t> prompt) const {
  std::vector<RankLoad> loads;
  int64_t least = INT64_MAX;
  for (const auto& r : ranks_) {
    const auto n = static_cast<int64_t>(r->scheduler.running_ids().size() +
                                        r->scheduler.waiting_ids().size());
    loads.push_back({n, 0});
    least = std::min(least, n);
  }
  // Hash the prompt only against the caches of ranks within the margin: choose_rank
  // looks at no other rank's prefix. A rank's host and disk tiers count (read no file).
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (loads[r].requests <= least + dep_.prefix_load_margin)
      loads[r].cached_tokens = ranks_[r]->kv.cached_prefix_tokens(prompt);
  return choose_rank(loads, dep_.prefix_load_margin);
}

void DepEngine::add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                            std::vector<Sibling> siblings) {
  add_request_on(pick_rank(prompt), id, prompt, std::move(params), std::move(siblings));
}

void DepEngine::add_request_on(int r, RequestId id, std::span<const int32_t> prompt,
                               RequestParams params, std::vector<Sibling> siblings) {
  TROUPE_CHECK(!rank_of_.count(id), "request ", id, " is already known");
  TROUPE_CHECK(r >= 0 && r < ranks(), "rank ", r, " out of range [0, ", ranks(), ")");
  std::vector<RequestId> ids{id};
  for (const Sibling& s : siblings) ids.push_back(s.id);
  ranks_[r]->scheduler.add_request(id, prompt, std::move(params), std::move(siblings));
  for (RequestId i : ids) rank_of_[i] = r;
}

void DepEngine::abort(RequestId id) {
  const int r = rank_of(id);
  if (r >= 0) ranks_[r]->scheduler.abort(id);
}

int DepEngine::rank_of(RequestId id) const {
  auto it = rank_of_.find(id);
  return it == rank_of_.end() ? -1 : it->second;
}

bool DepEngine::has_unfinished() const {
  for (const auto& r : ranks_)
    if (r->pipeline.busy()) return true;
  return false;
}

std::vector<RequestOutput> DepEngine::step() {
  std::vector<RequestOutput> outputs;
  bool any_work = false, any_draft = false;
  for (auto& r : ranks_) {
    while (r->pipeline.plan_next(outputs) != nullptr) {
    }
    any_work = any_work || r->pipeline.in_flight() > 0;
    any_draft = any_draft || (r->pipeline.in_flight() > 0 && r->pipeline.oldest().drafts());
  }
  if (any_work) {
    // Lockstep: every rank runs at once, its oldest plan or a dummy step; where any rank
    // drafts, every rank joins the draft's exchanges (what the DP sync agrees).
    StepPlan idle;
    idle.draft_exchange = any_draft;
    for (auto& r : ranks_)
      if (r->pipeline.in_flight() > 0) r->pipeline.set_draft_exchange(any_draft);
    threads_->run([&](int i) {
      Rank& r = *ranks_[i];
      r.ran_plan = r.pipeline.in_flight() > 0;
      const StepPlan& plan = r.ran_plan ? r.pipeline.oldest() : idle;
      r.dummy_steps += !r.ran_plan;
      const auto t0 = std::chrono::steady_clock::now();
      r.error.clear();
      try {
        const bool inject = dep_.faults && i == dep_.fault_rank && dep_.faults->next_step().fail;
        r.sampled = run_rank_step(r.executor, r.experts, plan, inject, r.draft_experts.get());
      } catch (const std::exception& e) {  // run_rank_step aborted the step on every rank
        r.error = e.what();
      }
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    rebalance_if_due(target_, /*draft=*/false);
    rebalance_if_due(draft_, /*draft=*/true);
    for (auto& r : ranks_) {
      if (r->pipeline.in_flight() == 0) continue;
      auto done =
          r->error.empty()
              ? r->pipeline.complete(r->sampled, r->seconds)
              : r->pipeline.complete_failed(
                    "step " + std::to_string(r->pipeline.oldest().step) + " failed: " + r->error,
                    r->seconds);
      for (RequestOutput& o : done) outputs.push_back(std::move(o));
    }
    if (ranks_.front()->pipeline.group_draft_length()) agree_draft_length();
  }
  for (const RequestOutput& o : outputs)
    if (o.finished()) rank_of_.erase(o.id);
  return outputs;
}

// An adaptive draft length, chosen by the group (draft_step_summary.h): the ranks'
// summaries of this step reduced in rank order, as the DP sync reduces them, and given to
// every rank, so all choose the same k for their next plans.
void DepEngine::agree_draft_length() {
  DraftStepSummary group;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = *ranks_[i];
    DraftStepSummary mine = r.pipeline.step_summary(r.ran_plan, r.seconds);
    mine.running = r.scheduler.num_running();
    group = i == 0 ? std::move(mine) : reduce_summaries(group, mine);
  }
  for (auto& r : ranks_) r->pipeline.agree_draft_length(group);
}

// Between steps (every rank's thread has joined): the step's counts of one MoE (the
// target's, or the draft's) to its planner, and a new placement, when it makes one, to
// every rank at once.
void DepEngine::rebalance_if_due(Moe& moe, bool draft) {
  if (!moe.planner) return;
  std::vector<int64_t> counts;
  for (auto& r : ranks_) {
    const std::vector<int64_t> c = r->experts_of(draft)->take_counts();
    if (counts.empty()) counts.assign(c.size(), 0);
    for (size_t i = 0; i < c.size(); ++i) counts[i] += c[i];
  }
  std::optional<eplb::Rebalance> plan = moe.planner->record(counts, *moe.placement);
  if (!plan) return;
  moe.placement = std::make_shared<const eplb::ExpertPlacement>(plan->placement);
  const int64_t epoch = static_cast<int64_t>(moe.rebalances.size()) + 1;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ExpertParallel& e = *ranks_[r]->experts_of(draft);
    e.stage(epoch, moe.placement,
            std::make_shared<const SlotWeights>(e.layers(), *moe.placement, int(r), ranks()));
    e.use(epoch);
  }
  spdlog::info("eplb: {}rebalanced at {}", draft ? "draft " : "", eplb::describe(*plan));
  moe.rebalances.push_back(std::move(*plan));
}

EngineFigures DepEngine::figures(int rank) const {
  const Rank& r = *ranks_.at(rank);
  return current_figures(r.counts, r.scheduler, r.kv);
}

EngineFigures DepEngine::figures() const {
  std::vector<EngineFigures> ranks;
  for (int r = 0; r < this->ranks(); ++r) ranks.push_back(figures(r));
  return sum_figures(ranks);
}

const DraftLengthChooser* DepEngine::draft_length(int rank) const {
  return ranks_.at(rank)->pipeline.draft_length();
}

int64_t DepEngine::dummy_steps(int rank) const {
  return ranks_.at(rank)->dummy_steps;
}

const KvCacheManager& DepEngine::kv_cache(int rank) const {
  return ranks_.at(rank)->kv;
}

}  // namespace troupe::runtime
