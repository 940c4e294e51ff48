// The DP-sync all-reduce of the step metadata (runtime/collectives) between processes:
// the rank's AllReduceRank state machine, its messages as bytes (step_metadata_wire.h)
// over the UcxCommunicator's mail channel, beside the MoE exchanges on the same worker.
#pragma once

#include <cstdint>

#include "runtime/collectives/all_reduce.h"
#include "runtime/collectives/step_metadata.h"
#include "runtime/dep/ucx/ucx_communicator.h"

namespace troupe::runtime {

using StepMetadataRank =
    collectives::AllReduceRank<collectives::StepMetadata, collectives::StepMetadataReduce>;

// This rank contributes `mine` to step `step` and returns the reduction. Messages of the
// next step that come meanwhile stay buffered in `ar`. Throws troupe::Error when a peer is
// gone, sends a malformed message, or no message came for timeout_s.
collectives::StepMetadata ucx_all_reduce(UcxCommunicator& comm, StepMetadataRank& ar, int64_t step,
                                         collectives::StepMetadata mine, double timeout_s = 60);

}  // namespace troupe::runtime
