// Fault injection, off unless asked for (`troupe serve --inject-faults SPEC` or the
// TROUPE_INJECT_FAULTS environment variable), so tests and chaos runs can drive the
// failure paths end to end over real sockets (docs/serve.md "Fault injection").
//
//   SPEC   = FAULT ("," FAULT)*
//   FAULT  = KIND "@" N [":" MS]        N >= 1, counted over the process's lifetime
//   KIND   = step-throw     the rank's Nth step throws (its requests fail, the rank goes on)
//          | rank-exit      the rank actor exits at its Nth step (the instance restarts)
//          | step-stall     the rank's Nth step sleeps MS milliseconds first
//          | tokenize-fail  the Nth prompt tokenization of the API fails
//          | rank-start-stall  the Nth rank to start (1: the first, 2: the first restart)
//                            sleeps MS milliseconds before it sets up (a slow start:
//                            /health stays 503 "starting" / "restarting" meanwhile)
//          | kv-import-drop    the Nth KV hand-off this process receives is dropped: never
//                            queued, never answered (a receiver that never confirms; the
//                            sender's lease runs out)
//          | kv-import-stall   the receiving scheduler sleeps MS milliseconds before it
//                            takes the Nth KV hand-off (a transfer slower than its lease)
//          | kv-commit-drop    the Nth KV region this process puts into a receiver's
//                            memory is never committed (a sender lost after its push
//                            started: the receiver's lease frees the staging region)
//          | kv-put-hang       the Nth KV region put this process starts never lands and
//                            never fails (a receiver it cannot write to under UCX's
//                            error mode none): it times out at the move's deadline
//
//   "step-throw@3,step-stall@5:200"   step 3 throws, step 5 stalls 200 ms
//
// Steps are counted by the rank as it runs them (1-based, across restarts, so a fault
// fires once). Thread-safe: the counters are atomics; one plan is shared by every rank
// and API thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::runtime {

enum class FaultKind : uint8_t {
  StepThrow, RankExit, StepStall, TokenizeFail, RankStartStall, KvImportDrop, KvImportStall,
  KvCommitDrop, KvPutHang
};

struct Fault {
  FaultKind kind = FaultKind::StepThrow;
  int64_t at = 1;        // the Nth step or tokenization (1-based)
  int64_t stall_ms = 0;  // the stalls only
};

// What the rank must do before running a step.
struct StepFault {
  bool fail = false;     // throw (StepThrow)
  bool exit = false;     // end the rank actor (RankExit)
  int64_t stall_ms = 0;  // sleep this long first (StepStall)
};

class FaultPlan {
 public:
  FaultPlan() = default;
  explicit FaultPlan(std::vector<Fault> faults) : faults_(std::move(faults)) {}
  // Movable before it is shared (the counters go along).
  FaultPlan(FaultPlan&& o) noexcept
      : faults_(std::move(o.faults_)),
        steps_(o.steps_.load()),
        tokenizations_(o.tokenizations_.load()),
        rank_starts_(o.rank_starts_.load()),
        imports_(o.imports_.load()),
        commits_(o.commits_.load()),
        puts_(o.puts_.load()) {}

  // Parses SPEC (above); throws troupe::Error naming the bad item. "" is no fault.
  static FaultPlan parse(std::string_view spec);

  bool empty() const { return faults_.empty(); }
  const std::vector<Fault>& faults() const { return faults_; }

  // Counts one step and says what to do at it.
  StepFault next_step() const;
  // Counts one tokenization; true if it must fail.
  bool next_tokenize() const;
  // Counts one rank start; the milliseconds it must sleep first (0: none).
  int64_t next_rank_start() const;
  // Counts one KV hand-off received; what the receiver must do with it.
  struct ImportFault {
    bool drop = false;
    int64_t stall_ms = 0;
  };
  ImportFault next_import() const;
  // Counts one KV region put into a receiver's memory; true if its commit must be dropped.
  bool next_commit() const;
  // Counts one KV region put started; true if it must hang (never issued).
  bool next_put() const;

 private:
  // Counts one event on `counter`; true if a fault of `kind` is due at it.
  bool fires(std::atomic<int64_t>& counter, FaultKind kind) const;

  std::vector<Fault> faults_;
  mutable std::atomic<int64_t> steps_{0};
  mutable std::atomic<int64_t> tokenizations_{0};
  mutable std::atomic<int64_t> rank_starts_{0};
  mutable std::atomic<int64_t> imports_{0};
  mutable std::atomic<int64_t> commits_{0};
  mutable std::atomic<int64_t> puts_{0};
};

}  // namespace troupe::runtime
