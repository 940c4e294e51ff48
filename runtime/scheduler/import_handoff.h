// Continuing a request another engine handed off (P/D, drain; docs/pd.md): its KV is
// loaded when it fits this engine; a hand-off without KV, or whose KV does not fit (another
// layout, a bad region), recomputes its tokens here instead, as a preempted request does;
// what cannot continue at all (bad tokens or lengths, bad parameters, an id in use) is
// refused. The Engine and the scheduler actor both import through this.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/kv_transfer/kv_handoff.h"
#include "runtime/scheduler/scheduler.h"

namespace troupe::runtime {

struct ImportResult {
  bool loads_kv = true;
  std::string kv_refused;  // !loads_kv: why its KV is not used ("it carries no KV", a layout)
};

// Queues request id on s. Throws troupe::Error naming why it cannot continue here.
ImportResult import_handoff(Scheduler& s, RequestId id, KvHandoff h, RequestParams params,
                            const KvHandoffShape& shape, const model::ServingShape& m);

}  // namespace troupe::runtime
