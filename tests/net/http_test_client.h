// A plain-socket HTTP/1.1 client for end-to-end tests of `troupe serve`: one request per
// connection (Connection: close), the response read to EOF, chunked bodies decoded. Also
// starts the daemon binary and reads the port it prints.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>
#include "support/test_paths.h"

extern char** environ;

namespace troupe::testing {

struct HttpResponse {
  int status = 0;                             // 0: no response
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                           // de-chunked
};

// A connected socket to 127.0.0.1:port, or -1. A receive_buffer (bytes) set before the
// connect keeps the window small: a client that does not read then holds little in the
// kernel, and the server's own queue fills.
inline int connect_to(uint16_t port, int receive_buffer = 0, const char* ip = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip, &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Polls `done` every 10 ms for up to `seconds`.
template <class F>
bool eventually(F&& done, int seconds = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

inline bool send_all(int fd, const std::string& data) {
  for (size_t off = 0; off < data.size();) {
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

inline std::string request_text(const std::string& method, const std::string& path,
                                const std::string& body, const std::string& extra_headers = {}) {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

inline std::string dechunk(const std::string& raw) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t size = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    if (size == 0) break;
    out += raw.substr(eol + 2, size);
    pos = eol + 2 + size + 2;
  }
  return out;
}

inline HttpResponse parse_response(const std::string& raw) {
  HttpResponse r;
  const size_t end = raw.find("\r\n\r\n");
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || end == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  for (size_t pos = raw.find("\r\n") + 2; pos < end;) {
    const size_t eol = raw.find("\r\n", pos);
    const std::string line = raw.substr(pos, eol - pos);
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    pos = eol + 2;
  }
  r.body = raw.substr(end + 4);
  if (r.headers["transfer-encoding"] == "chunked") r.body = dechunk(r.body);
  return r;
}

inline std::string read_to_eof(int fd) {
  std::string raw;
  char buf[8192];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, size_t(n));
  return raw;
}

// One request to ip:port (another network namespace's address: the two-node test).
inline HttpResponse http_at(const char* ip, uint16_t port, const std::string& method,
                            const std::string& path, const std::string& body = {},
                            const std::string& extra_headers = {}) {
  const int fd = connect_to(port, 0, ip);
  if (fd < 0) return {};
  send_all(fd, request_text(method, path, body, extra_headers));
  const std::string raw = read_to_eof(fd);
  close(fd);
  return parse_response(raw);
}

inline HttpResponse http(uint16_t port, const std::string& method, const std::string& path,
                         const std::string& body = {}, const std::string& extra_headers = {}) {
  return http_at("127.0.0.1", port, method, path, body, extra_headers);
}

// The payloads of a server-sent event stream ("data: X\n\n" -> X), in order.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < body.size();) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string ev = body.substr(pos, end - pos);
    out.push_back(ev.rfind("data: ", 0) == 0 ? ev.substr(6) : "<bad frame>" + ev);
    pos = end + 2;
  }
  return out;
}

// The troupe binary running `serve`, its stdout + stderr collected by a thread.
class Daemon {
 public:
  // wrapper: a command line that runs the binary in turn, exec'ing it (so pid() is the
  // daemon's): `ip netns exec NS env VAR=...` for the two-node test.
  explicit Daemon(const std::vector<std::string>& args, const std::vector<std::string>& wrapper = {}) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    std::vector<std::string> all = wrapper;
    all.push_back(TROUPE_BINARY);
    all.push_back("serve");
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, all.front().c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
        std::lock_guard lock(mutex_);
        out_.append(buf, size_t(n));
        cv_.notify_all();
      }
      close(fd);
    });
  }
  ~Daemon() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
  }

  // The port of its "listening on http://HOST:PORT" line; 0 if none within the deadline.
  uint16_t port(std::chrono::seconds deadline = std::chrono::seconds(30)) {
    static const std::regex re(R"(listening on http://[^:\s]+:(\d+))");
    std::unique_lock lock(mutex_);
    std::smatch m;
    cv_.wait_for(lock, deadline, [&] { return std::regex_search(out_, m, re); });
    return m.empty() ? 0 : uint16_t(std::stoi(m[1]));
  }
  // Polls /health until 200 (true) or the deadline.
  bool wait_ready(uint16_t port, std::chrono::seconds deadline = std::chrono::seconds(60)) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
      if (http(port, "GET", "/health").status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // Sends `sig` and waits for the exit; the exit code, or -1 (killed or timed out).
  int stop(int sig, std::chrono::seconds deadline = std::chrono::seconds(60)) {
    kill(pid_, sig);
    return wait_exit(deadline);
  }
  // Waits for the exit (no signal); the exit code, or -1 (killed or still running at the
  // deadline, e.g. a daemon that should have refused to start). After an exit, output()
  // holds everything the daemon wrote.
  int wait_exit(std::chrono::seconds deadline) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    int status = 0;
    while (std::chrono::steady_clock::now() < until) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        if (reader_.joinable()) reader_.join();  // the pipe ends with the process
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  std::string output() {
    std::lock_guard lock(mutex_);
    return out_;
  }
  // Whether its output matches `re` within the deadline.
  bool wait_output(const std::string& re, std::chrono::seconds deadline = std::chrono::seconds(60)) {
    const std::regex pattern(re);
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, deadline, [&] { return std::regex_search(out_, pattern); });
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string out_;
};

// One daemon shared by the tests of a suite (starting one per test would only repeat
// the model load); Derived::daemon_args() gives its command line.
template <class Derived>
class DaemonSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon(Derived::daemon_args());
    port_ = daemon_->port();
    ASSERT_NE(port_, 0) << daemon_->output();
    ASSERT_TRUE(daemon_->wait_ready(port_)) << daemon_->output();
  }
  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_EQ(daemon_->stop(SIGTERM), 0) << daemon_->output();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  static HttpResponse post(const std::string& path, const std::string& body) {
    return http(port_, "POST", path, body);
  }

  static inline Daemon* daemon_ = nullptr;
  static inline uint16_t port_ = 0;  // HTTP
};

}  // namespace troupe::testing
