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

  // Every rank calls it once at the start of each step (the ranks step in lockstep), so
  // an abort can fail just the rest of one step.
  virtual void begin_step() = 0;

  // A collective: every rank calls it with send[size()] (send[r] goes to rank r, its own
  // included) and gets recv[size()] (recv[r] is what rank r sent to this one). Returns
  // once every rank has called it. Throws troupe::Error when a rank aborted this step.
  virtual std::vector<Bytes> all_to_all(std::vector<Bytes> send) = 0;

  // A rank that cannot go on (its step threw) aborts the rest of its step: every rank
  // waiting in one of that step's exchanges, or entering one later, throws with `why`
  // instead of waiting forever; the next step works again (in_process_group.h).
  virtual void abort(const std::string& why) = 0;
};

}  // namespace troupe::runtime
