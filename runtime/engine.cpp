#include "runtime/engine.h"

#include <algorithm>

#include "kernels/check.h"
#include "runtime/kv_cache/kv_cache_config.h"

namespace troupe::runtime {

KvCacheConfig prepare_engine(const model::ModelConfig& m, EngineConfig& config) {
  config.scheduler.chunk_lookback_tokens = std::max<int64_t>(0, m.engram_max_ngram_size - 1);
  if (config.speculative.enabled()) {
    config.scheduler.num_speculative_tokens = config.speculative.num_speculative_tokens;
    // The drafter reads the anchor token, the one before the chunk.
    config.scheduler.chunk_lookback_tokens = std::max<int64_t>(config.scheduler.chunk_lookback_tokens, 1);
  }
  const int64_t running = config.scheduler.max_num_running;
  const int64_t snapshots = !config.enable_prefix_cache || !config.enable_prefix_snapshots ? 0
                            : config.snapshot_slots >= 0 ? config.snapshot_slots
                                                         : 2 * running;
  config.scheduler.snapshot_block_size = snapshots > 0 ? config.block_size : 0;
  KvCacheConfig kv = kv_cache_config_for(m, config.kv_budget_bytes, running, config.block_size,
                                         snapshots);
  TROUPE_CHECK(!config.speculative.enabled() ||
                   config.speculative.num_speculative_tokens < m.sliding_window,
               "speculative-config: num_speculative_tokens ", config.speculative.num_speculative_tokens,
               " must be below the sliding window ", m.sliding_window);
  kv.enable_prefix_cache = config.enable_prefix_cache;
  if (config.executor.prefix_replay == PrefixReplay::Exact) {
    const bool tail = config.executor.bounded_replay && m.replay_tokens > 0;
    kv.window = exact_replay_tokens(m, tail);
    kv.tail_tokens = tail ? m.replay_tokens : -1;
  }
  return kv;
}

Engine::Engine(const model::Forward& forward, const model::Tokenizer* tokenizer,
               EngineConfig config, const Drafter* drafter)
    : config_(config) {
  TROUPE_CHECK(!config.speculative.enabled() || drafter != nullptr, "speculative-config: method \"",
               config.speculative.method, "\" has no drafter in this engine");
  const model::ModelConfig& m = forward.config();
  const KvCacheConfig kv = prepare_engine(m, config_);
  config = config_;
  kv_ = std::make_unique<KvCacheManager>(kv);
  const bool features = config.speculative.enabled() && drafter->needs_features();
  storage_ = std::make_unique<PagedKvStorage>(m, kv.block_size, kv.num_blocks, kv.storage_slots(),
                                              features);
  scheduler_ = std::make_unique<Scheduler>(config.scheduler, *kv_,
                                           static_cast<int32_t>(m.eos_token_id), tokenizer);
  executor_ = std::make_unique<Executor>(forward, *storage_, config.executor, nullptr,
                                         config.speculative.enabled() ? drafter : nullptr);
  pipeline_ = std::make_unique<StepPipeline>(*scheduler_, counts_, config.async_scheduling ? 2 : 1);
}

void Engine::add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                         std::vector<Sibling> siblings) {
  scheduler_->add_request(id, prompt, std::move(params), std::move(siblings));
}

void Engine::abort(RequestId id) { scheduler_->abort(id); }

std::vector<RequestOutput> Engine::step() {
  return pipeline_->step([this](const StepPlan& plan) { return executor_->run(plan); });
}

EngineFigures Engine::figures() const { return current_figures(counts_, *scheduler_, *kv_); }

}  // namespace troupe::runtime
