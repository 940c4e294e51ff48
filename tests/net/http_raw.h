// Raw-socket helpers for the hostile-client HTTP tests: send exact bytes, read one
// response off a kept-alive connection, see whether the server has answered yet. Every
// socket has a receive timeout, so a server that never answers fails a test instead of
// hanging the suite.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "net/http_test_client.h"

namespace troupe::testing {

// A connected socket whose reads give up after 30 s; -1 when it cannot connect.
inline int raw_connect(uint16_t port) {
  const int fd = connect_to(port);
  if (fd < 0) return fd;
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends `raw` (a whole request, or the start of one: a slow client), reads to EOF (the
// server closes), returns the bytes; "" when no connection.
inline std::string raw_exchange(uint16_t port, const std::string& raw) {
  const int fd = raw_connect(port);
  if (fd < 0) return {};
  send_all(fd, raw);
  std::string out = read_to_eof(fd);
  close(fd);
  return out;
}

// A GET or HEAD that keeps the connection open.
inline std::string keep_alive_request(const std::string& method, const std::string& path) {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
}

// One response read off a kept-alive connection: the head, then Content-Length bytes
// (none for a HEAD request), or a chunked body up to its last chunk. `pending` holds
// bytes read past it (the next response's start). status 0: the connection ended first.
inline HttpResponse read_response(int fd, std::string& pending, bool head_request = false) {
  auto fill = [&] {
    char buf[8192];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    pending.append(buf, size_t(n));
    return true;
  };
  size_t end;
  while ((end = pending.find("\r\n\r\n")) == std::string::npos)
    if (!fill()) return {};
  HttpResponse r = parse_response(pending.substr(0, end + 4));
  size_t body_end = end + 4;
  if (r.headers["transfer-encoding"] == "chunked") {
    size_t last;
    while ((last = pending.find("\r\n0\r\n\r\n", end)) == std::string::npos)
      if (!fill()) return {};
    body_end = last + 7;
    r.body = dechunk(pending.substr(end + 4, body_end - end - 4));
  } else if (!head_request && r.headers.count("content-length")) {
    body_end += std::stoul(r.headers["content-length"]);
    while (pending.size() < body_end)
      if (!fill()) return {};
    r.body = pending.substr(end + 4, body_end - end - 4);
  }
  pending.erase(0, body_end);
  return r;
}

// Whether the server has sent anything on fd yet (without waiting or consuming).
inline bool has_answered(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || n == 0;
}

}  // namespace troupe::testing
