// The router of a cluster's router node (docs/cluster.md): the engines of the other
// nodes, reached over CAF's middleman, plus this node's own engine if it has one. It dials
// each remote engine until it answers (processes start in any order), monitors it, and
// when one goes away (its process died) ends that engine's requests in flight with an
// error, routes new requests to the others, and dials it again so a restarted process
// rejoins without restarting anything else. Tokens come back through the router (it is
// the engines' reply-to), so it knows which requests each engine holds: a new request
// goes to the up engine with the fewest in flight (ties: the lower slot). The ranks of an
// expert-parallel instance spread over processes step together, so while one is down
// the others get nothing new (they could not run it until it is back).
//
// Cache-aware routing (docs/pd.md "Cache-aware routing"): with more than one engine that
// may take a new request, each is probed for the longest prefix of the prompt its prefix
// cache holds; runtime::choose_rank picks among those within one request of the least
// loaded the one holding the most (SGLang's router does this with an approximate radix
// tree per instance; asking the engines is exact, for one round trip). An engine that
// does not answer within 200 ms counts as holding nothing.
//
// P/D (docs/pd.md): with prefill and decode instances, a new request goes to a prefill
// (or mixed) engine with kv_hand_off_after = 1; when its event says HandedOff the router
// asks that engine to move it to the decode engine with the fewest in flight, and passes
// the event on as a running one: the client sees one stream, its first token from the
// prefill side, the rest from the decode side. When the move fails (refused, no answer in
// its lease, the receiver gone) the prefill engine answers with the request's tokens and
// the router has a decode engine recompute them, under a fresh id so that whatever the
// first receiver might still send is dropped here ("When a move fails").
//
// Drain (drain_atom, POST /admin/drain): the instance's engines take nothing new, and
// each of their requests is parked where its KV is consistent (park_atom) and moved as
// above to another decode engine; requests not yet holding KV there are asked again
// every 200 ms until none is left. An engine that goes away and comes back is no
// longer draining.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <caf/io/all.hpp>
#include <chrono>
#include <optional>
#include <unordered_map>

#include "actors/control_plane.h"
#include "actors/engine_actors.h"
#include "actors/engine_parts.h"
#include "kernels/check.h"
#include "runtime/step/engine_figures.h"

namespace troupe::actors {
namespace {

using cluster_router_actor =
    router_actor::extend<caf::reacts_to<token_atom, TokenEvent>, caf::reacts_to<dial_atom, uint64_t>,
                         caf::replies_to<drain_atom, std::string>::with<std::string, int64_t>,
                         caf::reacts_to<drain_atom>>;

constexpr auto kRedial = std::chrono::milliseconds(500);
constexpr auto kDialTimeout = std::chrono::seconds(5);
// How long a prefill engine may take to answer a move: it answers itself once its
// receiver confirms or its lease runs out (1 s + 50 MB/s), so this bounds a hung engine.
constexpr auto kMoveAnswerTimeout = std::chrono::seconds(120);
// Ids of recomputed fallbacks: far above the API's ids (counted from 0).
constexpr runtime::RequestId kFallbackIds = runtime::RequestId(1) << 62;
constexpr auto kDrainRetry = std::chrono::milliseconds(200);
constexpr auto kProbeTimeout = std::chrono::milliseconds(200);
constexpr int64_t kPrefixLoadMargin = 1;  // runtime::choose_rank's margin, as DEP-R's default

struct Slot {
  ClusterEngineAddress where;
  scheduler_actor engine;  // null while down
  int64_t in_flight = 0;
  bool draining = false;   // takes nothing new; its requests move away

  const std::string& instance() const { return where.instance.empty() ? where.name : where.instance; }
};

struct Client {
  size_t slot = 0;
  caf::actor client;
  runtime::RequestId client_id = 0;  // the id the client knows (a fallback runs under another)
  runtime::RequestParams params;     // as sent: to recompute it elsewhere when a move fails
  // Being moved from slot `from` to `slot` (P/D; slot == from when no decode engine was
  // up), until `from` answers or `slot` streams its first event: if `from` goes away
  // meanwhile, or does not answer, the request falls back on `resume`; if `slot` does,
  // `from` answers with a failure and the request falls back.
  bool moving = false;
  size_t from = 0;
  KvHandoffBytes resume;  // while moving: its tokens without KV (TokenEvent::resume)
  bool aborted = false;   // the client aborted it while it was moving: it must not go on
  // Sent to a prefill engine, alone (no siblings): its prompt, until its first event, so
  // it can be sent again elsewhere if that engine is lost before (on_engine_down).
  std::vector<int32_t> prompt;
  bool streamed = false;  // an event of it has reached the client
  // Drain: when and from which slot its engine was asked to park it, until the first
  // tokens from another (logged: the time to the next token on the new instance).
  std::optional<std::chrono::steady_clock::time_point> drained_at;
  size_t drained_from = 0;
  // A P/D move's phases as the router sees them (EngineFigures::kv_handoff_phase_seconds):
  // sent to the prefill engine, its HandedOff event (its first token), the move answered
  // (the KV landed, the receiver queued it), the receiver's first event with tokens.
  using Time = std::chrono::steady_clock::time_point;
  Time sent_at = std::chrono::steady_clock::now();
  std::optional<Time> handed_at, answered_at, resumed_at;
};

struct ClusterRouterState {
  std::vector<Slot> slots;
  std::unordered_map<runtime::RequestId, Client> requests;  // by the engine's id (siblings each)
  std::unordered_map<runtime::RequestId, runtime::RequestId> fallbacks;  // client id -> engine id
  runtime::RequestId next_fallback = kFallbackIds;
  // Requests being probed for (cache-aware routing), and those the client aborted meanwhile.
  std::unordered_map<runtime::RequestId, bool> probing;  // id -> aborted
  std::shared_ptr<InstanceHealth> health;
  // The P/D moves' phases summed (prefill, transfer, first decode) and their count.
  double phase_seconds[3] = {0, 0, 0};
  int64_t phased_moves = 0;
};

using Self = cluster_router_actor::stateful_pointer<ClusterRouterState>;

// Adds a move's phases once its answer and the receiver's first tokens have both come
// (in either order: they travel different paths). A move that failed is not counted.
void count_phases(ClusterRouterState& st, Client& c) {
  if (!c.handed_at || !c.answered_at || !c.resumed_at) return;
  using Seconds = std::chrono::duration<double>;
  st.phase_seconds[0] += Seconds(*c.handed_at - c.sent_at).count();
  st.phase_seconds[1] += Seconds(*c.answered_at - *c.handed_at).count();
  st.phase_seconds[2] += std::max(0.0, Seconds(*c.resumed_at - *c.answered_at).count());
  st.phased_moves += 1;
  c.handed_at.reset();  // once
  c.answered_at.reset();
  c.resumed_at.reset();
}

// /health: 503 naming every engine not up, until all are.
void report_health(Self self) {
  std::string missing;
  size_t down = 0;
  for (const Slot& s : self->state.slots)
    if (!s.engine) missing += (down++ ? ", " : "") + s.where.name;
  if (down == 0)
    self->state.health->set_ready();
  else
    self->state.health->set_unavailable(std::to_string(down) + " of " +
                                          std::to_string(self->state.slots.size()) +
                                          " engines not up: " + missing);
}

// The event that ends request id (the client's) with an error.
TokenEvent failed(runtime::RequestId id, const std::string& why) {
  TokenEvent ev;
  ev.output.id = id;
  ev.output.status = runtime::RequestStatus::FinishedError;
  ev.output.error_cause = runtime::ErrorCause::EngineDied;
  ev.output.error = why;
  return ev;
}

// The event that ends request id (the client's) as the client asked.
TokenEvent aborted(runtime::RequestId id) {
  TokenEvent ev;
  ev.output.id = id;
  ev.output.status = runtime::RequestStatus::FinishedAborted;
  return ev;
}

void dial(Self self, uint64_t slot) {
  const ClusterEngineAddress& w = self->state.slots[slot].where;
  self->request(control_middleman(self->home_system()), kDialTimeout,
                caf::connect_atom::value, w.host, w.port)
      .then(
          [=](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            Slot& s = self->state.slots[slot];
            if (!ptr) {
              self->delayed_send(self, kRedial, dial_atom::value, slot);
              return;
            }
            s.engine = caf::actor_cast<scheduler_actor>(std::move(ptr));
            self->monitor(s.engine);
            spdlog::info("cluster: {} joined", s.where.name);
            report_health(self);
          },
          [=](const caf::error&) { self->delayed_send(self, kRedial, dial_atom::value, slot); });
}

void fall_back(Self self, runtime::RequestId id, const std::string& why, KvHandoffBytes& tokens);
bool send_again(Self self, runtime::RequestId id, const std::string& why);
void end_with_error(Self self, runtime::RequestId id, const std::string& why);

// An engine went away: its requests end with an error (those it was moving fall back to
// a recompute), and it is dialed again.
void on_engine_down(Self self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (size_t i = 0; i < st.slots.size(); ++i) {
    Slot& s = st.slots[i];
    if (!s.engine || s.engine.address() != dm.source) continue;
    const std::string why = s.where.name + " went away (" + caf::to_string(dm.reason) + ")";
    spdlog::error("cluster: {}; its {} request(s) in flight end with an error", why, s.in_flight);
    s.engine = scheduler_actor{};
    s.draining = false;  // back from a restart, it serves again
    std::vector<runtime::RequestId> recompute;
    for (auto it = st.requests.begin(); it != st.requests.end();) {
      Client& c = it->second;
      const bool moving_from = c.moving && c.from == i;
      // Moving to it: the sender answers (its lease runs out) and the request falls back.
      if ((c.slot != i && !moving_from) || (c.moving && c.slot == i && c.from != i)) {
        ++it;
        continue;
      }
      if ((moving_from && !c.resume.bytes.empty()) || (!c.moving && !c.streamed && !c.prompt.empty())) {
        recompute.push_back(it->first);  // its tokens, or its prompt, can go elsewhere
        ++it;
        continue;
      }
      if (moving_from) {  // the receiver may hold it already: it must not run on
        Slot& to = st.slots[c.slot];
        to.in_flight -= 1;
        if (to.engine) self->send(to.engine, abort_atom::value, it->first);
      }
      caf::anon_send(c.client, token_atom::value, c.aborted ? aborted(c.client_id) : failed(c.client_id, why));
      st.fallbacks.erase(c.client_id);
      it = st.requests.erase(it);
    }
    // What is still counted on it: the moves to it, which fall back when their sender answers.
    s.in_flight = 0;
    for (const auto& [id, c] : st.requests) s.in_flight += c.slot == i;
    for (runtime::RequestId id : recompute) {  // fall_back and send_again take its entry out
      Client& c = st.requests.at(id);
      if (!c.moving) {
        if (!send_again(self, id, why)) end_with_error(self, id, why);
        continue;
      }
      KvHandoffBytes tokens = std::move(c.resume);
      fall_back(self, id, why, tokens);
    }
    report_health(self);
    if (s.where.port != 0) self->delayed_send(self, kRedial, dial_atom::value, uint64_t(i));  // remote
  }
}

// Whether slot i may take a request: it is up, and so is every other rank of its group.
bool serving(const ClusterRouterState& st, size_t i) {
  if (!st.slots[i].engine) return false;
  const std::string& group = st.slots[i].where.group;
  if (group.empty()) return true;
  return std::all_of(st.slots.begin(), st.slots.end(),
                     [&](const Slot& s) { return s.where.group != group || s.engine; });
}

// The serving engine with the fewest requests in flight: of the decode engines when
// `decode`, else of the others; not `avoid` while another is serving; -1 when none is.
int pick(const ClusterRouterState& st, bool decode = false, int avoid = -1) {
  int best = -1;
  for (size_t i = 0; i < st.slots.size(); ++i)
    if ((st.slots[i].where.role == EngineRole::Decode) == decode && serving(st, i) &&
        !st.slots[i].draining && int(i) != avoid &&
        (best < 0 || st.slots[i].in_flight < st.slots[size_t(best)].in_flight))
      best = static_cast<int>(i);
  return best < 0 && avoid >= 0 ? pick(st, decode) : best;
}

std::vector<runtime::RequestId> ids_of(const GenerateRequest& req) {
  std::vector<runtime::RequestId> ids{req.id};
  for (const runtime::Sibling& s : req.siblings) ids.push_back(s.id);
  return ids;
}

// Ends request id (the engine's) with an error, for its client.
void end_with_error(Self self, runtime::RequestId id, const std::string& why) {
  auto& st = self->state;
  const auto it = st.requests.find(id);
  if (it == st.requests.end()) return;
  st.slots[it->second.slot].in_flight -= 1;
  caf::anon_send(it->second.client, token_atom::value, failed(it->second.client_id, why));
  st.fallbacks.erase(it->second.client_id);
  st.requests.erase(it);
}

// Request id's move failed: a decode engine (another than the one that failed, when one
// is up) recomputes its tokens under a fresh id; without one the request ends with why.
// One the client aborted meanwhile just ends, as aborted.
// Puts entry c under a fresh engine id on slot `to` (the client keeps its own id, and
// whatever the old id still streams is dropped): a fallback, or a request sent again.
runtime::RequestId rehome(ClusterRouterState& st, Client c, size_t to) {
  const runtime::RequestId fresh = st.next_fallback++;
  c.moving = false;
  c.slot = to;
  st.slots[to].in_flight += 1;
  st.fallbacks[c.client_id] = fresh;
  st.requests.emplace(fresh, std::move(c));
  return fresh;
}

// A request whose prefill engine was lost before its first event (nothing streamed yet):
// sent as it came to another prefill or mixed engine, else to a decode engine to run
// whole. False when none is up.
bool send_again(Self self, runtime::RequestId id, const std::string& why) {
  auto& st = self->state;
  Client& c = st.requests.at(id);
  int to = pick(st, /*decode=*/false, static_cast<int>(c.slot));
  if (to == static_cast<int>(c.slot)) to = -1;
  if (to < 0) to = pick(st, /*decode=*/true);
  if (to < 0) return false;
  const bool prefill = st.slots[size_t(to)].where.role == EngineRole::Prefill;
  spdlog::warn("cluster: request {}: {} before its first token; sent again to {}", c.client_id, why,
               st.slots[size_t(to)].where.name);
  GenerateRequest req{0, c.prompt, c.params, {}};
  req.params.kv_hand_off_after = prefill && req.params.max_tokens > 1 ? 1 : 0;
  st.slots[c.slot].in_flight -= 1;
  Client moved = std::move(c);
  st.requests.erase(id);
  if (!prefill) moved.prompt.clear();
  moved.sent_at = std::chrono::steady_clock::now();  // timed afresh, not as drained
  moved.drained_at.reset();
  req.id = rehome(st, std::move(moved), size_t(to));
  self->send(st.slots[size_t(to)].engine, generate_atom::value, std::move(req),
             caf::actor_cast<caf::actor>(self));
  return true;
}

void fall_back(Self self, runtime::RequestId id, const std::string& why, KvHandoffBytes& tokens) {
  auto& st = self->state;
  const auto it = st.requests.find(id);
  if (it == st.requests.end()) return;  // ended meanwhile
  Client c = std::move(it->second);
  st.requests.erase(it);
  c.handed_at.reset(), c.answered_at.reset(), c.resumed_at.reset();  // a failed move: not timed
  Slot& failed_at = st.slots[c.slot];
  failed_at.in_flight -= 1;
  if (failed_at.engine) self->send(failed_at.engine, abort_atom::value, id);  // a late arrival
  if (c.aborted) {
    caf::anon_send(c.client, token_atom::value, aborted(c.client_id));
    st.fallbacks.erase(c.client_id);
    return;
  }
  const int to = pick(st, /*decode=*/true, static_cast<int>(c.slot));
  if (to < 0) {
    spdlog::error("cluster: request {}: KV hand-off failed ({}); no decode engine is up", c.client_id, why);
    caf::anon_send(c.client, token_atom::value,
                   failed(c.client_id, "KV hand-off failed (" + why +
                                                      ") and no decode engine is up to recompute it"));
    st.fallbacks.erase(c.client_id);
    return;
  }
  spdlog::warn("cluster: request {}: KV hand-off failed ({}); {} recomputes it", c.client_id, why,
               st.slots[size_t(to)].where.name);
  GenerateRequest req{0, {}, c.params, {}};
  req.params.kv_hand_off_after = 0;
  const runtime::RequestId fresh = rehome(st, std::move(c), size_t(to));
  req.id = fresh;
  const auto engine = caf::actor_cast<caf::actor>(st.slots[size_t(to)].engine);
  self->request(engine, kDialTimeout, import_atom::value, std::move(req), std::move(tokens),
                caf::actor_cast<caf::actor>(self))
      .then(
          [=](const std::string& refused) {
            if (!refused.empty()) end_with_error(self, fresh, "KV hand-off failed (" + why + "); recomputing it failed: " + refused);
          },
          [=](const caf::error& err) {  // it may still take it late: it must not run on
            caf::anon_send(engine, abort_atom::value, fresh);
            end_with_error(self, fresh, "KV hand-off failed (" + why + "); recomputing it failed: " +
                                            describe(self->home_system(), err));
          });
}

// A prefill engine's request parked after its first token: it moves to a decode engine
// (none up: the prefill engine is told so, frees it and ends it with an error), and the
// client's stream goes on.
void move_to_decode(Self self, runtime::RequestId id, Client& c, TokenEvent& ev) {
  auto& st = self->state;
  const scheduler_actor from = st.slots[c.slot].engine;
  const int to = pick(st, /*decode=*/true);
  caf::actor target;
  c.moving = true;
  c.from = c.slot;
  if (to >= 0) {
    st.slots[c.slot].in_flight -= 1;
    st.slots[size_t(to)].in_flight += 1;
    c.slot = size_t(to);
    target = caf::actor_cast<caf::actor>(st.slots[size_t(to)].engine);
  } else {
    spdlog::warn("cluster: request {}: no decode engine is up to continue it", id);
  }
  ev.output.status = runtime::RequestStatus::Running;
  if (!from) return;
  // The entry of a move still pending, else null (answered, confirmed by the receiver's
  // first event, or ended).
  auto pending = [self, id]() -> Client* {
    const auto it = self->state.requests.find(id);
    return it == self->state.requests.end() || !it->second.moving ? nullptr : &it->second;
  };
  self->request(caf::actor_cast<caf::actor>(from), kMoveAnswerTimeout, handoff_atom::value, id, target)
      .then(
          [=](const std::string& why, KvHandoffBytes& tokens) {
            if (const auto it = self->state.requests.find(id); it != self->state.requests.end()) {
              Client& moved = it->second;
              if (!why.empty()) moved.handed_at.reset(), moved.resumed_at.reset();  // not counted
              if (why.empty() && moved.handed_at) moved.answered_at = std::chrono::steady_clock::now();
              count_phases(self->state, moved);
            }
            Client* c = pending();
            if (c == nullptr) return;
            c->moving = false;
            KvHandoffBytes resume = std::move(c->resume);
            if (why.empty()) {
              if (const auto& e = self->state.slots[c->slot].engine; c->aborted && e)
                self->send(e, abort_atom::value, id);
              return;
            }
            fall_back(self, id, why, tokens.bytes.empty() ? resume : tokens);
          },
          [=](const caf::error& err) {  // the engine hung (gone: on_engine_down)
            Client* c = pending();
            if (c == nullptr) return;
            c->moving = false;
            KvHandoffBytes tokens = std::move(c->resume);
            fall_back(self, id, "no answer from the engine moving it (" +
                                    describe(self->home_system(), err) + ")", tokens);
          });
}

// Sends a new request (and its siblings) to slot `slot` (-1: none is up: it fails).
void send_new(Self self, GenerateRequest req, const caf::actor& client, int slot) {
  auto& st = self->state;
  if (slot < 0) {
    const std::string why = "no engine is up (" + st.health->problem().value_or("") + ")";
    for (runtime::RequestId id : ids_of(req)) {
      st.probing.erase(id);
      caf::anon_send(client, token_atom::value, failed(id, why));
    }
    return;
  }
  const bool prefill = st.slots[size_t(slot)].where.role == EngineRole::Prefill;
  auto track = [&](runtime::RequestId id, runtime::RequestParams& p) {
    if (prefill) p.kv_hand_off_after = p.max_tokens > 1 ? 1 : 0;  // its first token only
    Client& c = st.requests[id];
    c = Client{};
    c.slot = size_t(slot);
    c.client = client;
    c.client_id = id;
    c.params = p;
  };
  track(req.id, req.params);
  for (runtime::Sibling& s : req.siblings) track(s.id, s.params);
  if (prefill && req.siblings.empty()) st.requests[req.id].prompt = req.prompt;
  st.slots[size_t(slot)].in_flight += 1 + static_cast<int64_t>(req.siblings.size());
  std::vector<runtime::RequestId> aborted;
  for (runtime::RequestId id : ids_of(req)) {
    const auto p = st.probing.find(id);
    if (p == st.probing.end()) continue;
    if (p->second) aborted.push_back(id);
    st.probing.erase(p);
  }
  const scheduler_actor engine = st.slots[size_t(slot)].engine;
  self->send(engine, generate_atom::value, std::move(req), caf::actor_cast<caf::actor>(self));
  for (runtime::RequestId id : aborted) self->send(engine, abort_atom::value, id);  // after it
}

// Cache-aware: probes each candidate for the prompt's cached prefix, then sends the
// request where runtime::choose_rank says (loads: the router's own in-flight counts, as
// of the answers).
void probe_and_send(Self self, GenerateRequest req, caf::actor client, std::vector<size_t> candidates) {
  auto& st = self->state;
  for (runtime::RequestId id : ids_of(req)) st.probing[id] = false;
  auto pending = std::make_shared<GenerateRequest>(std::move(req));
  auto cached = std::make_shared<std::vector<int64_t>>(candidates.size(), 0);
  auto left = std::make_shared<size_t>(candidates.size());
  auto answered = [=](size_t k, int64_t tokens) {
    (*cached)[k] = tokens;
    if (--*left > 0) return;
    auto& st = self->state;
    std::vector<runtime::RankLoad> loads;
    std::vector<size_t> up;
    for (size_t c = 0; c < candidates.size(); ++c)
      if (serving(st, candidates[c]) && !st.slots[candidates[c]].draining) {
        loads.push_back({st.slots[candidates[c]].in_flight, (*cached)[c]});
        up.push_back(candidates[c]);
      }
    const int slot = up.empty() ? pick(st) : int(up[size_t(runtime::choose_rank(loads, kPrefixLoadMargin))]);
    send_new(self, std::move(*pending), client, slot);
  };
  for (size_t k = 0; k < candidates.size(); ++k)
    self->request(caf::actor_cast<caf::actor>(st.slots[candidates[k]].engine), kProbeTimeout,
                  probe_atom::value, pending->prompt)
        .then([=](const runtime::RankLoad& l) { answered(k, l.cached_tokens); },
              [=](const caf::error&) { answered(k, 0); });
}

// Asks the draining engines to park each of their requests; how many they hold, counting
// those still moving to them (asked once they have arrived).
int64_t park_drained(Self self) {
  auto& st = self->state;
  int64_t asked = 0;
  for (auto& [id, c] : st.requests) {
    const Slot& s = st.slots[c.slot];
    if (!s.draining || !s.engine) continue;
    if (c.moving) {
      ++asked;
      continue;
    }
    if (!c.drained_at) {
      c.drained_at = std::chrono::steady_clock::now();
      c.drained_from = c.slot;
    }
    caf::anon_send(caf::actor_cast<caf::actor>(s.engine), park_atom::value, id);
    ++asked;
  }
  return asked;
}

// Starts draining `instance`: why not, or "" and how many requests it holds.
std::pair<std::string, int64_t> drain(Self self, const std::string& instance) {
  auto& st = self->state;
  std::string names;
  bool found = false, elsewhere = false;
  for (size_t i = 0; i < st.slots.size(); ++i) {
    const Slot& s = st.slots[i];
    if (names.find(s.instance()) == std::string::npos) names += (names.empty() ? "" : ", ") + s.instance();
    found |= s.instance() == instance;
    elsewhere |= s.instance() != instance && s.where.role == EngineRole::Decode && serving(st, i) &&
                 !s.draining;
  }
  if (!found) return {"no instance named '" + instance + "' (instances: " + names + ")", 0};
  if (!elsewhere) return {"no other decode instance is up to take the requests of '" + instance + "'", 0};
  for (Slot& s : st.slots)
    if (s.instance() == instance) s.draining = true;
  const int64_t n = park_drained(self);
  spdlog::info("cluster: draining instance {}: {} request(s) to move", instance, n);
  if (n > 0) self->delayed_send(self, kDrainRetry, drain_atom::value);
  return {std::string(), n};
}

// The cluster's figures from its engines' (by slot; nullopt: no answer): each instance's
// engines summed and named, then those summed.
runtime::EngineFigures per_instance(const std::vector<Slot>& slots,
                                    const std::vector<std::optional<runtime::EngineFigures>>& parts) {
  std::vector<runtime::EngineFigures> instances;
  std::vector<std::string> names;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!parts[i]) continue;
    const auto at = std::find(names.begin(), names.end(), slots[i].instance());
    if (at != names.end()) {  // a rank of an instance spread over processes
      const size_t k = size_t(at - names.begin());
      const runtime::EngineFigures both[2] = {instances[k], *parts[i]};
      instances[k] = runtime::sum_figures(both);
      instances[k].per_rank.clear();
    } else {
      names.push_back(slots[i].instance());
      instances.push_back(*parts[i]);
    }
  }
  for (size_t k = 0; k < instances.size(); ++k) instances[k].instance = names[k];
  return runtime::sum_figures(instances);
}

cluster_router_actor::behavior_type cluster_router_fun(Self self,
                                                       std::vector<ClusterEngineAddress> remote,
                                                       std::vector<LocalEngine> local,
                                                       std::shared_ptr<InstanceHealth> health) {
  auto& st = self->state;
  st.health = std::move(health);
  for (LocalEngine& e : local)
    st.slots.push_back({{std::move(e.name), "", 0, std::move(e.group), e.role, std::move(e.instance)},
                        std::move(e.engine), 0});
  for (Slot& s : st.slots) self->monitor(s.engine);  // the local ones: lost, never redialed
  for (ClusterEngineAddress& w : remote) st.slots.push_back({std::move(w), scheduler_actor{}, 0});
  TROUPE_CHECK(!st.slots.empty(), "cluster router needs at least one engine");
  self->set_down_handler([=](const caf::down_msg& dm) { on_engine_down(self, dm); });
  report_health(self);
  for (size_t i = 0; i < st.slots.size(); ++i)
    if (!st.slots[i].engine) dial(self, i);
  // The engine holding the client's request id, and the id it knows it by.
  auto engine_of = [=](runtime::RequestId& id) -> scheduler_actor {
    auto& st = self->state;
    if (const auto f = st.fallbacks.find(id); f != st.fallbacks.end()) id = f->second;
    const auto it = st.requests.find(id);
    return it == st.requests.end() ? scheduler_actor{} : st.slots[it->second.slot].engine;
  };
  return {
      [=](generate_atom, GenerateRequest& req, caf::actor client) {
        auto& st = self->state;
        std::vector<size_t> candidates;
        for (size_t i = 0; i < st.slots.size(); ++i)
          if (st.slots[i].where.role != EngineRole::Decode && serving(st, i) && !st.slots[i].draining)
            candidates.push_back(i);
        if (candidates.size() < 2) return send_new(self, std::move(req), client, pick(st));
        probe_and_send(self, std::move(req), std::move(client), std::move(candidates));
      },
      [=](token_atom, TokenEvent& ev) {
        auto& st = self->state;
        const auto it = st.requests.find(ev.output.id);
        if (it == st.requests.end()) return;  // already failed when its engine went away
        const caf::actor client = it->second.client;
        it->second.streamed = true;
        it->second.prompt.clear();  // streaming: a loss now is a move's or an error
        if (ev.output.status == runtime::RequestStatus::HandedOff) {
          if (!it->second.drained_at) it->second.handed_at = std::chrono::steady_clock::now();
          it->second.resume = std::move(ev.resume);
          move_to_decode(self, ev.output.id, it->second, ev);
          ev.output.id = it->second.client_id;
          caf::anon_send(client, token_atom::value, std::move(ev));
          return;
        }
        if (it->second.moving) {  // only the receiver streams now: it has the request
          it->second.moving = false;
          it->second.resume = {};
          if (const auto& e = st.slots[it->second.slot].engine; it->second.aborted && e)
            self->send(e, abort_atom::value, ev.output.id);
        }
        if (it->second.handed_at && !it->second.resumed_at && !ev.output.new_tokens.empty()) {
          it->second.resumed_at = std::chrono::steady_clock::now();
          count_phases(st, it->second);
        }
        ev.output.id = it->second.client_id;
        if (it->second.drained_at && it->second.slot != it->second.drained_from &&
            !ev.output.new_tokens.empty()) {
          const std::chrono::duration<double, std::milli> gap =
              std::chrono::steady_clock::now() - *it->second.drained_at;
          spdlog::info("cluster: request {} went on on {} {:.1f} ms after the drain asked",
                       it->second.client_id, st.slots[it->second.slot].where.name, gap.count());
          it->second.drained_at.reset();
        }
        if (ev.output.finished()) {
          st.slots[it->second.slot].in_flight -= 1;
          st.fallbacks.erase(it->second.client_id);
          st.requests.erase(it);
        }
        caf::anon_send(client, token_atom::value, std::move(ev));
      },
      [=](abort_atom, runtime::RequestId id) {
        auto& st = self->state;
        if (const auto p = st.probing.find(id); p != st.probing.end()) {
          p->second = true;  // aborted once it is sent
          return;
        }
        scheduler_actor e = engine_of(id);
        // Moving, the receiver may not hold it yet: aborted again once it does; lost with
        // its engine, it ends aborted rather than being sent again.
        if (const auto it = st.requests.find(id); it != st.requests.end()) {
          it->second.aborted = true;
          it->second.prompt.clear();
        }
        if (e) self->send(e, abort_atom::value, id);
      },
      [=](fail_atom, runtime::RequestId id, const std::string& why) {
        if (scheduler_actor e = engine_of(id)) self->send(e, fail_atom::value, id, why);
      },
      [=](dial_atom, uint64_t slot) { dial(self, slot); },
      [=](drain_atom, const std::string& instance) -> caf::result<std::string, int64_t> {
        auto [why, n] = drain(self, instance);
        return {std::move(why), n};
      },
      [=](drain_atom) {  // the retry: requests that held no KV yet when asked
        if (park_drained(self) > 0) self->delayed_send(self, kDrainRetry, drain_atom::value);
      },
      // The cluster's figures: every up engine's, summed (runtime::sum_figures), with
      // per_rank = each instance's (its engines summed), named, in slot order.
      [=](stats_atom) -> caf::result<runtime::EngineFigures> {
        auto rp = self->make_response_promise<runtime::EngineFigures>();
        const auto& slots = self->state.slots;
        auto parts = std::make_shared<std::vector<std::optional<runtime::EngineFigures>>>(slots.size());
        auto pending = std::make_shared<size_t>(0);
        for (const Slot& s : slots) *pending += s.engine != nullptr;
        if (*pending == 0) {
          runtime::EngineFigures none;
          for (int k = 0; k < 3; ++k) none.kv_handoff_phase_seconds[k] = self->state.phase_seconds[k];
          none.kv_handoff_phased = self->state.phased_moves;
          return none;
        }
        auto done = [=]() mutable {
          if (--*pending > 0) return;
          runtime::EngineFigures f = per_instance(self->state.slots, *parts);
          for (int k = 0; k < 3; ++k) f.kv_handoff_phase_seconds[k] = self->state.phase_seconds[k];
          f.kv_handoff_phased = self->state.phased_moves;
          rp.deliver(std::move(f));
        };
        for (size_t i = 0; i < slots.size(); ++i) {
          if (!slots[i].engine) continue;
          self->request(slots[i].engine, kDialTimeout, stats_atom::value)
              .then([=](runtime::EngineFigures& f) mutable {
                      (*parts)[i] = std::move(f);
                      done();
                    },
                    [=](const caf::error&) mutable { done(); });
        }
        return rp;
      },
  };
}

}  // namespace

router_actor spawn_cluster_router(caf::actor_system& sys, std::vector<ClusterEngineAddress> remote,
                                  std::vector<LocalEngine> local,
                                  std::shared_ptr<InstanceHealth> health) {
  return sys.spawn(cluster_router_fun, std::move(remote), std::move(local), std::move(health));
}

}  // namespace troupe::actors
