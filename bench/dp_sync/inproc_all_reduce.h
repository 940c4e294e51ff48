// One DP-sync all-reduce of the step metadata (runtime/collectives) on a rank thread, over
// the in-process mailboxes of inproc_mailbox.h: what `troupe bench dp-sync` times, and
// what `troupe bench forward --dep` runs before every decode step.
#pragma once

#include <atomic>
#include <optional>
#include <vector>

#include "bench/dp_sync/inproc_mailbox.h"
#include "runtime/collectives/all_reduce.h"
#include "runtime/collectives/step_metadata.h"

namespace troupe::bench {

using DpSyncMessage = runtime::collectives::CollectiveMessage<runtime::collectives::StepMetadata>;
using DpSyncRank = runtime::collectives::AllReduceRank<runtime::collectives::StepMetadata,
                                                       runtime::collectives::StepMetadataReduce>;

// Rank r contributes `mine` to step `step`: delivers what its state machine sends, drains
// its mailbox (waiting as `how` says while it is empty) until the result comes. Messages
// of the next step that arrive in the same batch stay buffered in `ar`. nullopt: `abort`
// was set while waiting.
inline std::optional<runtime::collectives::StepMetadata> inproc_all_reduce(
    DpSyncRank& ar, std::vector<InprocMailbox<DpSyncMessage>>& boxes, int32_t r, int64_t step,
    runtime::collectives::StepMetadata mine, MailWait how, const std::atomic<bool>& abort,
    std::vector<DpSyncMessage>& batch) {
  std::optional<runtime::collectives::StepMetadata> result;
  auto deliver = [&](runtime::collectives::Progress<runtime::collectives::StepMetadata> p) {
    for (DpSyncMessage& m : p.send) boxes[m.to].push(std::move(m));
    if (p.result) result = std::move(p.result);
  };
  deliver(ar.start(step, std::move(mine)));
  while (!result) {
    if (!boxes[r].drain(batch)) {
      if (abort.load()) return std::nullopt;
      boxes[r].wait_for_mail(how);
      continue;
    }
    for (DpSyncMessage& m : batch) deliver(ar.receive(std::move(m)));
  }
  return result;
}

}  // namespace troupe::bench
