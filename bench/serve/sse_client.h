// A small blocking HTTP/1.1 client for `troupe bench serve`: plain POSIX sockets, one
// request per connection (Connection: close), chunked bodies decoded as they arrive and
// server-sent events handed to a callback the moment their frame is complete, so the
// caller can time each token. Only http:// URLs (the benchmark talks to a local or
// trusted daemon; TLS would pull in a library for no measured gain).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace troupe::bench {

struct BaseUrl {
  std::string host;  // a name or dotted address
  uint16_t port = 80;
  std::string path_prefix;  // "" or "/something" (no trailing slash)
};

// "http://HOST[:PORT][/PREFIX]"; throws troupe::Error naming --base-url otherwise.
BaseUrl parse_base_url(const std::string& url);

struct HttpResult {
  int status = 0;     // 0: no response (connect or read failed; see error)
  std::string error;  // why there is no response
  std::string body;   // the de-chunked body when it was not an event stream
  bool connected = false;  // the TCP connection was made
  bool stopped = false;    // the event callback asked to stop: the client closed early
  bool timed_out = false;  // a read waited longer than the exchange's timeout
};

// A connected TCP socket, or -1 with `error` set.
int connect_to(const BaseUrl& base, std::string& error);
// Writes all of `data` (no SIGPIPE); false when the peer is gone.
bool send_all(int fd, const std::string& data);

// The bytes of one request: `method base.path_prefix+path`, Connection: close, the JSON
// body with its Content-Length.
std::string request_text(const BaseUrl& base, const std::string& method, const std::string& path,
                         const std::string& json_body);

// Called with every "data: X" payload of an event stream; false closes the connection
// (a client abort) and ends the exchange.
using EventHandler = std::function<bool(const std::string&)>;

// Sends `request` as it is (well-formed or not) on a new connection and reads the answer
// to EOF. recv_timeout_s > 0 bounds each read (then timed_out is set); 0 waits forever.
HttpResult http_exchange(const BaseUrl& base, const std::string& request,
                         const EventHandler& on_event, double recv_timeout_s = 0);

// Sends one request; for a text/event-stream answer calls on_event(payload) for every
// "data: X" frame in order (and keeps nothing), else collects the body.
HttpResult http_request(const BaseUrl& base, const std::string& method, const std::string& path,
                        const std::string& json_body,
                        const std::function<void(const std::string&)>& on_event = {});

}  // namespace troupe::bench
