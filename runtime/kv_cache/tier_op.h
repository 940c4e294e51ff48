// A copy between the primary pool and a lower tier that the bookkeeping (KvTiers) decided
// and the executor carries out, in plan order, before the step's forward (TierStorage::
// apply). They travel in the StepPlan because only the rank touches the bytes, and plans
// run in the order they were made, so every op sees the bytes the ops before it left.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::runtime {

enum class TierOpKind : uint8_t {
  SaveToHost,    // primary block -> host slot (the block was evicted; its bytes are intact
                 // until a later op or forward of this plan writes it)
  SpillToDisk,   // host slot -> the file of `hash` (the host slot is about to be reused)
  DropFromDisk,  // delete the file of `hash` (the disk tier is full)
  LoadFromHost,  // host slot -> primary block (a prefix hit)
  LoadFromDisk,  // payload -> primary block (a prefix hit): the file was read and checked
                 // when the hit was found, so the rank never meets a bad file mid-step
};

struct TierOp {
  TierOpKind kind = TierOpKind::SaveToHost;
  int32_t block = -1;      // primary block id (Save source, Load destination)
  int32_t host_slot = -1;  // Save destination, Spill and LoadFromHost source
  uint64_t hash = 0;       // the block's chained hash: names its file
  uint64_t parent_hash = 0;
  std::vector<int32_t> tokens;   // [block_size] Spill: the file header's
  std::vector<uint8_t> payload;  // [block bytes] LoadFromDisk: the checked file's rows
};

}  // namespace troupe::runtime
