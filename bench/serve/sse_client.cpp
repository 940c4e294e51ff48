#include "bench/serve/sse_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "kernels/check.h"

namespace troupe::bench {

int connect_to(const BaseUrl& base, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(base.host.c_str(), std::to_string(base.port).c_str(), &hints, &list);
  if (rc != 0) {
    error = "cannot resolve " + base.host + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = list; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(list);
  if (fd < 0) error = "cannot connect to " + base.host + ":" + std::to_string(base.port);
  return fd;
}

bool send_all(int fd, const std::string& data) {
  for (size_t off = 0; off < data.size();) {
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Turns the bytes after the header into body bytes as they arrive: passes them through,
// or removes the chunked framing ("SIZE\r\nDATA\r\n" ... "0\r\n\r\n").
class BodyDecoder {
 public:
  explicit BodyDecoder(bool chunked) : chunked_(chunked) {}
  // Appends the decodable part of `in` (plus what was held back before) to `out`.
  void feed(const std::string& in, std::string& out) {
    if (!chunked_) {
      out += in;
      return;
    }
    pending_ += in;
    for (;;) {
      if (left_ == 0) {
        const size_t eol = pending_.find("\r\n");
        if (eol == std::string::npos) return;
        const std::string line = pending_.substr(0, eol);
        pending_.erase(0, eol + 2);
        if (line.empty()) continue;  // the CRLF after a chunk's data
        left_ = std::stoul(line, nullptr, 16);
        if (left_ == 0) return;  // last chunk; trailers ignored
      }
      const size_t take = std::min(left_, pending_.size());
      out.append(pending_, 0, take);
      pending_.erase(0, take);
      left_ -= take;
      if (pending_.empty()) return;
    }
  }

 private:
  bool chunked_;
  size_t left_ = 0;  // data bytes still due in the current chunk
  std::string pending_;
};

// Calls on_event for every complete "data: X\n\n" frame at the front of `buf`; false
// when it asked to stop.
bool drain_events(std::string& buf, const EventHandler& on_event) {
  for (size_t end; (end = buf.find("\n\n")) != std::string::npos;) {
    const std::string frame = buf.substr(0, end);
    buf.erase(0, end + 2);
    if (frame.rfind("data: ", 0) == 0 && !on_event(frame.substr(6))) return false;
  }
  return true;
}

void set_recv_timeout(int fd, double seconds) {
  if (seconds <= 0) return;
  timeval tv{};
  tv.tv_sec = time_t(seconds);
  tv.tv_usec = suseconds_t((seconds - double(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

struct Head {
  int status = 0;
  bool chunked = false;
  bool event_stream = false;
};

Head parse_head(const std::string& head) {
  Head h;
  if (head.compare(0, 5, "HTTP/") == 0 && head.size() > 12) h.status = std::atoi(head.c_str() + 9);
  const std::string l = lower(head);
  h.chunked = l.find("transfer-encoding: chunked") != std::string::npos;
  h.event_stream = l.find("content-type: text/event-stream") != std::string::npos;
  return h;
}

}  // namespace

BaseUrl parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    TROUPE_FAIL("--base-url must start with http://, got '" << url << "'");
  BaseUrl b;
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    b.path_prefix = rest.substr(slash);
    rest.resize(slash);
    while (!b.path_prefix.empty() && b.path_prefix.back() == '/') b.path_prefix.pop_back();
  }
  const size_t colon = rest.rfind(':');
  b.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 &&
                        std::all_of(port.begin(), port.end(), [](char c) { return std::isdigit(c); });
    if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535)
      TROUPE_FAIL("--base-url has a bad port '" << port << "' in '" << url << "'");
    b.port = uint16_t(std::stoi(port));
  }
  if (b.host.empty()) TROUPE_FAIL("--base-url has no host: '" << url << "'");
  return b;
}

std::string request_text(const BaseUrl& base, const std::string& method, const std::string& path,
                         const std::string& json_body) {
  return method + " " + base.path_prefix + path + " HTTP/1.1\r\nHost: " + base.host +
         "\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(json_body.size()) + "\r\n\r\n" + json_body;
}

HttpResult http_exchange(const BaseUrl& base, const std::string& request,
                         const EventHandler& on_event, double recv_timeout_s) {
  HttpResult r;
  const int fd = connect_to(base, r.error);
  if (fd < 0) return r;
  r.connected = true;
  set_recv_timeout(fd, recv_timeout_s);
  if (!send_all(fd, request)) {
    close(fd);
    r.error = "cannot send the request";
    return r;
  }
  std::string raw, events;
  Head head;
  BodyDecoder* decoder = nullptr;
  BodyDecoder holder(false);
  char buf[16384];
  ssize_t n = 0;
  while (!r.stopped && (n = recv(fd, buf, sizeof buf, 0)) > 0) {
    std::string in(buf, size_t(n));
    if (!decoder) {
      raw += in;
      const size_t end = raw.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      head = parse_head(raw.substr(0, end + 2));
      holder = BodyDecoder(head.chunked);
      decoder = &holder;
      in = raw.substr(end + 4);
    }
    std::string& sink = head.event_stream && on_event ? events : r.body;
    decoder->feed(in, sink);
    if (&sink == &events) r.stopped = !drain_events(events, on_event);
  }
  r.timed_out = !r.stopped && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  close(fd);
  r.status = head.status;
  if (r.status == 0)
    r.error = r.timed_out ? "timed out waiting for a response" : "no HTTP response";
  return r;
}

HttpResult http_request(const BaseUrl& base, const std::string& method, const std::string& path,
                        const std::string& json_body,
                        const std::function<void(const std::string&)>& on_event) {
  EventHandler handler;
  if (on_event)
    handler = [&](const std::string& payload) {
      on_event(payload);
      return true;
    };
  return http_exchange(base, request_text(base, method, path, json_body), handler);
}

}  // namespace troupe::bench
