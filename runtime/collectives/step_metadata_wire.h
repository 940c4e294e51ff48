// One DP-sync message (a CollectiveMessage<StepMetadata>, all_reduce.h) as bytes, for
// transports between processes (runtime/dep/ucx/ucx_dp_sync.h):
//
//   i32 from | i32 to | i64 step | i32 round | i64 step_min | i64 step_max
//   | u32 R | R x i64 tokens | u8 any_work | i64 placement_ready | u8 any_failed
//   | u8 any_draft | i64 draft_placement_ready
//   | draft_step: i64 limit | i64 decodes | u8 timed | f64 seconds | i64 running
//     | u32 side | u32 cells | cells x (u8 drafted | u8 accepted | i64 count)
//
// little-endian; draft_step's histogram sparse, its nonzero cells in ascending order. The
// decoder reads another process's bytes: it throws troupe::Error on a short or long
// buffer, R over 65536, a flag that is neither 0 nor 1, or a histogram cell out of range,
// order or count (fuzzed: fuzz/peer_wire_fuzz.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/collectives/all_reduce.h"
#include "runtime/collectives/step_metadata.h"

namespace troupe::runtime::collectives {

using StepMetadataMessage = CollectiveMessage<StepMetadata>;

std::vector<std::byte> encode_step_metadata_message(const StepMetadataMessage& m);
StepMetadataMessage decode_step_metadata_message(const std::vector<std::byte>& wire);

}  // namespace troupe::runtime::collectives
