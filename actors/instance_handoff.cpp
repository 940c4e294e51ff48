// KV hand-offs to and from an instance of R ranks in one process (docs/pd.md "Roles in
// a cluster"): the supervisor's side. A move goes to the rank whose scheduler parked the
// request; an arriving hand-off goes to the rank runtime::choose_rank picks from every
// scheduler's load and cached prefix of its tokens (as a new request does). With one
// rank both are that rank's scheduler's. One rank of an instance spread over processes
// (options.member) is such a one-rank instance here: its own scheduler packs, its own
// transfer agent pushes or receives, and an import is a request like any other for the
// group's DP sync (its plan's tokens enter the step metadata of the step that runs it).
// The cluster router chooses which rank process a hand-off goes to.
#include <spdlog/spdlog.h>

#include <limits>
#include <tuple>
#include <variant>

#include "actors/supervisor_state.h"
#include "runtime/dep/rank_choice.h"

namespace troupe::actors {
namespace {

// A rank's probe answer is awaited this long (as the cluster router's): a slow rank must
// not eat the sender's lease (about a second). The moves and imports forwarded to a rank
// are bounded by the longest lease the router waits for (its move-answer timeout).
constexpr auto kProbeTimeout = std::chrono::milliseconds(200);
constexpr auto kForwardTimeout = std::chrono::seconds(120);

}  // namespace

std::string handoffs_refused(const SupervisorState& st) {
  if (!st.down.empty()) return "the engine is down: " + st.down;
  if (st.members.empty() || !st.ending.empty()) return "the engine is restarting (" + st.ending + ")";
  for (const Member& m : st.members)
    if (!m.scheduler) return "the engine is restarting (" + st.ending + ")";
  return {};
}

caf::result<std::string, KvHandoffBytes> route_handoff(supervisor_pointer self, runtime::RequestId id,
                                                       caf::actor target) {
  auto& st = self->state;
  if (std::string why = handoffs_refused(st); !why.empty()) return {std::move(why), KvHandoffBytes{}};
  if (st.size() == 1)
    return self->delegate(st.members.front().scheduler, handoff_atom::value, id, std::move(target));
  // Whoever parked it moves it; the others answer that they do not hold it. An anonymous
  // ask stays anonymous, so a failed move ends the request there (scheduler_actor.cpp).
  if (self->current_sender() == nullptr) {
    for (const Member& m : st.members) caf::anon_send(m.scheduler, handoff_atom::value, id, target);
    return {std::string(), KvHandoffBytes{}};
  }
  auto rp = self->make_response_promise<std::string, KvHandoffBytes>();
  auto left = std::make_shared<int>(st.size());
  auto answered = std::make_shared<bool>(false);
  auto got = [=](std::string why, KvHandoffBytes tokens, bool held) mutable {
    // The holder's answer: "" (moved) or why with its tokens. Else, once all said no, no.
    if (*answered || (!held && --*left > 0)) return;
    *answered = true;
    rp.deliver(std::move(why), std::move(tokens));
  };
  for (const Member& m : st.members)
    self->request(m.scheduler, kForwardTimeout, handoff_atom::value, id, target)
        .then(
            [=](std::string& why, KvHandoffBytes& tokens) mutable {
              const bool held = why.empty() || !tokens.bytes.empty();
              got(std::move(why), std::move(tokens), held);
            },
            [=](caf::error& e) mutable {
              got("the rank holding it failed: " + describe(self->home_system(), e), {}, false);
            });
  return rp;
}

caf::result<std::string> route_import(supervisor_pointer self, GenerateRequest& req,
                                      std::variant<KvHandoffBytes, KvHandoffValue> kv,
                                      caf::actor client) {
  auto& st = self->state;
  if (std::string why = handoffs_refused(st); !why.empty()) return why;
  // Forwards it to rank scheduler `s` and relays the answer to rp.
  auto forward = [self](const scheduler_core_actor& s, GenerateRequest& req,
                        std::variant<KvHandoffBytes, KvHandoffValue>& kv, caf::actor& client,
                        caf::typed_response_promise<std::string> rp) {
    std::visit(
        [&](auto& payload) {
          self->request(s, kForwardTimeout, import_atom::value, std::move(req), std::move(payload),
                        std::move(client))
              .then([=](std::string& why) mutable { rp.deliver(std::move(why)); },
                    [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
        },
        kv);
  };
  auto rp = self->make_response_promise<std::string>();
  if (st.size() == 1) {
    forward(st.members.front().scheduler, req, kv, client, rp);
    return rp;
  }
  // One import placed at a time (as route_generate places requests), so each probe's
  // answers count the imports placed before it; its tokens, for each rank's cached prefix
  // (a hand-off in bytes: its load only). Aborts that come meanwhile follow it.
  std::vector<int32_t> tokens;
  if (const auto* v = std::get_if<KvHandoffValue>(&kv)) tokens = v->h.tokens;
  const runtime::RequestId id = req.id;
  st.placing_imports.insert(id);
  auto pending = std::make_shared<std::tuple<GenerateRequest, std::variant<KvHandoffBytes, KvHandoffValue>, caf::actor>>(
      std::move(req), std::move(kv), std::move(client));
  auto place = [=]() mutable {
    auto& s = self->state;
    const int R = s.size();
    auto loads = std::make_shared<std::vector<runtime::RankLoad>>(R);
    auto left = std::make_shared<int>(R);
    const int64_t margin = s.options.prefix_load_margin;
    auto answered = [=](int r, runtime::RankLoad load) mutable {
      (*loads)[r] = load;
      if (--*left > 0) return;
      auto& st = self->state;
      st.placing_imports.erase(id);
      const int to = runtime::choose_rank(*loads, margin);
      std::string why = handoffs_refused(st);
      if (why.empty() && to >= static_cast<int>(st.members.size())) why = "the engine is restarting";
      if (!why.empty()) {
        st.routing_aborts.erase(id);
        rp.deliver(std::move(why));
      } else {
        auto& [q, payload, c] = *pending;
        const scheduler_core_actor& to_rank = st.members[size_t(to)].scheduler;
        forward(to_rank, q, payload, c, rp);
        if (st.routing_aborts.erase(id) > 0) self->send(to_rank, abort_atom::value, id);  // after it
      }
      st.import_queue.pop_front();
      if (!st.import_queue.empty()) st.import_queue.front()();
    };
    for (int r = 0; r < R; ++r)
      self->request(s.members[size_t(r)].scheduler, kProbeTimeout, probe_atom::value, tokens)
          .then([=](runtime::RankLoad l) mutable { answered(r, l); },
                [=](caf::error&) mutable {
                  answered(r, runtime::RankLoad{std::numeric_limits<int64_t>::max() / 2, 0});
                });
  };
  st.import_queue.push_back(std::move(place));
  if (st.import_queue.size() == 1) st.import_queue.front()();
  return rp;
}

}  // namespace troupe::actors
