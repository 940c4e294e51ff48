#include "runtime/engine.h"

#include "runtime/kv_cache/kv_cache_config.h"

namespace troupe::runtime {

Engine::Engine(const model::Forward& forward, const model::Tokenizer* tokenizer,
               EngineConfig config)
    : config_(config) {
  const model::ModelConfig& m = forward.config();
  KvCacheConfig kv = kv_cache_config_for(m, config.kv_budget_bytes,
                                         config.scheduler.max_num_running, config.block_size);
  kv.enable_prefix_cache = config.enable_prefix_cache;
  kv_ = std::make_unique<KvCacheManager>(kv);
  storage_ = std::make_unique<PagedKvStorage>(m, kv.block_size, kv.num_blocks, kv.swa_slots);
  scheduler_ = std::make_unique<Scheduler>(config.scheduler, *kv_,
                                           static_cast<int32_t>(m.eos_token_id), tokenizer);
  executor_ = std::make_unique<Executor>(forward, *storage_, config.executor);
}

void Engine::add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params) {
  scheduler_->add_request(id, prompt, std::move(params));
}

void Engine::abort(RequestId id) { scheduler_->abort(id); }

std::vector<RequestOutput> Engine::step() {
  const StepPlan plan = scheduler_->schedule();
  stats_.steps += plan.empty() ? 0 : 1;
  stats_.preemptions += static_cast<int64_t>(plan.preempted.size());
  stats_.scheduled_tokens += plan.num_tokens;
  const auto sampled = executor_->run(plan, [&](RequestId id) { return scheduler_->find(id); });
  return scheduler_->update(plan, sampled);
}

}  // namespace troupe::runtime
