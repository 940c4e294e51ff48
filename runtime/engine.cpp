#include "runtime/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "kernels/check.h"
#include "runtime/kv_cache/kv_cache_config.h"

namespace troupe::runtime {

namespace {

// The host and disk tiers' slots (docs/kv-cache.md "Window snapshots in the tiers"): a
// lower tier gives window snapshots the share of its bytes the primary pool gives them,
// share = S·s / (S·s + N·b) (S snapshot slots of s bytes, N blocks of b bytes), so
// snapshots moving down with their blocks count against the tier's budget like they
// count against the primary's.
void plan_kv_tiers(const model::ServingShape& m, const EngineConfig& config, KvCacheConfig& kv) {
  const int64_t block_bytes = kv.block_bytes;
  const int64_t snap = kv.snapshot_slots > 0 ? PagedKvStorage::snapshot_bytes_of(m) : 0;
  const BlockFileGeometry g{0, config.block_size, block_bytes, snap};
  const double snapshot_bytes = double(kv.snapshot_slots) * double(snap);
  const double share = snap ? snapshot_bytes / (snapshot_bytes + double(kv.num_blocks) * double(block_bytes)) : 0;
  auto split = [&](int64_t bytes, int64_t per_block, int64_t asked, int64_t& blocks,
                   int64_t& snapshots) {
    snapshots = !snap ? 0 : asked >= 0 ? asked : int64_t(double(bytes) * share / double(snap));
    snapshots = std::min(snapshots, bytes / (snap + per_block));  // each with its block
    blocks = std::min<int64_t>(INT32_MAX, (bytes - snapshots * snap) / per_block);
  };
  split(config.kv_offload_bytes, block_bytes, config.kv_offload_snapshots, kv.host_blocks,
        kv.host_snapshots);
  split(config.kv_disk_bytes, g.file_bytes(), config.kv_disk_snapshots, kv.disk_blocks,
        kv.disk_snapshots);
  kv.tier_snapshot_bytes = snap;
  TROUPE_CHECK(kv.host_blocks >= 1, "kv-offload-bytes ", config.kv_offload_bytes,
               " holds no block of ", block_bytes, " bytes");
  TROUPE_CHECK(config.kv_disk_bytes == 0 || kv.disk_blocks >= 1, "kv-disk-bytes ",
               config.kv_disk_bytes, " holds no block file of ", g.file_bytes(), " bytes");
}

}  // namespace

KvCacheConfig prepare_engine(const model::ServingShape& m, EngineConfig& config) {
  config.scheduler.chunk_lookback_tokens = m.lookback_tokens;
  TROUPE_CHECK(!config.speculative.enabled() || m.speculative,
               "speculative-config: speculative decoding runs DeepSeek-V4.1 checkpoints only "
               "(their DSpark draft); this model has none");
  TROUPE_CHECK(!config.executor.clip_prefix || m.decoder_tail,
               "clip_prefix: this model has no decoder tail (DeepSeek-V4.1 only)");
  if (config.speculative.enabled()) {
    config.scheduler.num_speculative_tokens = config.speculative.num_speculative_tokens;
    config.scheduler.adaptive_speculation = config.speculative.adaptive;
    config.scheduler.speculation_seed = config.speculative.step_seconds;
    config.scheduler.speculation_table_file = config.speculative.table_file;
    // The drafter reads the anchor token, the one before the chunk.
    config.scheduler.chunk_lookback_tokens = std::max<int64_t>(config.scheduler.chunk_lookback_tokens, 1);
  }
  const int64_t running = config.scheduler.max_num_running;
  // A model without windows (LLaMA: every layer's rows are in the blocks) has nothing to
  // snapshot: a hit replays nothing anyway.
  const bool windows = m.window > 0;
  const int64_t snapshots = !config.enable_prefix_cache || !config.enable_prefix_snapshots || !windows ? 0
                            : config.snapshot_slots >= 0 ? config.snapshot_slots
                                                         : 2 * running;
  config.scheduler.snapshot_block_size = snapshots > 0 ? config.block_size : 0;
  KvCacheConfig kv = kv_cache_config_for(m, config.kv_budget_bytes, running, config.block_size,
                                         snapshots);
  TROUPE_CHECK(!config.speculative.enabled() ||
                   config.speculative.num_speculative_tokens < m.window,
               "speculative-config: num_speculative_tokens ", config.speculative.num_speculative_tokens,
               " must be below the sliding window ", m.window);
  kv.enable_prefix_cache = config.enable_prefix_cache;
  kv.block_bytes = PagedKvStorage::block_bytes_of(m, config.block_size);
  // A window snapshot's bytes: the tiers' and the saved prefixes' figures count them.
  if (kv.snapshot_slots > 0) kv.tier_snapshot_bytes = PagedKvStorage::snapshot_bytes_of(m);
  TROUPE_CHECK(config.kv_offload_bytes >= 0 && config.kv_disk_bytes >= 0,
               "kv-offload-bytes and kv-disk-bytes must be >= 0");
  TROUPE_CHECK(config.kv_disk_dir.empty() == (config.kv_disk_bytes == 0),
               "kv-disk-dir and kv-disk-bytes go together (a disk tier needs both)");
  TROUPE_CHECK(config.kv_disk_bytes == 0 || config.kv_offload_bytes > 0,
               "a disk tier (kv-disk-dir) needs a host tier: set kv-offload-bytes");
  if (config.enable_prefix_cache && config.kv_offload_bytes > 0) plan_kv_tiers(m, config, kv);
  TROUPE_CHECK(config.kv_pinned_bytes >= 0, "kv-pinned-bytes must be >= 0");
  kv.pinned_blocks = config.kv_pinned_bytes / kv.block_bytes;
  TROUPE_CHECK(kv.pinned_blocks <= kv.num_blocks / 2, "kv-pinned-bytes ", config.kv_pinned_bytes,
               " is more than half the KV pool (", kv.num_blocks, " blocks of ", kv.block_bytes,
               " bytes): running requests would have no room");
  // clip_prefix only changes full compute: a decoder tail already skips those chunks.
  const bool tail = config.executor.bounded_replay && m.replay_tokens > 0;
  config.scheduler.clip_prefix_depth =
      config.executor.clip_prefix && !tail ? clip_prefix_depth(m) : 0;
  if (config.executor.prefix_replay == PrefixReplay::Exact) {
    kv.window = exact_replay_tokens(m, tail);
    kv.tail_tokens = tail ? m.replay_tokens : -1;
  }
  return kv;
}

std::unique_ptr<TierStorage> make_tier_storage(const model::ServingShape& m,
                                               const EngineConfig& config,
                                               const KvCacheConfig& kv) {
  if (kv.host_blocks == 0) return nullptr;
  const int64_t block_bytes = PagedKvStorage::block_bytes_of(m, kv.block_size);
  // Replay modes and the decoder tail change which rows a block holds: part of the tag.
  const std::string mode =
      std::string(config.executor.prefix_replay == PrefixReplay::Exact ? "exact" : "window") +
      (config.executor.bounded_replay ? "/bounded/" : "/full/") + config.kv_disk_tag;
  // Files carry snapshots of this model's size even when this run keeps none in the
  // tiers: such files are still ours (adopted only where a snapshot slot is free).
  const BlockFileGeometry g{kv_disk_model_tag(m, kv.block_size, block_bytes, mode), kv.block_size,
                            block_bytes, PagedKvStorage::snapshot_bytes_of(m)};
  return std::make_unique<TierStorage>(kv.host_blocks, g,
                                       kv.disk_blocks > 0 ? config.kv_disk_dir : "",
                                       kv.host_snapshots);
}

void attach_disk_tier(KvCacheManager& manager, const TierStorage& tiers) {
  if (tiers.disk_dir().empty()) return;
  manager.set_disk_reader([dir = tiers.disk_dir(), g = tiers.geometry()](
                              uint64_t hash, uint64_t parent, std::span<const int32_t> tokens,
                              std::vector<uint8_t>& payload, std::vector<uint8_t>& snapshot) {
    return read_block_file(dir, g, hash, parent, tokens, payload, snapshot);
  });
  const std::vector<BlockFileHeader> found = tiers.scan_disk();
  const int64_t adopted = manager.adopt_disk_blocks(found);
  spdlog::info("kv disk tier {}: {} block files adopted ({} intact found, room for {})",
               tiers.disk_dir(), adopted, found.size(), manager.config().disk_blocks);
}

int64_t kv_rows_mode(const ExecutorOptions& options) {
  return (options.bounded_replay ? 1 : 0) | (options.prefix_replay == PrefixReplay::Exact ? 2 : 0) |
         (options.clip_prefix ? 4 : 0);
}

Engine::Engine(const model::BatchForward& forward, const model::TextTokenizer* tokenizer,
               EngineConfig config, const Drafter* drafter)
    : config_(config), model_(forward.shape()) {
  TROUPE_CHECK(!config.speculative.enabled() || drafter != nullptr, "speculative-config: method \"",
               config.speculative.method, "\" has no drafter in this engine");
  const model::ServingShape& m = forward.shape();
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
  tiers_ = make_tier_storage(m, config, kv);
  if (tiers_) attach_disk_tier(*kv_, *tiers_);
  executor_->set_tier_storage(tiers_.get());
  pipeline_ = std::make_unique<StepPipeline>(*scheduler_, counts_, config.async_scheduling ? 2 : 1);
  shape_ = KvHandoffShape::of(m, kv.block_size, kv_rows_mode(config.executor));
}

KvHandoff Engine::export_request(RequestId id) const {
  const Scheduler::ParkedRequest* p = scheduler_->parked(id);
  TROUPE_CHECK(p != nullptr, "request ", id, " is not handed off here");
  KvHandoff h = kv_handoff_header(*p);
  pack_kv_handoff(*storage_, shape_, kv_->block_table(id), kv_->swa_slot(id), h);
  return h;
}

KvHandoff kv_handoff_header(const Scheduler::ParkedRequest& p) {
  KvHandoff h;
  h.tokens = p.tokens;
  h.num_prompt_tokens = p.num_prompt_tokens;
  h.num_cached_tokens = p.num_cached_tokens;
  h.text = p.text;
  h.text_tokens = p.text_tokens;
  h.streamed_text_bytes = p.streamed_text_bytes;
  return h;
}

void Engine::release_handed_off(RequestId id) { scheduler_->release_parked(id); }

ImportResult Engine::import_request(RequestId id, KvHandoff handoff, RequestParams params) {
  return import_handoff(*scheduler_, id, std::move(handoff), std::move(params), shape_, model_);
}

void Engine::add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                         std::vector<Sibling> siblings) {
  scheduler_->add_request(id, prompt, std::move(params), std::move(siblings));
}

void Engine::abort(RequestId id) { scheduler_->abort(id); }

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs;
  step(outputs);
  return outputs;
}

void Engine::step(std::vector<RequestOutput>& outputs) {
  pipeline_->step(
      [this](const StepPlan& plan, std::vector<SampledChunk>& sampled) {
        executor_->run(plan, sampled);
      },
      outputs);
}

EngineFigures Engine::figures() const { return current_figures(counts_, *scheduler_, *kv_); }

}  // namespace troupe::runtime
