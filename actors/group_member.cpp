// One rank of an expert-parallel instance whose ranks are processes of their own
// (EngineOptions::member, docs/cluster.md): each incarnation of the supervisor forms its
// group anew (messages.h has the picture).
//
//   start_forming    a thread makes the UCX worker (runtime/dep/ucx/ucx_group_forming.h)
//   on_address       its address goes to the leader in a join (rank > 0 dials the leader,
//                    rank 0's supervisor, on its node's control port; rank 0 joins itself)
//   on_join          the leader holds each rank's join until all have come, then answers
//                    every one with every address and scheduler
//   (join answered)  the thread connects to the peers; the supervisor watches the other
//                    ranks' schedulers (monitors across the middleman)
//   on_formed        the rank gets its communicator, then the scheduler its DP-sync peers;
//                    /health turns ready
//
// When another rank's scheduler goes away (its process died: the middleman's connection
// broke; or its incarnation ended) this incarnation ends too, without counting towards
// max-engine-restarts, and the next one joins again: a restarted rank process finds the
// others waiting for it. A join that fails (the leader not up yet, or gone) is tried
// again every half second.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <caf/io/all.hpp>
#include <cstring>

#include "actors/control_plane.h"
#include "actors/supervisor_state.h"
#include "kernels/check.h"

#ifdef TROUPE_HAVE_UCX
#include "runtime/dep/ucx/ucx_group_forming.h"
#endif

namespace troupe::actors {
namespace {

constexpr auto kRejoin = std::chrono::milliseconds(500);
// A join waits for the whole group; past this it is sent again (the leader replaces the
// waiting one), so a leader that went away unnoticed costs at most this long.
constexpr auto kJoinTimeout = std::chrono::seconds(30);
constexpr size_t kMaxAddressBytes = 64 * 1024;

const GroupMembership& membership(const SupervisorState& s) { return *s.options.member; }

std::string rank_name(const SupervisorState& s, int rank) {
  return "rank " + std::to_string(rank) + " of instance '" + membership(s).instance + "'";
}

caf::error join_error(std::string why) {
  return caf::make_error(caf::sec::runtime_error, std::move(why));
}

void on_group_formed(supervisor_pointer self, int64_t incarnation, GroupFormed& formed);

void send_join(supervisor_pointer self) {
  auto& s = self->state;
  const GroupMembership& m = membership(s);
  const int64_t incarnation = s.incarnation;
  GroupJoin join{m.instance, m.rank, m.size, s.address, caf::actor_cast<dp_peer_actor>(s.members.front().scheduler)};
  auto again = [=](const caf::error& err) {
    if (self->state.incarnation != incarnation || self->state.formed) return;
    spdlog::debug("{}: join not answered ({}); again", rank_name(self->state, m.rank),
                  describe(self->home_system(), err));
    self->delayed_send(self, kRejoin, dial_atom::value, static_cast<uint64_t>(incarnation));
  };
  supervisor_actor to =
      m.rank == 0 ? caf::actor_cast<supervisor_actor>(self) : s.leader;
  if (!to) {  // rank > 0, the leader not dialed yet (or gone): dial it first
    self->request(control_middleman(self->home_system()), std::chrono::seconds(5),
                  caf::connect_atom::value, m.leader_host, m.leader_port)
        .then(
            [=](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
              if (!ptr) return again(join_error("no actor published there"));
              self->state.leader = caf::actor_cast<supervisor_actor>(std::move(ptr));
              self->monitor(self->state.leader);
              if (self->state.incarnation == incarnation && !self->state.formed) send_join(self);
            },
            again);
    return;
  }
  self->request(to, kJoinTimeout, join_atom::value, std::move(join))
      .then([=](GroupFormed& formed) { on_group_formed(self, incarnation, formed); }, again);
}

void on_group_formed(supervisor_pointer self, int64_t incarnation, GroupFormed& formed) {
  auto& s = self->state;
  if (s.incarnation != incarnation || !s.ending.empty() || !s.forming) return;  // stale
  const GroupMembership& m = membership(s);
  if (formed.addresses.size() != size_t(m.size) || formed.schedulers.size() != size_t(m.size))
    return end_incarnation(self, "the group's leader answered with " +
                                     std::to_string(formed.addresses.size()) + " ranks for " +
                                     std::to_string(m.size), false);
  spdlog::info("{}: group {} has every rank; connecting over UCX", rank_name(s, m.rank),
               formed.generation);
  for (int q = 0; q < m.size; ++q) {
    if (q == m.rank) continue;
    if (!formed.schedulers[size_t(q)])
      return end_incarnation(self, "the group's leader sent no scheduler for rank " + std::to_string(q),
                             false);
    self->monitor(formed.schedulers[size_t(q)]);
    s.watched.push_back(formed.schedulers[size_t(q)].address());
  }
#ifdef TROUPE_HAVE_UCX
  std::vector<runtime::Bytes> all;
  for (const auto& a : formed.addresses) {
    runtime::Bytes b(a.size());
    if (!a.empty()) std::memcpy(b.data(), a.data(), a.size());
    all.push_back(std::move(b));
  }
  s.forming->deliver(std::move(all));
#endif
  s.peers = std::move(formed.schedulers);  // to the scheduler once the rank can step (on_formed)
}

}  // namespace

void start_forming(supervisor_pointer self) {
  auto& s = self->state;
  s.formed = false;
  const GroupMembership& m = membership(s);
  if (s.incarnation == 1)
    s.options.health->set_unavailable("starting: waiting for the " + std::to_string(m.size - 1) +
                                      " other rank(s) of instance '" + m.instance + "' to join");
#ifdef TROUPE_HAVE_UCX
  const caf::actor_addr me = self->address();
  const int64_t incarnation = s.incarnation;
  auto tell = [me](auto... xs) {
    if (auto h = caf::actor_cast<supervisor_actor>(me)) caf::anon_send(h, xs...);
  };
  s.forming = std::make_shared<runtime::UcxGroupForming>(
      m.rank, m.size, runtime::UcxOptions{},
      [=](runtime::Bytes mine) {
        std::vector<uint8_t> address(mine.size());
        if (!mine.empty()) std::memcpy(address.data(), mine.data(), mine.size());
        tell(address_atom::value, incarnation, std::move(address));
      },
      [=](std::string error) { tell(formed_atom::value, incarnation, std::move(error)); });
#endif
}

void on_address(supervisor_pointer self, int64_t incarnation, std::vector<uint8_t> address) {
  auto& s = self->state;
  if (s.incarnation != incarnation || !s.ending.empty() || s.members.empty()) return;
  s.address = std::move(address);
  send_join(self);
}

void retry_join(supervisor_pointer self, int64_t incarnation) {
  auto& s = self->state;
  if (s.incarnation == incarnation && s.ending.empty() && !s.formed && !s.address.empty())
    send_join(self);
}

caf::result<GroupFormed> on_join(supervisor_pointer self, GroupJoin& join) {
  auto& s = self->state;
  if (!s.options.member || s.options.member->rank != 0)
    return join_error("this node does not lead a group (it is not rank 0 of an instance "
                      "spread over processes)");
  const GroupMembership& m = membership(s);
  if (join.instance != m.instance || join.size != m.size || join.rank < 0 || join.rank >= m.size ||
      join.address.size() > kMaxAddressBytes || !join.scheduler) {
    spdlog::warn("group '{}': refused a join as rank {} of {} for instance '{}'", m.instance,
                 join.rank, join.size, join.instance);
    return join_error("refused: this node leads instance '" + m.instance + "' of " +
                      std::to_string(m.size) + " ranks");
  }
  auto rp = self->make_response_promise<GroupFormed>();
  const int32_t rank = join.rank;
  if (auto old = s.joins.find(rank); old != s.joins.end()) {  // a newer incarnation's join
    old->second.reply.deliver(join_error("a newer join of this rank came"));
    s.joins.erase(old);
  }
  if (rank != 0) self->monitor(join.scheduler);  // gone before the group formed: dropped
  s.joins.emplace(rank, SupervisorState::Join{std::move(join), rp});
  spdlog::info("group '{}': rank {} joined ({} of {})", m.instance, rank, s.joins.size(), m.size);
  if (static_cast<int>(s.joins.size()) == m.size) {
    GroupFormed formed;
    formed.generation = ++s.generation;
    for (auto& [r, j] : s.joins) {
      formed.addresses.push_back(j.join.address);
      formed.schedulers.push_back(j.join.scheduler);
    }
    for (auto& [r, j] : s.joins) j.reply.deliver(formed);
    s.joins.clear();
  }
  return rp;
}

void on_formed(supervisor_pointer self, int64_t incarnation, const std::string& error) {
  auto& s = self->state;
  if (s.incarnation != incarnation || !s.ending.empty() || !s.forming) return;
  const GroupMembership& m = membership(s);
  if (!error.empty())
    return end_incarnation(self, "forming the group failed: " + error, false);
#ifdef TROUPE_HAVE_UCX
  s.ucx = s.forming->take();
  spdlog::info("{}: UCX transports {}", rank_name(s, m.rank), s.ucx->transports());
  self->send(s.members.front().rank, group_atom::value,
             std::shared_ptr<runtime::Communicator>(s.ucx));
#endif
  // After the rank's communicator: the scheduler's first step reaches the rank behind it.
  self->send(s.members.front().scheduler, peers_atom::value, std::move(s.peers));
  s.formed = true;
  // Answered after the rank took its communicator (its mailbox keeps the order).
  self->request(s.members.front().rank, caf::infinite, ping_atom::value)
      .then(
          [=](bool) {
            auto& st = self->state;
            if (st.incarnation != incarnation || !st.ending.empty()) return;
            st.ranks_ready = 1;
            st.options.health->set_ready();
            spdlog::info("{}: group formed; serving", rank_name(st, m.rank));
          },
          [](caf::error&) {});  // it died first: its exit is handled there
}

bool on_group_down(supervisor_pointer self, const caf::down_msg& msg) {
  auto& s = self->state;
  if (s.leader && msg.source == s.leader.address()) {
    s.leader = supervisor_actor{};  // dialed again by the next join
    return true;
  }
  for (auto it = s.joins.begin(); it != s.joins.end(); ++it)
    if (it->first != membership(s).rank && it->second.join.scheduler.address() == msg.source) {
      spdlog::info("group '{}': rank {} went away before the group formed", membership(s).instance,
                   it->first);
      s.joins.erase(it);
      return true;
    }
  const auto w = std::find(s.watched.begin(), s.watched.end(), msg.source);
  if (w == s.watched.end()) return false;
  s.watched.erase(w);
  end_incarnation(self,
                  "another rank of instance '" + membership(s).instance + "' went away (" +
                      describe(self->home_system(), msg.reason) + ")",
                  false);
  return true;
}

void close_group(SupervisorState& s, const std::string& why) {
#ifdef TROUPE_HAVE_UCX
  if (s.ucx) s.ucx->close(why);
#endif
  s.forming.reset();  // gives up a forming that is under way (joins its thread)
}

void clear_group(supervisor_pointer self) {
  auto& s = self->state;
  for (const caf::actor_addr& a : s.watched) self->demonitor(a);
  s.watched.clear();
  s.peers.clear();
  s.ucx.reset();
  s.forming.reset();
  s.address.clear();
  s.formed = false;
}

}  // namespace troupe::actors
