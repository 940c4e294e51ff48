// Where a forward pass's time goes, op by op (`troupe bench forward --profile`).
//
// A caller binds an OpProfile to its thread (ScopedOpProfile); the forward pass marks
// its ops with ScopedOp, which adds the op's wall time (kernel threads included: the
// calling thread waits for them) to the bound profile. Unbound, a ScopedOp is one
// thread-local load and branch, so the marks stay in the hot path. Ops do not nest: the
// layer code marks disjoint spans, so the columns add up to the step (the rest is the
// batch setup and the loop itself).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace troupe::model {

enum class Op : uint8_t {
  Embed,          // token embedding rows into every stream
  Engram,         // hashed n-gram lookups, wkv, gates (§7)
  HcMix,          // HCMix: the normalized hc_fn projection and Sinkhorn (§5.2)
  HcApply,        // premix Σ pre X and HCExpand
  AttnQuery,      // wq_a, q_norm, wq_b, rope of the queries
  AttnWindow,     // wkv, kv_norm, rope, fp8 window rows (encode + decode)
  Compressor,     // Full layers: compressed KV rows and index keys
  Indexer,        // Full/Reindex layers: index queries, scores, top-k
  AttnGather,     // decoding ring and selected rows, key pointers
  AttnCore,       // sink attention and inverse rope
  AttnOutput,     // wo_a per group, wo_b
  AttnStore,      // window rows into the ring
  MoeGate,        // gate GEMM and top-k routing
  SharedExpert,   // the shared expert
  RoutedExperts,  // the picked experts
  Head,           // HCHead, final norm, head GEMM
  DraftFeatures,  // DSpark: the target's feature rows F (main_proj, main_norm; §8)
  kCount
};
inline constexpr int kOpCount = static_cast<int>(Op::kCount);

const char* op_name(Op op);

struct OpProfile {
  std::array<double, kOpCount> seconds{};  // summed wall time per op
  std::array<int64_t, kOpCount> calls{};   // spans timed per op
  // Speculative decoding: where the draft's ops go while a ScopedDraftOps holds (null:
  // into this profile with the target's), and the summed wall time of those spans.
  OpProfile* draft = nullptr;
  double draft_seconds = 0;
  void clear() { *this = OpProfile{.draft = draft}; }
  double timed_seconds() const {  // all ops' time (the spans are disjoint)
    double t = 0;
    for (double s : seconds) t += s;
    return t;
  }
};

// The profile bound to this thread, or null.
OpProfile* bound_op_profile();

class ScopedOpProfile {
 public:
  explicit ScopedOpProfile(OpProfile& p);
  ~ScopedOpProfile();
  ScopedOpProfile(const ScopedOpProfile&) = delete;
  ScopedOpProfile& operator=(const ScopedOpProfile&) = delete;

 private:
  OpProfile* saved_;
};

// A draft's span of a step (runtime::Executor's drafting): while it holds, ops go to the
// bound profile's `draft` profile, and its wall time adds to the bound one's
// draft_seconds. Without a bound profile or one with a draft profile, nothing.
class ScopedDraftOps {
 public:
  ScopedDraftOps();
  ~ScopedDraftOps();
  ScopedDraftOps(const ScopedDraftOps&) = delete;
  ScopedDraftOps& operator=(const ScopedDraftOps&) = delete;

 private:
  OpProfile* step_;  // the profile bound before, when it has a draft profile; else null
  std::chrono::steady_clock::time_point start_;
};

class ScopedOp {
 public:
  explicit ScopedOp(Op op) : profile_(bound_op_profile()), op_(op) {
    if (profile_) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedOp() {
    if (!profile_) return;
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
    profile_->seconds[static_cast<int>(op_)] += d.count();
    profile_->calls[static_cast<int>(op_)] += 1;
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpProfile* profile_;
  Op op_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace troupe::model
