#include "bench/soak/soak_workload.h"

#include <array>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/workload/random_tokens.h"

namespace troupe::bench {
namespace {

using nlohmann::json;

// Draw weights per kind, in SoakKind order (sum 100): 60 good, 16 leaving, 24 bad.
constexpr std::array<int, kSoakKinds> kWeights = {14, 22, 10, 14, 9, 7, 5, 6, 3, 4, 3, 3};
static_assert([] {
  int sum = 0;
  for (int w : kWeights) sum += w;
  return sum == 100;
}());

int64_t uniform(uint64_t& state, int64_t lo, int64_t hi) {  // [lo, hi]
  return lo + int64_t(runtime::splitmix64(state) % uint64_t(hi - lo + 1));
}

template <class T, size_t N>
const T& pick(uint64_t& state, const T (&items)[N]) {
  return items[size_t(uniform(state, 0, int64_t(N) - 1))];
}

std::string words(uint64_t& state, int64_t n) {
  static const char* const kWords[] = {"the",  "cat",  "sat",   "on",   "a",      "mat",  "and",
                                       "then", "ran",  "far",   "away", "from",   "home", "once",
                                       "upon", "time", "there", "was",  "little", "dog"};
  std::string out;
  for (int64_t i = 0; i < n; ++i) out += (i ? " " : "") + std::string(pick(state, kWords));
  return out;
}

// Greedy half the time, else seeded sampling (the same seed gives the same text).
void sampling(uint64_t& state, json& body) {
  if (uniform(state, 0, 1) == 0) {
    body["temperature"] = 0;
    return;
  }
  body["temperature"] = 0.8;
  body["top_p"] = 0.95;
  body["seed"] = uniform(state, 0, int64_t(1) << 31);
}

// A good body for /v1/completions (chat = false) or /v1/chat/completions: a random prompt
// (text of 1-120 words, or 1-256 token ids for completions), max_tokens 1..max_tokens.
json good_body(uint64_t& state, bool chat, bool stream, int64_t max_tokens) {
  json body;
  if (chat) {
    body["messages"] = json::array();
    if (uniform(state, 0, 1))
      body["messages"].push_back({{"role", "system"}, {"content", "Be brief."}});
    body["messages"].push_back(
        {{"role", "user"}, {"content", words(state, uniform(state, 1, 120))}});
  } else if (uniform(state, 0, 1)) {
    body["prompt"] = words(state, uniform(state, 1, 120));
  } else {
    body["prompt"] = runtime::draw_tokens(state, uniform(state, 1, 256), 2, 4096);
  }
  body["max_tokens"] = uniform(state, 1, max_tokens);
  body["ignore_eos"] = uniform(state, 0, 1) == 1;
  sampling(state, body);
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

const char* path_of(bool chat) {
  return chat ? "/v1/chat/completions" : "/v1/completions";
}

// Chat kinds as their completion twins where the server has no chat (draw_soak_action).
SoakKind without_chat(SoakKind kind, bool chat) {
  if (chat) return kind;
  if (kind == SoakKind::Chat) return SoakKind::Completion;
  return kind == SoakKind::ChatStream ? SoakKind::CompletionStream : kind;
}

SoakAction good(uint64_t& state, const BaseUrl& base, SoakKind kind) {
  SoakAction a;
  a.kind = kind;
  const bool chat = kind == SoakKind::Chat || kind == SoakKind::ChatStream;
  a.stream = kind == SoakKind::CompletionStream || kind == SoakKind::ChatStream;
  a.request =
      request_text(base, "POST", path_of(chat), good_body(state, chat, a.stream, 48).dump());
  return a;
}

// A long stream the client closes after 1-8 events.
SoakAction abort_mid_stream(uint64_t& state, const BaseUrl& base, bool chat_ok) {
  SoakAction a;
  a.kind = SoakKind::AbortMidStream;
  a.stream = true;
  const bool chat = uniform(state, 0, 1) == 1 && chat_ok;
  json body = good_body(state, chat, true, 128);
  body["max_tokens"] = uniform(state, 16, 128);
  body["ignore_eos"] = true;
  a.request = request_text(base, "POST", path_of(chat), body.dump());
  a.abort_after = uniform(state, 1, 8);
  return a;
}

// A request sent whole or cut anywhere (even mid-header), then the socket closed.
SoakAction disconnect_early(uint64_t& state, const BaseUrl& base, bool chat) {
  SoakAction a =
      good(state, base,
           uniform(state, 0, 1) ? SoakKind::CompletionStream : without_chat(SoakKind::Chat, chat));
  a.kind = SoakKind::DisconnectEarly;
  const int64_t size = int64_t(a.request.size());
  a.send_bytes = uniform(state, 0, 1) ? size : uniform(state, 1, size - 1);
  return a;
}

SoakAction bad(const BaseUrl& base, SoakKind kind, const std::string& method,
               const std::string& path, const std::string& body) {
  SoakAction a;
  a.kind = kind;
  a.request = request_text(base, method, path, body);
  return a;
}

SoakAction malformed_json(uint64_t& state, const BaseUrl& base) {
  static const char* const kBodies[] = {R"({"prompt": "hi", "max_tokens": 4)",
                                        R"({"prompt": "hi",})",
                                        "not json",
                                        "[1, 2, 3]",
                                        R"("a string")",
                                        "",
                                        "null",
                                        R"({"prompt": "a" "b"})",
                                        "{\"prompt\": \"\xff\xfe\"}",
                                        R"({"messages": [{"role": "user", "content": "hi"}]]})"};
  const bool chat = uniform(state, 0, 1) == 1;
  return bad(base, SoakKind::MalformedJson, "POST", path_of(chat), pick(state, kBodies));
}

SoakAction bad_field(uint64_t& state, const BaseUrl& base) {
  static const char* const kCompletion[] = {R"({"prompt": 5})",
                                            R"({"prompt": "hi", "max_tokens": -3})",
                                            R"({"prompt": "hi", "max_tokens": "ten"})",
                                            R"({"prompt": "hi", "temperature": -1})",
                                            R"({"prompt": "hi", "top_p": 2})",
                                            R"({"prompt": "hi", "n": 0})",
                                            R"({"prompt": "hi", "logprobs": 100})",
                                            R"({"prompt": "hi", "stop": 5})",
                                            R"({})",
                                            R"({"prompt": [99999999]})",
                                            R"({"prompt": "hi", "model": "no-such-model"})"};
  static const char* const kChat[] = {
      R"({"messages": "hi"})", R"({"messages": []})",
      R"({"messages": [{"role": "robot", "content": "x"}]})",
      R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 5})"};
  const bool chat = uniform(state, 0, 2) == 0;
  return bad(base, SoakKind::BadField, "POST", path_of(chat),
             chat ? pick(state, kChat) : pick(state, kCompletion));
}

SoakAction oversized_max_tokens(uint64_t& state, const BaseUrl& base) {
  const bool chat = uniform(state, 0, 1) == 1;
  json body = good_body(state, chat, uniform(state, 0, 1) == 1, 16);
  const char* field = chat && uniform(state, 0, 1) ? "max_completion_tokens" : "max_tokens";
  body[field] = uniform(state, 1'000'000, 1'000'000'000);
  return bad(base, SoakKind::OversizedMaxTokens, "POST", path_of(chat), body.dump());
}

SoakAction unknown_route(uint64_t& state, const BaseUrl& base) {
  static const std::pair<const char*, const char*> kRoutes[] = {{"GET", "/v1/nope"},
                                                                {"POST", "/v2/completions"},
                                                                {"GET", "/v1/completions"},
                                                                {"DELETE", "/v1/chat/completions"},
                                                                {"PUT", "/health"},
                                                                {"GET", "/../etc/passwd"},
                                                                {"POST", "/v1/completions/x"},
                                                                {"POST", "/metrics"}};
  const auto& [method, path] = pick(state, kRoutes);
  return bad(base, SoakKind::UnknownRoute, method, path, R"({"prompt": "hi"})");
}

// Random bytes, or an HTTP-shaped message broken at the protocol level (bad Content-Length,
// chunk size or header line, a 100 KB header), each ending the header block so the server
// never waits for more.
SoakAction garbage(uint64_t& state, const BaseUrl& base) {
  SoakAction a;
  a.kind = SoakKind::Garbage;
  static const char* const kBroken[] = {
      "GET /health HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "GET /health HTTP/1.1\r\nno colon here\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: "
      "9\r\n\r\n{}",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
      "GET\r\n\r\n",
      "\x01\x02\x03 / HTTP/1.1\r\n\r\n"};
  const int64_t shape = uniform(state, 0, 2);
  if (shape == 0) {
    for (int64_t n = uniform(state, 1, 512); n > 0; --n) a.request += char(uniform(state, 0, 255));
    a.request[0] = char(uniform(state, 1, 31));  // a control byte: never a method's first
    a.request += "\r\n\r\n";
  } else if (shape == 1) {
    a.request = pick(state, kBroken);
  } else {
    a.request = "GET /health HTTP/1.1\r\nX-Big: " + std::string(100'000, 'a') + "\r\n\r\n";
  }
  return a;
}

// A request line and headers sent 16 bytes at a time, 20-80 ms apart, and never finished
// (at most the header lines; never the blank line that ends them).
SoakAction slow_headers(uint64_t& state, const BaseUrl& base) {
  SoakAction a;
  a.kind = SoakKind::SlowHeaders;
  a.request = "POST " + base.path_prefix + "/v1/completions HTTP/1.1\r\nHost: " + base.host +
              "\r\nContent-Type: application/json\r\nX-Slow-A: 1\r\nX-Slow-B: 2\r\n";
  a.send_bytes = uniform(state, 1, int64_t(a.request.size()));
  a.pause_ms = uniform(state, 20, 80);
  return a;
}

}  // namespace

const char* soak_kind_name(SoakKind kind) {
  static const char* const kNames[kSoakKinds] = {
      "completion",           "completion stream", "chat",           "chat stream",
      "abort mid-stream",     "disconnect early",  "malformed JSON", "bad field",
      "oversized max_tokens", "unknown route",     "garbage bytes",  "slow partial headers"};
  return kNames[int(kind)];
}

SoakExpect soak_expect(SoakKind kind) {
  if (soak_counts_tokens(kind)) return SoakExpect::Ok;
  if (kind == SoakKind::AbortMidStream || kind == SoakKind::DisconnectEarly)
    return SoakExpect::ClientLeaves;
  return SoakExpect::Reject;
}

SoakAction draw_good_action_of(SoakKind kind, uint64_t& state, const BaseUrl& base) {
  return good(state, base, kind);
}

SoakAction draw_good_action(uint64_t& state, const BaseUrl& base, bool chat) {
  return good(state, base, without_chat(SoakKind(uniform(state, 0, 3)), chat));
}

SoakAction draw_soak_action(uint64_t& state, const BaseUrl& base, bool chat) {
  int64_t x = uniform(state, 0, 99);
  int k = 0;
  while (x >= kWeights[size_t(k)]) x -= kWeights[size_t(k++)];
  switch (SoakKind(k)) {
    case SoakKind::AbortMidStream:
      return abort_mid_stream(state, base, chat);
    case SoakKind::DisconnectEarly:
      return disconnect_early(state, base, chat);
    case SoakKind::MalformedJson:
      return malformed_json(state, base);
    case SoakKind::BadField:
      return bad_field(state, base);
    case SoakKind::OversizedMaxTokens:
      return oversized_max_tokens(state, base);
    case SoakKind::UnknownRoute:
      return unknown_route(state, base);
    case SoakKind::Garbage:
      return garbage(state, base);
    case SoakKind::SlowHeaders:
      return slow_headers(state, base);
    default:
      return good(state, base, without_chat(SoakKind(k), chat));
  }
}

}  // namespace troupe::bench
