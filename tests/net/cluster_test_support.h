// What the cluster tests share (tests/net/serve_cluster*_test.cpp): free loopback ports,
// a completion body, a streamed completion read on its own thread, the router's /health.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/http_test_client.h"
#include "support/test_paths.h"

namespace troupe::testing {

using namespace std::chrono_literals;

// The `serve:` section of the test clusters: the tiny seed-7 model, a small KV cache.
inline std::string cluster_serve_section() {
  return std::string("serve:\n  model: ") + TROUPE_TEST_DATA + "/v41-tiny-seed7\n"
         "  max-model-len: 512\n"
         "  block-size: 16\n"
         "  kv-cache-memory-bytes: 16MiB\n"
         "  max-num-seqs: 8\n";
}

// n distinct ports no one listens on now, from just below the kernel's ephemeral range
// (ip_local_port_range), each held open until all are known, then closed. Not the OS's
// own picks: the daemons bind them a moment later, and meanwhile any process's bind to
// port 0 or outgoing connection (a daemon's HTTP port, UCX's sockets) may be handed the
// same ephemeral port; then a rank's control port was taken (ServeGgufRanks, 2 of ~50 runs).
inline std::vector<uint16_t> free_ports(int n) {
  int low = 32768, high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  const int span = std::min(low - 1024, 12000);  // below low, above the privileged ports
  std::mt19937 pick(std::random_device{}());
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (int tries = 0; int(ports.size()) < n && tries < 1000; ++tries) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // No room below the range (an unusual one): the OS's pick, as a last resort.
    a.sin_port = span > 0 ? htons(uint16_t(low - 1 - int(pick() % uint32_t(span)))) : 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd);
      continue;
    }
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (const int fd : fds) close(fd);
  return ports;
}

inline nlohmann::json completion(const std::vector<int32_t>& prompt, int max_tokens, bool stream) {
  return nlohmann::json{{"model", "v41-tiny-seed7"}, {"prompt", prompt}, {"max_tokens", max_tokens},
          {"temperature", 0},          {"ignore_eos", true}, {"return_token_ids", true},
          {"stream", stream}};
}

// A streamed completion read on its own thread; first_event() waits for its first event.
class Stream {
 public:
  Stream(uint16_t port, const nlohmann::json& body) {
    fd_ = connect_to(port);
    send_all(fd_, request_text("POST", "/v1/completions", body.dump()));
    reader_ = std::thread([this] {
      char buf[4096];
      for (ssize_t n; (n = recv(fd_, buf, sizeof buf, 0)) > 0;) {
        std::lock_guard lock(mutex_);
        raw_.append(buf, size_t(n));
        cv_.notify_all();
      }
      std::lock_guard lock(mutex_);
      done_ = true;
      cv_.notify_all();
    });
  }
  ~Stream() {
    if (reader_.joinable()) reader_.join();
    close(fd_);
  }
  bool first_event(std::chrono::seconds deadline = 30s) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, deadline, [&] { return raw_.find("data: ") != std::string::npos; });
  }
  // Whether at least n events (SSE "data: " lines) came within the deadline.
  bool wait_events(size_t n, std::chrono::seconds deadline = 30s) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, deadline, [&] {
      size_t seen = 0;
      for (size_t at = raw_.find("data: "); at != std::string::npos; at = raw_.find("data: ", at + 1))
        ++seen;
      return seen >= n || done_;
    });
  }
  // The SSE payloads once the response ended.
  std::vector<std::string> events() {
    reader_.join();
    return sse_payloads(parse_response(raw_).body);
  }

 private:
  int fd_ = -1;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string raw_;
  bool done_ = false;
};

// "0 of 2" style: the /health message when ranks are missing.
inline std::string health_message(uint16_t port) {
  const HttpResponse r = http(port, "GET", "/health");
  if (r.status == 200) return "ok";
  try {
    return nlohmann::json::parse(r.body)["error"]["message"].get<std::string>();
  } catch (const std::exception&) {
    return "status " + std::to_string(r.status) + ": " + r.body;
  }
}

inline bool wait_health(uint16_t port, const std::string& needle, std::chrono::seconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (health_message(port).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// The SSE events' token ids, in order, and the error event if one came.
struct StreamOutcome {
  std::vector<int32_t> tokens;
  std::string error;
  bool done = false;  // ended with [DONE]
};

inline StreamOutcome stream_outcome(const std::vector<std::string>& events) {
  StreamOutcome out;
  for (const std::string& e : events) {
    if (e == "[DONE]") {
      out.done = true;
      continue;
    }
    if (e.find("\"error\"") != std::string::npos) {
      out.error = e;
      continue;
    }
    const nlohmann::json chunk = nlohmann::json::parse(e);  // named: the loop reads into it
    for (const auto& t : chunk["choices"][0]["token_ids"]) out.tokens.push_back(t.get<int32_t>());
  }
  return out;
}

}  // namespace troupe::testing
