// The data plane between the ranks of one instance (DESIGN.md): MoE dispatch and combine
// go through this, never through actor messages. Implementations: in-process shared
// memory (runtime/dep/in_process_group.h) here; UCX across processes and NCCL on GPUs
// implement the same interface.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::runtime {

using Bytes = std::vector<std::byte>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // A collective: every rank calls it with send[size()] (send[r] goes to rank r, its own
  // included) and gets recv[size()] (recv[r] is what rank r sent to this one). Returns
  // once every rank has called it. Throws troupe::Error when a rank aborted the group.
  virtual std::vector<Bytes> all_to_all(std::vector<Bytes> send) = 0;

  // A rank that cannot go on (its step threw) aborts the group: every rank waiting in,
  // or later entering, all_to_all throws with `why` instead of waiting for it forever,
  // until the group is reset (in_process_group.h).
  virtual void abort(const std::string& why) = 0;
};

}  // namespace troupe::runtime
