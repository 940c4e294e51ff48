// The figures of one engine instance, in one struct for every reader: the Engine's
// callers and benches, the actors' stats message, /metrics and /health. Counters are
// cumulative since the instance started (readers take differences); the state fields
// are as of the moment the figures were taken.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace troupe::runtime {

// One planned (non-empty) step, as the scheduler saw it.
struct StepSample {
  int64_t step = 0;         // 1-based count of non-empty steps (EngineFigures::steps)
  int64_t admitted = 0;     // requests admitted by the step
  double plan_seconds = 0;  // CPU seconds of Scheduler::schedule() on the planning thread

  bool operator==(const StepSample&) const = default;
};

// Why a KV hand-off this engine sent failed (the cause label of
// troupe:kv_transfer_failures_total): the receiver said no, did not answer within the
// lease, was gone, the rank could not pack it, or there was no receiver to send it to.
enum class KvTransferFailure : uint8_t { Refused, Timeout, ReceiverDown, Export, NoReceiver };
inline constexpr std::array<const char*, 5> kKvTransferFailureNames = {
    "refused", "timeout", "receiver_down", "export", "no_receiver"};
inline constexpr std::array<double, 12> kKvTransferSecondsBounds = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0};

inline constexpr std::array<const char*, 3> kKvHandoffPhaseNames = {"prefill", "transfer",
                                                                    "first_decode"};

// Counts one confirmed transfer of `bytes` that took `seconds` into f.
struct EngineFigures;
void count_kv_transfer(EngineFigures& f, int64_t bytes, double seconds);

struct EngineFigures {
  // --- state now
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t used_blocks = 0;  // ref > 0; 0 once every request finished (cached blocks are free)
  int64_t free_blocks = 0;
  double kv_usage = 0;
  // Bytes each KV tier holds now (primary, host, disk): blocks with contents (used or
  // cached) x block bytes; disk counts whole files. 0 for a tier that is off.
  int64_t tier_bytes[3] = {0, 0, 0};
  // Saved prefixes (KV save by name): how many, and the bytes they pin (blocks + snapshots).
  int64_t kv_pins = 0;
  int64_t kv_pinned_bytes = 0;

  // --- cumulative counts
  int64_t steps = 0;                // non-empty steps planned
  int64_t preemptions = 0;          // requests that lost their KV and will recompute
  int64_t admitted = 0;             // admissions (a preempted request is admitted again)
  int64_t scheduled_tokens = 0;     // Σ plan.num_tokens
  int64_t prefix_query_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;    // of those, served from it
  int64_t prefix_snapshot_hits = 0;  // prefix hits served by a SWA window snapshot (no replay)
  int64_t prefix_replay_hits = 0;    // prefix hits served by a replay
  int64_t prefix_replay_tokens = 0;  // tokens recomputed to rebuild SWA windows on hits
  int64_t prefix_tier_hit_tokens[3] = {0, 0, 0};  // prefix_hit_tokens by tier (primary, host, disk)
  int64_t kv_restore_hits = 0;      // requests whose kv_restore named a saved prefix
  int64_t failed_steps = 0;         // steps that threw (their requests failed)
  int64_t restarts = 0;             // times the supervisor restarted scheduler + rank
  // Speculative decoding (vLLM's spec_decode_* counters): verified drafts (chunks with at
  // least one draft token), their draft tokens, the accepted ones, and the accepted ones
  // by draft position (index 0: the first draft token of a step).
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  // Live EPLB (DEP-R): expert placements the ranks switched to, and the planner's mean
  // per-layer balance (MODEL.md §9: mean rank load / max rank load) of its window on the
  // placement before and after the last switch. The same on every rank of an instance.
  int64_t eplb_rebalances = 0;
  double eplb_balance_before = 0, eplb_balance_after = 0;
  // The same for the DSpark draft's MoE, balanced apart (its own placement, MODEL.md §9).
  int64_t eplb_draft_rebalances = 0;
  double eplb_draft_balance_before = 0, eplb_draft_balance_after = 0;
  // KV hand-offs (P/D, drain; docs/pd.md). Sent by this engine and confirmed by the
  // receiver: their bytes, and their seconds from export to confirmation as counts per
  // bucket of kKvTransferSecondsBounds (non-cumulative, [bounds + 1]; empty before the
  // first) plus their sum. Sent and failed, by KvTransferFailure. Received and recomputed
  // instead of loaded (no KV came, or it did not fit: the fallback of a failed move).
  int64_t kv_transfer_bytes = 0;
  std::vector<int64_t> kv_transfer_seconds_buckets;
  double kv_transfer_seconds_sum = 0;
  int64_t kv_transfer_failures[5] = {0, 0, 0, 0, 0};
  int64_t kv_transfer_fallbacks = 0;
  // The transfer agent's (docs/pd.md "The transfer agent"): hand-offs it moved by RMA (the
  // region by one put, the rest in messages) and in messages (no UCX on a side, or a put
  // failed), the puts it issued (descriptors: one per region), and staging regions this
  // side reserved whose sender never committed (their lease ran out).
  int64_t kv_transfer_rma = 0;
  int64_t kv_transfer_messages = 0;
  int64_t kv_transfer_descriptors = 0;
  int64_t kv_transfer_leases_expired = 0;
  // A cluster router's P/D moves, split as it sees them (time to first token = prefill;
  // then the move until the sender's answer; then the receiver's first tokens): seconds
  // summed by phase (kKvHandoffPhaseNames) over the kv_handoff_phased moves counted.
  double kv_handoff_phase_seconds[3] = {0, 0, 0};
  int64_t kv_handoff_phased = 0;
  // Steps with speculating decodes by their draft limit k (index k; the online cost
  // table's choices when adaptive, else all at num_speculative_tokens).
  std::vector<int64_t> spec_steps_by_k;

  // --- where the time went, summed over steps. Planning and updating in CPU seconds of
  // the thread that does them (single threaded, so immune to a busy machine); running in
  // wall seconds of whoever ran the step: its rate over wall time is how busy the model
  // is (the GPU-utilization figure; async scheduling removes the planning gaps).
  double schedule_cpu_s = 0;
  double update_cpu_s = 0;
  double rank_busy_seconds = 0;

  // The last steps (at most kMaxRecentSteps, at least kMaxRecentSteps - kRecentStepsDrop
  // once that many ran; oldest first), so a reader that polls less often than every step
  // can still observe each one: it keeps the last `step` it saw. A vector whose oldest
  // kRecentStepsDrop go at once when it is full: it keeps its buffer, so recording a step
  // allocates nothing (a deque takes and frees a node every 21 steps).
  std::vector<StepSample> recent_steps;
  static constexpr size_t kMaxRecentSteps = 4096;
  static constexpr size_t kRecentStepsDrop = 512;

  // An instance of R > 1 ranks: each rank's own figures, [R] in rank order (their own
  // per_rank empty); the fields above are then their sum (sum_figures). Empty for one rank.
  // A cluster router's figures: each up instance's instead, named by `instance`.
  std::vector<EngineFigures> per_rank;
  std::string instance;  // in a cluster router's per_rank: the instance's name; else ""


  bool operator==(const EngineFigures&) const = default;
};

// The figures of an instance from its ranks' own: counts, times and state summed,
// kv_usage the used share of all ranks' blocks, recent_steps left empty (each rank
// numbers its own steps: per-step readers take them from per_rank), per_rank = ranks.
EngineFigures sum_figures(std::span<const EngineFigures> ranks);

// to[i] += from[i], growing `to` to from's length (per-position counts).
void add_counts(std::vector<int64_t>& to, std::span<const int64_t> from);

}  // namespace troupe::runtime
