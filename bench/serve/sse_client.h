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
};

// Sends one request; for a text/event-stream answer calls on_event(payload) for every
// "data: X" frame in order (and keeps nothing), else collects the body.
HttpResult http_request(const BaseUrl& base, const std::string& method, const std::string& path,
                        const std::string& json_body,
                        const std::function<void(const std::string&)>& on_event = {});

}  // namespace troupe::bench
