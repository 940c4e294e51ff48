// The instance's KV transfer agent (engine_parts.h, docs/pd.md "The transfer agent").
// Sender: a parked request's region goes by one RMA put into staging memory the
// receiver's agent reserved and advertised, then a commit message carries the rest (its
// tokens and text state, the shape) and the receiver's answer comes back. Receiver: a
// reserve leases a zeroed staging region and exposes it; a commit takes it, and the
// hand-off goes to the instance's scheduler as an import, with the region the put wrote
// (no copy on this side). No UCX on either side, or a put that fails: the whole hand-off
// goes in a message instead (import with its bytes).
//
// Why an actor of its own: the scheduler's step loop never waits on a transfer, and the
// receiving rank never submits reads (the sender writes). The UCX worker is driven only
// here (single-threaded), polled while anything is in flight; no call blocks, so the
// agent is a scheduled actor, not a detached one. (Detached, it once kept a decode
// process of a bench run from finishing its shutdown: CAF waited for the agent's thread,
// whose actor was never destroyed. Not reproduced since; a scheduled actor has no thread
// to wait for.)
//
// Puts that hang: with UCX's error mode none, a put to a receiver this side cannot write
// to neither lands nor fails; it times out at the move's deadline. Such a receiver (its
// worker address) then gets its hand-offs in messages for a while (PeerBackoff), so not
// every move to it waits out a lease, and RMA is tried again after.
//
// Deadlines: the whole move runs under kv_transfer_lease(bytes) from its push (the
// scheduler waits 0.5 s longer, so this side's timeout is the one heard); a put still in flight past it is abandoned (its endpoint
// closed, so nothing more of it is written). The receiver's lease on a staging region is
// twice that from the reserve, and its memory stays one more lease after (StagingLeases):
// longer than any put of a live sender can last.
#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>

#include "actors/engine_parts.h"
#include "runtime/kv_transfer/peer_backoff.h"
#include "runtime/kv_transfer/staging_leases.h"
#ifdef TROUPE_HAVE_UCX
#include "runtime/dep/ucx/ucx_rma.h"
#endif

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

// A put in flight and what to do when it is done, failed, or past its deadline.
struct PendingPut {
  uint64_t put = 0;
  bool hangs = false;  // kv-put-hang: never issued, so it only times out
  Clock::time_point deadline;
  std::shared_ptr<runtime::KvHandoff> h;  // the region stays alive until the put is over
  enum class End { Done, Failed, TimedOut };
  std::function<void(End, const std::string&)> then;
};

struct KvAgentState {
  static inline const char* name = "kv-agent";
  caf::actor_addr imports;  // the supervisor
  std::shared_ptr<KvAgentCounters> counters;
  std::shared_ptr<const runtime::FaultPlan> faults;
  std::unique_ptr<runtime::RmaTransport> rma;  // started on first use; null: none here
  bool rma_tried = false;
  std::vector<uint8_t> rma_address;
  runtime::StagingLeases leases{0};
  // Receivers whose puts timed out: their hand-offs go in messages for a while.
  runtime::PeerBackoff backoff{{}, {}};  // its whiles are set at spawn
  std::vector<PendingPut> puts;
  bool polling = false;

  // The agent ends with its incarnation while the process goes on. First the transport
  // (its endpoints closed: none of our puts runs on; our regions deregistered), then the
  // staging memory goes to the process's quarantine, since a sender elsewhere may still
  // be writing to it, and only then are our regions in flight freed (puts).
  ~KvAgentState() {
    rma.reset();
    runtime::StagingQuarantine::keep(leases.surrender());
  }
};

using agent_pointer = kv_agent_actor::stateful_pointer<KvAgentState>;

// The RMA transport, started the first time a hand-off needs it (most engines never move
// one); null where this build has no UCX or it would not start.
runtime::RmaTransport* transport(KvAgentState& s) {
  if (s.rma_tried) return s.rma.get();
  s.rma_tried = true;
#ifdef TROUPE_HAVE_UCX
  try {
    s.rma = std::make_unique<runtime::UcxRma>();
    s.rma_address = s.rma->address();
  } catch (const std::exception& e) {
    spdlog::warn("KV transfer agent: no RMA ({}); hand-offs go in messages", e.what());
    s.rma = nullptr;
  }
#endif
  return s.rma.get();
}

std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

void poll_soon(agent_pointer self) {
  if (self->state.polling) return;
  self->state.polling = true;
  self->send(self, kvpoll_atom::value);
}

// One round: progress the transport, finish the puts that are over, expire leases; again
// while anything is in flight (at once after progress, else in 200 us).
void poll(agent_pointer self) {
  auto& s = self->state;
  s.polling = false;
  if (!s.rma) return;
  const bool progressed = s.rma->progress();
  std::vector<std::pair<PendingPut, std::pair<PendingPut::End, std::string>>> over;
  const auto now = Clock::now();
  for (size_t i = 0; i < s.puts.size();) {
    PendingPut& p = s.puts[i];
    std::string error;
    const auto st = p.hangs ? runtime::RmaTransport::PutState::InProgress : s.rma->state(p.put, &error);
    PendingPut::End end;
    if (st == runtime::RmaTransport::PutState::Done) {
      end = PendingPut::End::Done;
    } else if (st == runtime::RmaTransport::PutState::Failed) {
      end = PendingPut::End::Failed;
    } else if (now >= p.deadline) {
      if (!p.hangs) s.rma->abandon(p.put);
      end = PendingPut::End::TimedOut;
    } else {
      ++i;
      continue;
    }
    over.push_back({std::move(p), {end, error}});
    s.puts.erase(s.puts.begin() + static_cast<ptrdiff_t>(i));
  }
  for (uint64_t id : s.leases.expire(now)) {
    s.rma->withdraw(id);
    s.counters->leases_expired += 1;
    spdlog::warn("KV transfer agent: staging lease {} expired without a commit (sender lost?)", id);
  }
  runtime::StagingQuarantine::sweep(now);
  for (auto& [p, end] : over) p.then(end.first, end.second);  // may start more
  if (s.puts.empty() && s.leases.empty()) return;
  s.polling = true;
  if (progressed) return self->send(self, kvpoll_atom::value);
  if (!s.puts.empty() || s.leases.open() > 0)  // a put may be landing: keep progressing
    return self->delayed_send(self, std::chrono::microseconds(200), kvpoll_atom::value);
  // Only quarantined regions left: nothing to progress until the next one is due.
  const auto due = std::chrono::duration_cast<std::chrono::microseconds>(s.leases.next_deadline() - now);
  self->delayed_send(self, std::clamp(due, std::chrono::microseconds(200), std::chrono::microseconds(100'000)),
                     kvpoll_atom::value);
}

// Relays the receiver's answer (or its error) to whoever pushed; `moved` counts a
// hand-off the receiver took.
template <typename Promise>
auto relay(Promise rp, std::atomic<int64_t>* moved) {
  return std::make_pair(
      [rp, moved](std::string& why) mutable {
        if (why.empty()) *moved += 1;
        rp.deliver(std::move(why));
      },
      [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
}

// Tells the receiver its lease will not be committed (the put failed or was abandoned),
// so its staging region is quarantined now instead of at its lease's end.
void release(const caf::actor& target, uint64_t lease) {
  caf::anon_send(target, kvrelease_atom::value, lease);
}

// The whole hand-off in one message (no RMA on a side, or its put failed).
void by_message(agent_pointer self, caf::typed_response_promise<std::string> rp,
                const GenerateRequest& req, const std::shared_ptr<runtime::KvHandoff>& h,
                const caf::actor& target, const caf::actor& client, Clock::time_point deadline) {
  KvHandoffBytes bytes;
  try {
    bytes = handoff_bytes(*h);
  } catch (const std::exception& e) {  // bad_alloc: this side cannot send it
    rp.deliver(caf::make_error(caf::sec::runtime_error, std::string("encoding the hand-off: ") + e.what()));
    return;
  }
  auto [ok, err] = relay(rp, &self->state.counters->messages);
  bytes.lease_ms = left(deadline).count();  // past it, the receiver drops it itself
  self->request(target, left(deadline), import_atom::value, req, std::move(bytes), client)
      .then(std::move(ok), std::move(err));
}

// The receiver leased staging memory: put the region there, then commit the rest.
void put_region(agent_pointer self, caf::typed_response_promise<std::string> rp,
                const GenerateRequest& req, const std::shared_ptr<runtime::KvHandoff>& h,
                const caf::actor& target, const caf::actor& client, Clock::time_point deadline,
                const KvLease& lease) {
  auto& s = self->state;
  uint64_t put = 0;
  const bool hangs = s.faults && s.faults->next_put();
  if (hangs)
    spdlog::warn("KV transfer agent: injected fault kv-put-hang: request {}'s put never lands", req.id);
  try {
    if (!hangs) put = s.rma->put(lease.address, lease.rkey, lease.remote_address, h->region);
  } catch (const std::exception& e) {
    spdlog::warn("KV transfer agent: request {}: {}; sending it in a message", req.id, e.what());
    release(target, lease.lease);
    return by_message(self, rp, req, h, target, client, deadline);
  }
  s.counters->descriptors += 1;
  if (s.counters->descriptors == 1)
    spdlog::info("KV transfer agent: regions go over {}", s.rma->transports(lease.address));
  auto then = [=](PendingPut::End end, const std::string& why) mutable {
    auto& st = self->state;
    if (end == PendingPut::End::TimedOut) {
      st.backoff.timed_out(lease.address, Clock::now());
      spdlog::warn("KV transfer agent: request {}: the put timed out; hand-offs to that receiver "
                   "go in messages for a while", req.id);
      release(target, lease.lease);
      rp.deliver(caf::make_error(caf::sec::request_timeout,
                                 std::string("the KV put did not finish within its lease")));
      return;
    }
    if (end == PendingPut::End::Failed) {
      spdlog::warn("KV transfer agent: request {}: {}; sending it in a message", req.id, why);
      release(target, lease.lease);
      return by_message(self, rp, req, h, target, client, deadline);
    }
    st.backoff.landed(lease.address);
    if (st.faults && st.faults->next_commit()) {
      spdlog::warn("KV transfer agent: injected fault kv-commit-drop: request {} not committed", req.id);
      return;  // never answered: the pusher's lease runs out, the receiver's frees its memory
    }
    h->region.clear();  // landed: the commit carries the rest
    h->region.shrink_to_fit();
    auto [ok, err] = relay(rp, &st.counters->rma);
    self->request(target, left(deadline), kvcommit_atom::value, lease.lease, req,
                  handoff_bytes(*h), client)  // a few bytes a token: no region
        .then(std::move(ok), std::move(err));
  };
  s.puts.push_back({put, hangs, deadline, h, std::move(then)});
  poll_soon(self);
}

// Sender: moves the parked request `req` with hand-off `v` to engine `target`, whose
// scheduler then streams to `client`.
caf::result<std::string> push(agent_pointer self, GenerateRequest& req, KvHandoffValue& v,
                              const caf::actor& target, const caf::actor& client) {
  auto rp = self->make_response_promise<std::string>();
  auto h = std::make_shared<runtime::KvHandoff>(std::move(v.h));
  const auto lease = runtime::kv_transfer_lease(h->region.size());
  const auto deadline = Clock::now() + lease;
  if (h->region.empty() || !transport(self->state)) {
    by_message(self, rp, req, h, target, client, deadline);
    return rp;
  }
  self->request(target, lease, kvreserve_atom::value, uint64_t(h->region.size()))
      .then(
          [=](const KvLease& l) mutable {
            if (l.lease != 0 && self->state.backoff.avoid(l.address, Clock::now())) {
              release(target, l.lease);  // its last put hung: no RMA to it for now
              return by_message(self, rp, req, h, target, client, deadline);
            }
            if (l.lease != 0) return put_region(self, rp, req, h, target, client, deadline, l);
            if (!l.why.empty())
              spdlog::info("KV transfer agent: request {}: no RMA at the receiver ({}); in a message",
                           req.id, l.why);
            by_message(self, rp, req, h, target, client, deadline);
          },
          [=](caf::error& e) mutable {
            // The receiver gone or silent: nothing gets through. Anything else (it does
            // not take reserves): the whole hand-off in a message.
            if (e == caf::sec::request_timeout || e == caf::sec::request_receiver_down) {
              rp.deliver(std::move(e));  // (deliver returns a value: the lambda returns none)
              return;
            }
            by_message(self, rp, req, h, target, client, deadline);
          });
  return rp;
}

// Receiver: staging memory for a region of `bytes`, exposed for the sender's put.
KvLease reserve(agent_pointer self, uint64_t bytes) {
  auto& s = self->state;
  if (!transport(s)) return {};
  const auto r = s.leases.reserve(bytes, Clock::now());
  if (r.id == 0) return KvLease{0, {}, 0, {}, r.why};
  try {
    const auto exposed = s.rma->expose(r.id, *s.leases.memory(r.id));
    poll_soon(self);  // some transports (TCP) need this side's progress to land the put
    return KvLease{r.id, s.rma_address, exposed.remote_address, exposed.rkey, {}};
  } catch (const std::exception& e) {
    s.rma->withdraw(r.id);  // if it got that far
    s.leases.take(r.id);
    return KvLease{0, {}, 0, {}, e.what()};
  }
}

// Receiver: the put into lease `lease` has landed; `header` is the rest of the hand-off.
caf::result<std::string> commit(agent_pointer self, uint64_t lease, GenerateRequest& req,
                                const KvHandoffBytes& header, caf::actor& client) {
  auto& s = self->state;
  const auto give_up = s.leases.sender_gives_up(lease);
  std::optional<runtime::RegionBytes> region = s.leases.take(lease);
  if (!region)
    return caf::make_error(caf::sec::request_timeout,
                           "KV staging lease " + std::to_string(lease) + " has expired");
  s.rma->withdraw(lease);
  runtime::KvHandoff h;
  try {
    const auto* b = reinterpret_cast<const std::byte*>(header.bytes.data());
    h = runtime::decode_kv_handoff(std::vector<std::byte>(b, b + header.bytes.size()));
  } catch (const std::exception& e) {  // from another process: it hears why, we carry on
    return std::string(e.what());
  }
  if (!h.region.empty()) return std::string("a KV commit carries a region of its own");
  h.region = std::move(*region);
  const auto to = caf::actor_cast<supervisor_actor>(s.imports);
  if (!to) return caf::make_error(caf::sec::request_receiver_down);
  return self->delegate(to, import_atom::value, std::move(req), KvHandoffValue{std::move(h), *give_up},
                        std::move(client));
}

kv_agent_actor::behavior_type kv_agent_fun(agent_pointer self, caf::actor_addr imports,
                                           std::shared_ptr<KvAgentCounters> counters,
                                           std::shared_ptr<const runtime::FaultPlan> faults,
                                           uint64_t max_staging_bytes,
                                           std::chrono::milliseconds put_backoff) {
  auto& s = self->state;
  s.backoff = runtime::PeerBackoff(put_backoff, std::max<Clock::duration>(put_backoff, std::chrono::minutes(5)));
  s.imports = std::move(imports);
  s.counters = std::move(counters);
  s.faults = std::move(faults);
  s.leases = runtime::StagingLeases(max_staging_bytes);
  return {
      [=](kvpush_atom, GenerateRequest& req, KvHandoffValue& v, caf::actor& target,
          caf::actor& client) { return push(self, req, v, target, client); },
      [=](kvreserve_atom, uint64_t bytes) { return reserve(self, bytes); },
      [=](kvcommit_atom, uint64_t lease, GenerateRequest& req, KvHandoffBytes& header,
          caf::actor& client) { return commit(self, lease, req, header, client); },
      [=](kvrelease_atom, uint64_t lease) {
        auto& st = self->state;
        if (st.rma && st.leases.release(lease, Clock::now())) st.rma->withdraw(lease);
      },
      [=](kvpoll_atom) { poll(self); },
  };
}

}  // namespace

kv_agent_actor spawn_kv_agent(caf::actor_system& sys, caf::actor_addr imports,
                              std::shared_ptr<KvAgentCounters> counters,
                              std::shared_ptr<const runtime::FaultPlan> faults,
                              uint64_t max_staging_bytes, std::chrono::milliseconds put_backoff) {
  return sys.spawn(kv_agent_fun, std::move(imports), std::move(counters), std::move(faults),
                   max_staging_bytes, put_backoff);
}

}  // namespace troupe::actors
