#include "model/op_profile.h"

namespace troupe::model {
namespace {
thread_local OpProfile* t_profile = nullptr;
}  // namespace

const char* op_name(Op op) {
  static constexpr const char* kNames[kOpCount] = {
      "embed",       "engram",        "hc mix",         "hc premix + expand",
      "attn query",  "attn window",   "compressor",     "indexer",
      "attn gather", "attn core",     "attn output",    "attn store",
      "moe gate",    "shared expert", "routed experts", "head",
      "dspark features"};
  return kNames[static_cast<int>(op)];
}

OpProfile* bound_op_profile() {
  return t_profile;
}

ScopedOpProfile::ScopedOpProfile(OpProfile& p) : saved_(t_profile) {
  t_profile = &p;
}
ScopedOpProfile::~ScopedOpProfile() {
  t_profile = saved_;
}

ScopedDraftOps::ScopedDraftOps() : step_(t_profile && t_profile->draft ? t_profile : nullptr) {
  if (!step_) return;
  start_ = std::chrono::steady_clock::now();
  t_profile = step_->draft;
}
ScopedDraftOps::~ScopedDraftOps() {
  if (!step_) return;
  t_profile = step_;
  const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
  step_->draft_seconds += d.count();
}

}  // namespace troupe::model
