// The Communicator (runtime/dep/communicator.h) for R ranks in different processes or
// nodes, over UCP tag messages (ucx_worker.h says why tags). UCX picks the transport:
// shared memory (sysv/posix + cma) between processes of one host, TCP across hosts;
// nothing here sets UCX_TLS. Same semantics as InProcessGroup (in_process_group.h):
//
//   begin_step   every rank, once per step; steps and the k-th exchange of a step name
//                one exchange on every rank (the tag: kind | sender | step | exchange)
//   all_to_all   sends send[r] to rank r, returns once every peer's buffer for this
//                exchange has come (messages that come early, for a later exchange or
//                step, wait in a map; ones of a finished step are dropped)
//   abort        fails the rest of the caller's step on every rank: it sends an abort
//                message to each peer (the tag's exchange field: how many exchanges of
//                the step it completed), and a rank waiting in a later exchange of that
//                step, or entering one, throws troupe::Error with the reason; one still in
//                an exchange the aborter completed finishes it (every rank sent its
//                buffers for it), as in InProcessGroup; the next step works (a rank
//                already past that step ignores it)
//
// A peer that dies makes waiting ranks throw within a bounded time, never hang: UCX error
// handling mode peer on endpoints to other hosts (TCP reset, UCX keepalive), a /proc
// watch of peers on this host (UCX 1.13's shared-memory transports support no peer
// error mode: an endpoint that asked for it would fall back to TCP), and an exchange
// timeout for a peer that hangs alive. After that every exchange throws, as after
// InProcessGroup::close: the owner makes a new group.
//
// Bootstrap: the caller's all-gather of byte strings (all_gather.h) carries each rank's
// PeerAddress (peer_address.h); the constructor connects to every peer and exchanges a
// hello with each, so the transports are known (and logged) when it returns.
//
//   UcxCommunicator c(rank, size, directory_all_gather(dir, "group", rank, size));
//   spdlog::info("{}", c.transports());
//   c.begin_step();  auto recv = c.all_to_all(std::move(send));
#pragma once

#include <cstdint>
#include <atomic>
#include <deque>
#include <mutex>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/dep/all_gather.h"
#include "runtime/dep/communicator.h"
#include "runtime/dep/peer_address.h"

namespace troupe::runtime {

class UcxWorker;

struct UcxOptions {
  double exchange_timeout_s = 120;  // an exchange waiting longer for a peer throws
  double connect_timeout_s = 60;    // the start-up hello
  double keepalive_interval_s = 1;  // UCX keepalive of peer-error-mode endpoints
  // Auto: peers on this host (same host key) over what UCX picks there, shared memory,
  // watched through /proc; the others in UCX peer error mode. Always: every endpoint in
  // peer error mode (TCP even on one host, with UCX 1.13).
  enum class PeerErrors { Auto, Always } peer_errors = PeerErrors::Auto;
  // Set by another thread: the start-up all-gather's owner gave up (the group will never
  // form): the hello wait throws instead of waiting out connect_timeout_s. May be null.
  const std::atomic<bool>* cancel = nullptr;
};

class UcxCommunicator : public Communicator {
 public:
  UcxCommunicator(int rank, int size, const AllGather& all_gather, UcxOptions options = {});
  ~UcxCommunicator() override;
  UcxCommunicator(const UcxCommunicator&) = delete;
  UcxCommunicator& operator=(const UcxCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void begin_step() override;
  std::vector<Bytes> all_to_all(std::vector<Bytes> send) override;
  void abort(const std::string& why) override;

  // From any thread: the group is over (a peer's incarnation ended, its owner knows it
  // first): every exchange of this rank, waiting or later, throws with `why`. As after a
  // peer died, the owner makes a new communicator.
  void close(const std::string& why);

  // The UCX transports to each peer: "rank 1: sysv/memory cma/memory; rank 2: tcp/lo".
  std::string transports() const;

  // Small messages outside the steps' exchanges (the DP-sync all-reduce, ucx_dp_sync.h):
  // post() sends one to rank `to`; next_mail() returns one that came (sender, bytes),
  // waiting at most timeout_s for it, nullopt if none did. Throws when a peer is gone.
  void post(int to, Bytes message);
  std::optional<std::pair<int, Bytes>> next_mail(double timeout_s);

 private:
  using Key = std::tuple<int64_t, int64_t, int>;  // step, exchange in the step, sender
  void pump();                                     // progress UCX, sort what came
  void record_failure(int64_t step, int64_t completed, const std::string& why);
  void throw_if_failed(int64_t exchange);  // when this step failed at or before `exchange`
  void throw_if_peer_gone(int peer);
  void throw_if_any_peer_gone();
  int64_t unwrap_step(uint32_t low) const;

  const int rank_, size_;
  const UcxOptions options_;
  std::unique_ptr<UcxWorker> worker_;
  std::vector<PeerAddress> peers_;  // [size], this rank's own included
  std::vector<bool> watch_;         // [size] on this host, watched in /proc (else UCX peer errors)
  int64_t step_ = 0;
  int64_t exchange_ = 0;   // exchanges begun in this step
  int64_t completed_ = 0;  // exchanges this rank completed in this step
  std::map<Key, Bytes> arrived_;
  struct Failure {
    std::string why;
    int64_t completed = 0;  // the fewest exchanges an aborting rank had completed
  };
  std::map<int64_t, Failure> failed_;  // step -> its failure (the last few steps)
  std::deque<std::pair<int, Bytes>> mail_;
  std::set<int> hellos_;
  std::atomic<bool> closed_{false};
  std::mutex close_mu_;
  std::string close_why_;  // under close_mu_, set once before closed_
  double next_watch_ = 0;  // when to look at same-host peers in /proc next
};

}  // namespace troupe::runtime
