#include "runtime/engine.h"

#include <time.h>

#include <chrono>

#include <algorithm>

#include "runtime/kv_cache/kv_cache_config.h"

namespace troupe::runtime {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

KvCacheConfig prepare_engine(const model::ModelConfig& m, EngineConfig& config) {
  config.scheduler.chunk_lookback_tokens = std::max<int64_t>(0, m.engram_max_ngram_size - 1);
  KvCacheConfig kv = kv_cache_config_for(m, config.kv_budget_bytes,
                                         config.scheduler.max_num_running, config.block_size);
  kv.enable_prefix_cache = config.enable_prefix_cache;
  if (config.executor.prefix_replay == PrefixReplay::Exact) {
    const bool tail = config.executor.bounded_replay && m.replay_tokens > 0;
    kv.window = exact_replay_tokens(m, tail);
    kv.tail_tokens = tail ? m.replay_tokens : -1;
  }
  return kv;
}

Engine::Engine(const model::Forward& forward, const model::Tokenizer* tokenizer,
               EngineConfig config)
    : config_(config) {
  const model::ModelConfig& m = forward.config();
  const KvCacheConfig kv = prepare_engine(m, config_);
  config = config_;
  kv_ = std::make_unique<KvCacheManager>(kv);
  storage_ = std::make_unique<PagedKvStorage>(m, kv.block_size, kv.num_blocks, kv.swa_slots);
  scheduler_ = std::make_unique<Scheduler>(config.scheduler, *kv_,
                                           static_cast<int32_t>(m.eos_token_id), tokenizer);
  executor_ = std::make_unique<Executor>(forward, *storage_, config.executor);
}

void Engine::add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                         std::vector<Sibling> siblings) {
  scheduler_->add_request(id, prompt, std::move(params), std::move(siblings));
}

void Engine::abort(RequestId id) { scheduler_->abort(id); }

StepPlan Engine::plan() {
  const double t0 = thread_cpu_seconds();
  StepPlan plan = scheduler_->schedule();
  stats_.schedule_cpu_s += thread_cpu_seconds() - t0;
  stats_.steps += plan.empty() ? 0 : 1;
  stats_.preemptions += static_cast<int64_t>(plan.preempted.size());
  stats_.scheduled_tokens += plan.num_tokens;
  return plan;
}

std::vector<RequestOutput> Engine::step() {
  if (ahead_.empty()) ahead_.push_back(plan());
  if (config_.async_scheduling && !ahead_.front().empty()) {
    StepPlan next = plan();  // made before the step below runs, as the actors do
    if (!next.empty()) ahead_.push_back(std::move(next));
  }
  const StepPlan now = std::move(ahead_.front());
  ahead_.pop_front();
  const double w1 = wall_seconds();
  const auto sampled = executor_->run(now);
  const double w2 = wall_seconds(), t2 = thread_cpu_seconds();
  auto outputs = scheduler_->update(now, sampled);
  stats_.execute_s += w2 - w1;
  stats_.update_cpu_s += thread_cpu_seconds() - t2;
  return outputs;
}

}  // namespace troupe::runtime
