// The control port's security (issue 11, docs/cluster.md "Security"), with real
// `troupe serve --config FILE --node NAME` processes on loopback:
// - a node started with another cluster secret never joins: both ends log the refused
//   handshake naming the peer and the cause, /health keeps naming it as missing, and the
//   same node restarted with the right secret joins and serves the plain Engine's tokens;
// - on a secured port, bytes that are not this cluster's TLS never get past the handshake
//   and never crash the node: random bytes, and a real client session (another process
//   holding the secret) recorded through a proxy and replayed whole and with random
//   damage (flipped bytes, cuts, runs of 0xff, garbage in front); the node is alive and
//   answers a well-formed request afterwards.
// (A plain port, without a secret, is open to whoever reaches it: docs/cluster.md
// "Security" says what a stranger can do there.)
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "actors/control_plane.h"
#include "actors/engine_actors.h"
#include "model/temp_dir.h"
#include "net/cluster_test_support.h"
#include "net/control/cluster_tls.h"
#include "net/http_test_client.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A router and one engine node; `secret` empty: no secret (plain TCP, one host).
std::string one_engine_yaml(uint16_t router, uint16_t rank0, const std::string& secret) {
  return (secret.empty() ? std::string() : "cluster-secret: " + secret + "\n") +
         "nodes:\n"
         "  - {name: router, host: 127.0.0.1, port: " + std::to_string(router) + "}\n"
         "  - {name: rank0, host: 127.0.0.1, port: " + std::to_string(rank0) + "}\n"
         "router: {node: router, http-port: 0, tcp-port: 0}\n"
         "instances:\n"
         "  - {name: one, ranks: [rank0], enable-expert-parallel: false, threads: 1}\n" +
         cluster_serve_section();
}

std::string fingerprint_in(const std::string& output) {
  static const std::regex re(R"(key fingerprint ([0-9a-f]{16}))");
  std::smatch m;
  return std::regex_search(output, m, re) ? m[1].str() : "";
}

int dial(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `bytes` on a fresh connection, then reads what comes back for up to `wait` (the
// node may answer, close, or say nothing) and closes.
void send_and_drop(uint16_t port, const std::string& bytes, std::chrono::milliseconds wait) {
  const int fd = dial(port);
  if (fd < 0) return;
  (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  const auto until = std::chrono::steady_clock::now() + wait;
  char buf[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5) > 0 && recv(fd, buf, sizeof buf, 0) <= 0) break;
  }
  close(fd);
}

// A one-connection TCP proxy in front of `target` that keeps what the client sent.
class RecordingProxy {
 public:
  explicit RecordingProxy(uint16_t target) : target_(target) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listener_, 1);
    socklen_t len = sizeof a;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    pump_ = std::thread([this] { run(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    pump_.join();
    close(listener_);
  }
  uint16_t port() const { return port_; }
  // What the client sent so far.
  std::string sent() {
    std::lock_guard lock(mutex_);
    return sent_;
  }

 private:
  void run() {
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = dial(target_);
    char buf[65536];
    while (!stop_ && server >= 0) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (poll(p, 2, 20) <= 0) continue;
      if (p[0].revents) {
        const ssize_t n = recv(client, buf, sizeof buf, 0);
        if (n <= 0) break;
        {
          std::lock_guard lock(mutex_);
          sent_.append(buf, size_t(n));
        }
        (void)!send(server, buf, size_t(n), MSG_NOSIGNAL);
      }
      if (p[1].revents) {
        const ssize_t n = recv(server, buf, sizeof buf, 0);
        if (n <= 0) break;
        (void)!send(client, buf, size_t(n), MSG_NOSIGNAL);
      }
    }
    if (server >= 0) close(server);
    close(client);
  }

  uint16_t target_, port_ = 0;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::thread pump_;
  std::mutex mutex_;
  std::string sent_;
};

// Asks the engine published at `port` for its figures, through this process's own actor
// system (over TLS when it loaded the openssl manager): true when it answers.
bool engine_answers(caf::actor_system& sys, uint16_t port) {
  auto engine = actors::dial_control<actors::scheduler_actor>(sys, "127.0.0.1", port);
  if (!engine) return false;
  bool answered = false;
  caf::scoped_actor self{sys};
  self->request(*engine, std::chrono::seconds(5), actors::stats_atom::value)
      .receive([&](const runtime::EngineFigures&) { answered = true; }, [](const caf::error&) {});
  return answered;
}

bool alive(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == 0;
}

// One damaged copy of `session`: random flips, a cut, runs of 0xff (huge length and
// count fields wherever they land), or garbage in front.
std::string damaged(const std::string& session, std::mt19937& rng) {
  std::string s = session;
  std::uniform_int_distribution<size_t> at(0, s.size() - 1);
  switch (rng() % 4) {
    case 0:
      for (int i = 0, n = 1 + int(rng() % 8); i < n; ++i) s[at(rng)] ^= char(1 + rng() % 255);
      break;
    case 1: s.resize(at(rng)); break;
    case 2: {
      const size_t from = at(rng);
      for (size_t i = from; i < std::min(s.size(), from + 1 + rng() % 8); ++i) s[i] = '\xff';
      break;
    }
    default: {
      std::string junk(1 + rng() % 64, '\0');
      for (char& c : junk) c = char(rng());
      s = junk + s;
    }
  }
  return s;
}

TEST(ServeClusterSecret, AWrongSecretIsRefusedAndLoggedAndTheRightOneJoins) {
  test::TempDir dir;
  const std::vector<uint16_t> ports = free_ports(2);
  const std::string file = dir.file("cluster.yaml"), wrong = dir.file("wrong.yaml");
  std::ofstream(file) << one_engine_yaml(ports[0], ports[1], "the-cluster-secret-0123");
  std::ofstream(wrong) << one_engine_yaml(ports[0], ports[1], "another-secret-456789");
  const std::string rank0_at = "127.0.0.1:" + std::to_string(ports[1]);

  Daemon router({"--config", file, "--node", "router"});
  const uint16_t port = router.port();
  ASSERT_NE(port, 0) << router.output();
  ASSERT_TRUE(wait_health(port, "1 of 1 engines not up", 60s)) << router.output();
  auto rank0 = std::make_unique<Daemon>(std::vector<std::string>{"--config", wrong, "--node", "rank0"});
  ASSERT_TRUE(rank0->wait_output("waiting for the router", 120s)) << rank0->output();

  // Both ends refuse, each naming the other and the cause; the router keeps redialing.
  EXPECT_TRUE(router.wait_output("control plane: the TLS handshake with " + rank0_at +
                                     " failed: .*different cluster secret",
                                 30s))
      << router.output();
  EXPECT_TRUE(rank0->wait_output(
      R"(control port: refused 127\.0\.0\.1:\d+: .*different cluster secret)", 30s))
      << rank0->output();
  EXPECT_NE(fingerprint_in(router.output()), "");
  EXPECT_NE(fingerprint_in(router.output()), fingerprint_in(rank0->output()));
  std::this_thread::sleep_for(1500ms);  // several redials later
  EXPECT_NE(health_message(port).find("1 of 1 engines not up: instance one on node rank0"),
            std::string::npos)
      << health_message(port);
  const RunResult refused = run_troupe("cluster status --config " + file);
  EXPECT_EQ(refused.status, 1) << refused.out;
  EXPECT_NE(refused.out.find("on node rank0 (" + rank0_at + ")  unreachable"), std::string::npos)
      << refused.out;
  EXPECT_EQ(rank0->stop(SIGTERM), 0) << rank0->output();

  // The same node with the right secret joins and serves.
  rank0 = std::make_unique<Daemon>(std::vector<std::string>{"--config", file, "--node", "rank0"});
  ASSERT_TRUE(router.wait_ready(port, 120s)) << health_message(port) << rank0->output();
  EXPECT_EQ(fingerprint_in(router.output()), fingerprint_in(rank0->output()));
  const std::vector<int32_t> prompt = random_tokens(17, 901);
  const HttpResponse r = http(port, "POST", "/v1/completions", completion(prompt, 10, false).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
            runtime::engine_greedy(*golden_model().forward, prompt, 10));

  for (Daemon* d : {rank0.get(), &router}) EXPECT_EQ(d->stop(SIGTERM), 0) << d->output();
}

TEST(ServeClusterSecret, BytesThatAreNotTheClustersTlsNeverCrashANode) {
  test::TempDir dir;
  const std::vector<uint16_t> ports = free_ports(2);
  const std::string file = dir.file("cluster.yaml"), secret = "the-cluster-secret-0123";
  std::ofstream(file) << one_engine_yaml(ports[0], ports[1], secret);
  Daemon rank0({"--config", file, "--node", "rank0"});
  ASSERT_TRUE(rank0.wait_output("waiting for the router", 120s)) << rank0.output();

  // A real session of a process that holds the secret: TLS, then BASP's handshake and a
  // stats request inside it.
  const net::control::ClusterTls tls(secret);
  caf::actor_system_config cfg;
  actors::add_wire_types(cfg);
  cfg.load<caf::io::middleman>();
  tls.apply(cfg);
  caf::actor_system sys{cfg};
  std::string session;
  {
    RecordingProxy proxy(ports[1]);
    ASSERT_TRUE(engine_answers(sys, proxy.port()));
    session = proxy.sent();
  }
  ASSERT_GT(session.size(), 100u);

  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) send_and_drop(ports[1], damaged(session, rng), 10ms);
  for (int i = 0; i < 30; ++i) send_and_drop(ports[1], session, 10ms);  // replays, whole
  for (int i = 0; i < 30; ++i) {
    std::string junk(1 + rng() % 4096, '\0');
    for (char& c : junk) c = char(rng());
    send_and_drop(ports[1], junk, 10ms);
  }
  EXPECT_TRUE(alive(rank0.pid())) << rank0.output();
  EXPECT_TRUE(rank0.wait_output(R"(control port: refused 127\.0\.0\.1:\d+: )", 10s)) << rank0.output();
  // Asked by another process: the engine answers, and serves no one else meanwhile.
  const RunResult status = run_troupe("cluster status --config " + file);
  EXPECT_NE(status.out.find("on node rank0 (127.0.0.1:" + std::to_string(ports[1]) +
                            ")  up: 0 running"),
            std::string::npos)
      << status.out << rank0.output();
  EXPECT_TRUE(engine_answers(sys, ports[1]));
  EXPECT_EQ(rank0.stop(SIGTERM), 0) << rank0.output();
}

}  // namespace
}  // namespace troupe::testing
