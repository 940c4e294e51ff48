// The engine of one model instance, no actors: requests in, token outputs out.
//
//   Engine e(forward, tokenizer, config);
//   e.add_request(id, prompt, params);
//   while (e.has_unfinished()) for (auto& out : e.step()) stream(out);
//
// step() is plan (Scheduler) -> run (Executor over the paged KV) -> update (Scheduler),
// on the StepPipeline the actors use too. With async_scheduling the next plan is made
// before the step runs (one plan ahead), in the order the actors overlap them, so tests
// of the Engine cover that path too.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/batch_forward.h"
#include "model/tokenizer.h"
#include "runtime/executor/executor.h"
#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/kv_cache/paged_kv.h"
#include "runtime/kv_cache/tier_storage.h"
#include "runtime/kv_transfer/kv_handoff.h"
#include "runtime/scheduler/import_handoff.h"
#include "runtime/scheduler/scheduler.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/speculative_config.h"
#include "runtime/step/step_pipeline.h"

namespace troupe::runtime {

struct EngineConfig {
  SchedulerConfig scheduler;
  int64_t kv_budget_bytes = int64_t(1) << 30;  // global KV blocks + per-request state
  int64_t block_size = 64;
  bool enable_prefix_cache = true;
  // SWA window snapshots (docs/kv-cache.md): a prefix hit at the last block boundary of an
  // earlier request restores that request's rings and replays nothing. Needs the prefix
  // cache. snapshot_slots: how many are kept (reserved from kv_budget_bytes); -1: twice
  // max_num_running (one being written per running request, as many of ended ones).
  bool enable_prefix_snapshots = true;
  int64_t snapshot_slots = -1;
  // Plan step N+1 before step N's samples are known (vLLM's --async-scheduling): a decode
  // of a token still being sampled travels as a placeholder the executor fills in, so the
  // planner's CPU time overlaps the model's. Outputs are the same as without it; a decode
  // planned past an EOS or stop string is dropped.
  bool async_scheduling = true;
  ExecutorOptions executor;
  // --speculative-config (docs/dspark.md): greedy requests draft and verify k tokens per
  // decode step. The Engine then needs a Drafter of that method.
  SpeculativeConfig speculative;
  // Host and disk tiers (docs/kv-cache.md "Host and disk tiers"): blocks evicted from the
  // primary pool are copied to kv_offload_bytes of host memory (0: off), and from there to
  // files in kv_disk_dir, at most kv_disk_bytes of them (0 / empty: no disk tier; needs
  // the host tier). A prefix hit copies them back. kv_disk_tag names the checkpoint in
  // the files' header, so files of another checkpoint of the same shape are foreign.
  // KV save by name (docs/kv-cache.md "Saved prefixes"): primary pool bytes saved
  // prefixes may pin, at most half the pool; 0: saves are refused.
  int64_t kv_pinned_bytes = 0;
  int64_t kv_offload_bytes = 0;
  std::string kv_disk_dir;
  int64_t kv_disk_bytes = 0;
  std::string kv_disk_tag;
  // Window snapshots move down with their block (docs/kv-cache.md "Window snapshots in
  // the tiers"): how many of the host / disk tier's bytes' worth of snapshots they keep,
  // out of kv_offload_bytes / kv_disk_bytes; -1: the share of its bytes the primary pool
  // gives snapshots. Needs snapshots on.
  int64_t kv_offload_snapshots = -1;
  int64_t kv_disk_snapshots = -1;
};

// Completes config from the model (the scheduler's chunk lookback) and sizes the KV
// cache from the budget. Shared by Engine and the actors that split it in two.
KvCacheConfig prepare_engine(const model::ServingShape& m, EngineConfig& config);

// The host and disk tiers' bytes for an engine of this config (nullptr when kv has no
// host tier: kv.host_blocks == 0). Throws troupe::Error if the disk dir cannot be made.
std::unique_ptr<TierStorage> make_tier_storage(const model::ServingShape& m,
                                               const EngineConfig& config,
                                               const KvCacheConfig& kv);
// The disk tier's files (tiers.scan_disk()) join the manager's disk tier, and its finds
// read files as `tiers` writes them. No-op without a disk dir.
void attach_disk_tier(KvCacheManager& manager, const TierStorage& tiers);

class Engine {
 public:
  // forward: any model's (V4.1's Forward, LlamaForward: the engine reads its ServingShape).
  // drafter: required when config.speculative is on (a DsparkDrafter needs `forward` made
  // with the draft weights, to fill the feature rings); must outlive the engine.
  Engine(const model::BatchForward& forward, const model::TextTokenizer* tokenizer, EngineConfig config,
         const Drafter* drafter = nullptr);

  // siblings: n > 1 choices sharing the prompt's KV (Scheduler::add_request).
  void add_request(RequestId id, std::span<const int32_t> prompt, RequestParams params,
                   std::vector<Sibling> siblings = {});
  void abort(RequestId id);

  // KV hand-off (P/D disaggregation, decode drain; docs/pd.md). A request added with
  // params.kv_hand_off_after = k (or told hand_off()) stops with status HandedOff after
  // k output tokens; its KV stays parked here. export_request packs it (blocks, window,
  // carry, features: one region); release_handed_off frees it once the receiver has it
  // or gave up. Another engine of the same model and KV layout continues it with
  // import_request: no prefill, no replay, the same tokens as if it had never moved.
  KvHandoff export_request(RequestId id) const;  // throws troupe::Error if not parked
  void release_handed_off(RequestId id);
  // Throws troupe::Error naming why a hand-off cannot continue here (bad lengths or token
  // ids, bad parameters, an id in use). One without KV, or whose KV has another layout,
  // recomputes its tokens here (import_handoff; the result says which).
  ImportResult import_request(RequestId id, KvHandoff handoff, RequestParams params);
  Scheduler::HandOff hand_off(RequestId id) { return scheduler_->hand_off(id); }
  const KvHandoffShape& kv_shape() const { return shape_; }

  std::vector<RequestOutput> step();
  // The low-latency form: `outputs` (emptied first) gets the step's outputs. Passing the
  // same vector every step lets the engine reuse their buffers: a decode step of a steady
  // batch (no new requests, greedy, no logprobs or text) makes no heap allocation
  // (tests/runtime/decode_allocations_test.cpp; docs/dspark.md, "Low-latency path").
  void step(std::vector<RequestOutput>& outputs);
  bool has_unfinished() const { return pipeline_->busy(); }

  const KvCacheManager& kv_cache() const { return *kv_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  // Steps, preemptions, tokens and where the time went, with the state as of now.
  EngineFigures figures() const;
  // The online cost table (speculative-config "adaptive"), else nullptr.
  const DraftLengthChooser* draft_length() const { return pipeline_->draft_length(); }

 private:
  EngineConfig config_;
  EngineFigures counts_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<PagedKvStorage> storage_;
  std::unique_ptr<TierStorage> tiers_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<StepPipeline> pipeline_;
  const model::ServingShape& model_;
  KvHandoffShape shape_;
};

// A parked request's hand-off without its KV bytes (pack_kv_handoff adds them).
KvHandoff kv_handoff_header(const Scheduler::ParkedRequest& p);

// The rows-mode code of a KV hand-off (KvHandoffShape::rows_mode) for these options.
int64_t kv_rows_mode(const ExecutorOptions& options);

}  // namespace troupe::runtime
