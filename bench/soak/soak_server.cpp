#include "bench/soak/soak_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <fstream>
#include <regex>
#include <sstream>

#include "bench/common/stats.h"
#include "kernels/check.h"

namespace troupe::bench {
namespace {

constexpr size_t kHeadBytes = 8 << 10, kTailBytes = 16 << 10;
constexpr double kListenDeadlineS = 60, kReadyDeadlineS = 600, kStopDeadlineS = 90;

void pause_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) TROUPE_FAIL("cannot find this program's path (/proc/self/exe)");
  return std::string(buf, size_t(n));
}

// fork + exec with stdout and stderr on `out_fd`; the child dies with this process
// (PR_SET_PDEATHSIG), so a bench that crashes leaves no daemon behind.
pid_t spawn(const std::vector<std::string>& args, int out_fd) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

std::unique_ptr<SoakServer> SoakServer::start(const std::vector<std::string>& serve_args) {
  std::unique_ptr<SoakServer> s(new SoakServer);
  std::vector<std::string> args = {self_exe(), "serve", "--host",     "127.0.0.1",
                                   "--port",   "0",     "--tcp-port", "0"};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  for (const std::string& a : args) s->command_ += (s->command_.empty() ? "" : " ") + a;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) TROUPE_FAIL("cannot make a pipe for troupe serve");
  s->own_ = true;
  s->pid_ = spawn(args, fds[1]);
  close(fds[1]);
  if (s->pid_ < 0) {
    close(fds[0]);
    TROUPE_FAIL("cannot start " << s->command_);
  }
  // Drains the child's output for its whole life (a full pipe would block its logging).
  s->reader_ = std::thread([srv = s.get(), fd = fds[0]] {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
      std::lock_guard lock(srv->mutex_);
      if (srv->head_.size() < kHeadBytes) srv->head_.append(buf, size_t(n));
      srv->tail_.append(buf, size_t(n));
      if (srv->tail_.size() > 2 * kTailBytes) srv->tail_.erase(0, srv->tail_.size() - kTailBytes);
    }
    close(fd);
  });
  s->base_ = {"127.0.0.1", s->wait_for_port(kListenDeadlineS), ""};
  for (const double until = now_seconds() + kReadyDeadlineS; now_seconds() < until; pause_ms(50)) {
    if (http_request(s->base_, "GET", "/health", "").status == 200) return s;
    if (!s->alive()) break;
  }
  TROUPE_FAIL("troupe serve did not get ready (" << s->command_ << "); its output:\n"
                                                 << s->output_tail());
}

uint16_t SoakServer::wait_for_port(double deadline_s) {
  static const std::regex re(R"(listening on http://[^:\s]+:(\d+))");
  for (const double until = now_seconds() + deadline_s; now_seconds() < until; pause_ms(20)) {
    {
      std::lock_guard lock(mutex_);
      std::smatch m;
      if (std::regex_search(head_, m, re)) return uint16_t(std::stoi(m[1]));
    }
    if (!alive()) break;
  }
  TROUPE_FAIL("troupe serve printed no 'listening on http://' line (" << command_
                                                                      << "); its output:\n"
                                                                      << output_tail());
}

std::unique_ptr<SoakServer> SoakServer::attach(const BaseUrl& base, pid_t pid) {
  std::unique_ptr<SoakServer> s(new SoakServer);
  s->base_ = base;
  s->pid_ = pid;
  s->command_ = "pid " + std::to_string(pid);
  if (!s->alive()) TROUPE_FAIL("--server-pid " << pid << " is not a running process");
  const HttpResult h = http_request(base, "GET", "/health", "");
  if (h.status != 200)
    TROUPE_FAIL("--base-url http://" << base.host << ":" << base.port << base.path_prefix
                                     << " is not ready: GET /health gave "
                                     << (h.status ? "HTTP " + std::to_string(h.status) : h.error));
  return s;
}

SoakServer::~SoakServer() {
  if (own_ && !reap(false)) {
    kill(pid_, SIGKILL);
    reap(true);
  }
  if (reader_.joinable()) reader_.join();
}

bool SoakServer::reap(bool block) {
  std::lock_guard lock(mutex_);
  if (exited_) return true;
  int status = 0;
  if (waitpid(pid_, &status, block ? 0 : WNOHANG) != pid_) return false;
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return true;
}

bool SoakServer::alive() {
  if (own_) return !reap(false);
  // Not our child: it exists and is not a zombie ("State:\tZ").
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("State:", 0) == 0) return line.find('Z') == std::string::npos;
  return false;
}

int64_t SoakServer::rss_kib() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));  // "VmRSS:  123 kB"
  return -1;
}

int SoakServer::stop() {
  if (!own_) return 0;
  if (!reap(false)) kill(pid_, SIGTERM);
  for (const double until = now_seconds() + kStopDeadlineS; now_seconds() < until; pause_ms(20))
    if (reap(false)) break;
  std::lock_guard lock(mutex_);
  return exited_ ? exit_code_ : -1;
}

std::string SoakServer::output_tail() {
  std::lock_guard lock(mutex_);
  if (tail_.size() <= kTailBytes) return tail_;
  return "..." + tail_.substr(tail_.size() - kTailBytes);
}

std::optional<double> metric_value(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != '{' && next != ' ') continue;  // another metric with this prefix
    try {
      return std::stod(line.substr(line.rfind(' ') + 1));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

ServerIdleState wait_idle(const BaseUrl& base, double deadline_s) {
  ServerIdleState s;
  for (const double until = now_seconds() + deadline_s;; pause_ms(50)) {
    const HttpResult r = http_request(base, "GET", "/metrics", "");
    const auto running = metric_value(r.body, "troupe:num_requests_running");
    const auto waiting = metric_value(r.body, "troupe:num_requests_waiting");
    const auto blocks = metric_value(r.body, "troupe:kv_cache_used_blocks");
    s.answered = r.status == 200 && running && waiting && blocks;
    if (s.answered) {
      s.running = *running;
      s.waiting = *waiting;
      s.used_blocks = *blocks;
      if (s.running == 0 && s.waiting == 0 && s.used_blocks == 0) return s;
    }
    if (now_seconds() >= until) return s;
  }
}

}  // namespace troupe::bench
