#include "bench/soak/soak_actions.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

namespace troupe::bench {
namespace {

using nlohmann::json;

SoakOutcome unexpected(std::string answer, std::string detail) {
  return {SoakClass::Unexpected, std::move(answer), 0, std::move(detail)};
}

// The answer column for an exchange that did not end in a status line.
std::string no_status(const HttpResult& r) {
  if (!r.connected) return "connect failed";
  return r.timed_out ? "timeout" : "closed";
}

// What a stream's events said: every payload JSON or the final [DONE], no error event.
struct StreamCheck {
  int64_t events = 0;
  bool done = false;  // [DONE] seen (nothing may follow it)
  std::string problem;
  int64_t output_tokens = -1;  // from the usage chunk

  bool on_event(const std::string& payload) {
    ++events;
    if (done && problem.empty()) problem = "an event after [DONE]";
    if (payload == "[DONE]") {
      done = true;
      return true;
    }
    const json e = json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (e.is_discarded() || !e.is_object()) {
      if (problem.empty()) problem = "bad event: " + payload.substr(0, 200);
    } else if (e.contains("error")) {
      if (problem.empty()) problem = "error event: " + e["error"].dump().substr(0, 200);
    } else if (e.contains("usage") && e["usage"].is_object()) {
      output_tokens = e["usage"].value("completion_tokens", int64_t(-1));
    }
    return true;
  }
};

// The failures good and aborted requests share: no answer, not 200, a stall, a bad event.
std::optional<SoakOutcome> failed(const HttpResult& r, const StreamCheck& s) {
  if (r.status == 0) return unexpected(no_status(r), r.error);
  const std::string status = std::to_string(r.status);
  if (r.status != 200) return unexpected(status, "HTTP " + status + ": " + r.body.substr(0, 300));
  if (r.timed_out)
    return unexpected("timeout",
                      "the answer stalled after " + std::to_string(s.events) + " events");
  if (!s.problem.empty()) return unexpected(status + " bad stream", s.problem);
  return std::nullopt;
}

// A good request: 200, then a JSON body with choices and usage, or a whole stream.
SoakOutcome good(const BaseUrl& base, const SoakAction& a) {
  StreamCheck s;
  const HttpResult r = http_exchange(
      base, a.request, [&](const std::string& p) { return s.on_event(p); }, kSoakReadTimeoutS);
  if (auto f = failed(r, s)) return *f;
  if (a.stream) {
    if (!s.done) return unexpected("200 cut stream", "the stream ended without [DONE]");
    if (s.output_tokens < 0) return unexpected("200 bad stream", "no usage chunk in the stream");
    return {SoakClass::Served, "200", s.output_tokens, ""};
  }
  const json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  const bool ok = body.is_object() && body.contains("choices") && body["choices"].is_array() &&
                  !body["choices"].empty() && body.contains("usage") && body["usage"].is_object();
  if (!ok) return unexpected("200 bad body", "no choices and usage in: " + r.body.substr(0, 300));
  return {SoakClass::Served, "200", body["usage"].value("completion_tokens", int64_t(0)), ""};
}

// A stream the client closes after a.abort_after events (or that ends first).
SoakOutcome abort_mid_stream(const BaseUrl& base, const SoakAction& a) {
  StreamCheck s;
  const HttpResult r = http_exchange(
      base, a.request,
      [&](const std::string& p) { return s.on_event(p) && s.events < a.abort_after; },
      kSoakReadTimeoutS);
  if (auto f = failed(r, s)) return *f;
  if (!r.stopped && !s.done) return unexpected("200 cut stream", "the stream ended without [DONE]");
  return {SoakClass::Served, "200", 0, ""};
}

// Sends the first a.send_bytes bytes and closes: nothing to judge but the connection.
SoakOutcome disconnect_early(const BaseUrl& base, const SoakAction& a) {
  std::string error;
  const int fd = connect_to(base, error);
  if (fd < 0) return unexpected("connect failed", error);
  send_all(fd, a.request.substr(0, size_t(a.send_bytes)));  // the server may close first
  close(fd);
  return {SoakClass::Served, "client left", 0, ""};
}

// Trickles the header bytes in, then gives up; an answer the server sent meanwhile
// (408, 431, a close) is judged like any bad request's.
SoakOutcome slow_headers(const BaseUrl& base, const SoakAction& a) {
  std::string error;
  const int fd = connect_to(base, error);
  if (fd < 0) return unexpected("connect failed", error);
  bool closed = false;
  for (size_t off = 0; off < size_t(a.send_bytes) && !closed; off += 16) {
    closed = !send_all(fd, a.request.substr(off, std::min<size_t>(16, size_t(a.send_bytes) - off)));
    std::this_thread::sleep_for(std::chrono::milliseconds(a.pause_ms));
  }
  char buf[64] = {};
  const ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
  close(fd);
  const std::string head(buf, n > 0 ? size_t(n) : 0);
  if (head.empty())
    return {SoakClass::ExpectedError, closed || n == 0 ? "closed" : "client gave up", 0, ""};
  const int status =
      head.rfind("HTTP/1.", 0) == 0 && head.size() > 12 ? std::atoi(head.c_str() + 9) : 0;
  if (status >= 400 && status < 500)
    return {SoakClass::ExpectedError, std::to_string(status), 0, ""};
  return unexpected(status ? std::to_string(status) : "garbage",
                    "an answer to unfinished headers: " + head);
}

// A bad request: any 4xx; for garbage bytes a close without an answer is also fine (the
// peer did not speak HTTP).
SoakOutcome bad(const BaseUrl& base, const SoakAction& a) {
  const HttpResult r = http_exchange(base, a.request, nullptr, kSoakReadTimeoutS);
  if (r.status >= 400 && r.status < 500)
    return {SoakClass::ExpectedError, std::to_string(r.status), 0, ""};
  if (r.status == 0 && r.connected && !r.timed_out && a.kind == SoakKind::Garbage)
    return {SoakClass::ExpectedError, "closed", 0, ""};
  if (r.status == 0) return unexpected(no_status(r), r.error);
  const std::string status = std::to_string(r.status);
  return unexpected(status, "HTTP " + status + " to a bad request: " + r.body.substr(0, 300));
}

}  // namespace

SoakOutcome run_soak_action(const BaseUrl& base, const SoakAction& a) {
  try {
    switch (soak_expect(a.kind)) {
      case SoakExpect::Ok:
        return good(base, a);
      case SoakExpect::ClientLeaves:
        return a.kind == SoakKind::AbortMidStream ? abort_mid_stream(base, a)
                                                  : disconnect_early(base, a);
      case SoakExpect::Reject:
        return a.kind == SoakKind::SlowHeaders ? slow_headers(base, a) : bad(base, a);
    }
  } catch (const std::exception& e) {  // e.g. a chunk size the client cannot parse
    return unexpected("unreadable",
                      std::string("the client could not read the answer: ") + e.what());
  }
  return unexpected("?", "unknown kind");
}

}  // namespace troupe::bench
