// The UCP plumbing under UcxCommunicator (ucx_communicator.h): one context and worker,
// an endpoint per peer, tagged sends and receives that own their buffers. Requests are
// polled, never called back, so all state is touched by the one thread that drives the
// worker (UCS_THREAD_MODE_SINGLE).
//
// Why tag matching rather than active messages: every exchange carries a variable-size
// buffer the receiver cannot size in advance, and the tag (kind, sender, step, exchange)
// is exactly what the communicator matches on. ucp_tag_probe_nb hands over each message
// with its length and tag, so the receiver sizes the buffer and UCX still picks eager or
// rendezvous (zero-copy for big buffers) by size, which an AM handler would have to
// re-implement (ucp_am_recv_data_nbx for rendezvous data).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dep/communicator.h"

// The UCP handles, kept out of this header (ucp.h stays inside runtime/dep/ucx/*.cpp).
struct ucp_context;
struct ucp_worker;
struct ucp_ep;

namespace troupe::runtime {

struct UcxMessage {
  uint64_t tag = 0;
  Bytes data;
};

class UcxWorker {
 public:
  // keepalive_interval_s: how often UCX checks peers of peer-error-mode endpoints (its
  // UCX_KEEPALIVE_INTERVAL, unless that variable is set).
  explicit UcxWorker(double keepalive_interval_s);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  Bytes address() const;  // this worker's UCP address, for the peers' connect()

  // An endpoint to `peer` (any int id, each once). peer_errors: UCX error handling mode
  // peer (the endpoint fails when the peer goes away). UCX 1.13's shared-memory
  // transports (sysv, posix, cma) do not support that mode, so such an endpoint uses TCP
  // even on one host; without it UCX may pick shared memory and the caller watches the
  // peer itself. Both sides of a pair must choose the same.
  void connect(int peer, const Bytes& ucp_address, bool peer_errors);

  // Sends `data` to `peer` under `tag`; the buffer lives until the send is done.
  void send(int peer, uint64_t tag, Bytes data);

  // One round of ucp_worker_progress: starts receiving every message that came, and
  // appends each one that has fully arrived to `out`. True when anything happened.
  bool progress(std::vector<UcxMessage>& out);

  // Why `peer` is unusable (UCX said so, or fail_peer); empty while it is fine.
  const std::string& peer_error(int peer) const;
  void fail_peer(int peer, std::string why);

  // The transports of the endpoint's lanes, from ucp_ep_print_info: "sysv/memory
  // cma/memory", "tcp/lo".
  std::string transports(int peer) const;

  struct Pending;  // a request in flight and what it owns

  // Progresses until every send to a peer that has not failed is done, or timeout_s
  // passed (before closing, and after an abort).
  void flush(double timeout_s);

 private:
  struct Peer;
  Peer& peer(int id) const;
  void reap(std::vector<UcxMessage>& out);

  ucp_context* context_ = nullptr;
  ucp_worker* worker_ = nullptr;
  std::vector<std::unique_ptr<Peer>> peers_;  // stable addresses: the error callback's arg
  std::vector<Pending> sends_, recvs_;
};

}  // namespace troupe::runtime
