// The request mix of `troupe bench soak`: what one client does next, drawn from a seeded
// splitmix64 state so a seed names one sequence of actions per client. Mostly good
// completions and chat requests (streamed or not, random prompt lengths and max_tokens,
// greedy or seeded sampling), mixed with clients that leave (abort mid-stream, disconnect
// before the answer) and bad requests that must get a 4xx (malformed JSON, bad fields,
// max_tokens beyond the context, unknown routes, garbage bytes, headers sent slowly and
// never finished). Pure logic: no sockets (bench/soak/soak_actions.cpp sends them).
#pragma once

#include <cstdint>
#include <string>

#include "bench/serve/sse_client.h"

namespace troupe::bench {

enum class SoakKind {
  Completion,          // POST /v1/completions, one JSON body
  CompletionStream,    // the same, server-sent events
  Chat,                // POST /v1/chat/completions, one JSON body
  ChatStream,          // the same, server-sent events
  AbortMidStream,      // a stream the client closes after a few events
  DisconnectEarly,     // a request sent (wholly or half) and the socket closed at once
  MalformedJson,       // a body that is not JSON, or not an object
  BadField,            // JSON with a field of the wrong type or out of range
  OversizedMaxTokens,  // max_tokens far beyond the context
  UnknownRoute,        // a path the server does not have, or a method it refuses
  Garbage,             // bytes that are not an HTTP request
  SlowHeaders,         // a request line and headers trickled in, then given up
};
constexpr int kSoakKinds = 12;

// What the server must do: a good request gets 200 (its client may leave early); a bad
// one a 4xx (for Garbage also a plain close; for SlowHeaders also no answer at all).
enum class SoakExpect { Ok, ClientLeaves, Reject };

const char* soak_kind_name(SoakKind kind);
SoakExpect soak_expect(SoakKind kind);
// A good request: one whose answer is 200 and whose tokens count in the throughput.
inline bool soak_counts_tokens(SoakKind k) {
  return k == SoakKind::Completion || k == SoakKind::CompletionStream || k == SoakKind::Chat ||
         k == SoakKind::ChatStream;
}

struct SoakAction {
  SoakKind kind = SoakKind::Completion;
  std::string request;      // the bytes to send (a whole HTTP request, or garbage)
  bool stream = false;      // the answer is an event stream
  int64_t abort_after = 0;  // AbortMidStream: close after this many events
  int64_t send_bytes = 0;   // DisconnectEarly / SlowHeaders: how much of `request` to send
  int64_t pause_ms = 0;     // SlowHeaders: the pause between pieces
};

// chat: whether the server renders chat for its model. Without (a model with no chat
// template: its chat requests are answered 400 by design) the mix sends a completion, or a
// completion stream, wherever it would send a good chat request; its bad requests stay.
// The next action of a client: any kind, with the mix's weights (soak_workload.cpp).
SoakAction draw_soak_action(uint64_t& state, const BaseUrl& base, bool chat = true);
// The next good request (Completion .. ChatStream): the reference run's workload.
SoakAction draw_good_action(uint64_t& state, const BaseUrl& base, bool chat = true);
// A good request of the given kind (Completion .. ChatStream).
SoakAction draw_good_action_of(SoakKind kind, uint64_t& state, const BaseUrl& base);

}  // namespace troupe::bench
