// A blocking client of the TCP API (net/tcp, docs/serve.md "TCP API") for end-to-end
// tests over real sockets: frames out and in, a submit builder, and a reader that collects
// each request's text until its done frame.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "net/http_test_client.h"
#include "net/tcp/frame.h"

namespace troupe::testing {

class TcpClient {
 public:
  explicit TcpClient(uint16_t port, int receive_buffer = 0)
      : fd_(connect_to(port, receive_buffer)) {
    timeval tv{30, 0};  // a reply that never comes fails the test instead of hanging it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~TcpClient() { close_now(); }
  TcpClient(const TcpClient&) = delete;
  TcpClient& operator=(const TcpClient&) = delete;
  bool ok() const { return fd_ >= 0; }
  bool send_raw(const std::string& bytes) { return send_all(fd_, bytes); }
  bool send(const nlohmann::json& m) { return send_raw(net::tcp::encode_frame(m)); }
  void close_now() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // Whether something (a frame, or the end of the connection) arrives within `ms`.
  bool readable(int ms) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  }
  // The next message; nullopt when the connection closed (or timed out).
  std::optional<nlohmann::json> read() {
    std::string header(net::tcp::kFrameHeaderBytes, '\0');
    if (!read_exact(header)) return std::nullopt;
    std::string payload(net::tcp::frame_length(reinterpret_cast<const unsigned char*>(header.data())), '\0');
    if (!read_exact(payload)) return std::nullopt;
    net::tcp::FrameDecode d = net::tcp::decode_payload(payload);
    EXPECT_TRUE(d.message) << d.error;
    return d.message;
  }

 private:
  bool read_exact(std::string& buf) {
    for (size_t off = 0; off < buf.size();) {
      const ssize_t n = recv(fd_, buf.data() + off, buf.size() - off, 0);
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }
  int fd_;
};

// What one request produced: its text, token ids and done frame.
struct TcpResult {
  std::string text;
  std::vector<int32_t> tokens;
  nlohmann::json done;
  int frames = 0;
};

inline nlohmann::json submit(const nlohmann::json& id, const std::string& prompt, int max_tokens,
                             const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json m = {{"type", "submit"}, {"id", id}, {"prompt", prompt}, {"max_tokens", max_tokens},
                      {"temperature", 0}, {"ignore_eos", true}};
  m.update(extra);
  return m;
}

// Reads until every id in `results` (keyed by the id's JSON dump) has its done frame;
// fails on anything else.
inline void read_until_done(TcpClient& c, std::map<std::string, TcpResult>& results) {
  size_t done = 0;
  while (done < results.size()) {
    const std::optional<nlohmann::json> m = c.read();
    ASSERT_TRUE(m) << "connection closed early";
    const std::string key = (*m)["id"].dump();
    ASSERT_TRUE(results.count(key)) << m->dump();
    TcpResult& r = results[key];
    if ((*m)["type"] == "tokens") {
      EXPECT_TRUE(r.done.is_null()) << "tokens after done";
      r.text += (*m)["text"].get<std::string>();
      for (const nlohmann::json& t : (*m)["tokens"]) r.tokens.push_back(t.get<int32_t>());
      r.frames += 1;
    } else {
      ASSERT_EQ((*m)["type"], "done") << m->dump();
      r.done = *m;
      done += 1;
    }
  }
}

// The bound TCP port from the daemon's "listening on tcp://HOST:PORT" line; 0 if none.
inline uint16_t tcp_port_of(Daemon& d) {
  std::smatch m;
  const std::string out = d.output();
  return std::regex_search(out, m, std::regex(R"(listening on tcp://[^:\s]+:(\d+))")) ? uint16_t(std::stoi(m[1])) : 0;
}

}  // namespace troupe::testing
