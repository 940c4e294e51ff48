// Two "nodes" on this machine: two network namespaces joined by a veth pair (made and
// removed by the test; it skips saying why where it cannot: not root, no `ip`, no netns).
// Node a runs the router and rank 0 of an expert-parallel DEP-2 instance, node b rank 1,
// as config/examples/cluster-two-nodes.yaml has it; each started with `ip netns exec`.
// Across namespaces the ranks count as different hosts (runtime/dep/peer_address.h), so
// UCX goes over TCP on the veth; completions get the greedy tokens of DEP-2 in one
// process. The HTTP client runs on a thread that entered node a's namespace.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/temp_dir.h"
#include "net/cluster_test_support.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;

bool run_quiet(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// Two namespaces and the veth pair between them: a at 10.213.0.1, b at 10.213.0.2.
class TwoNodes {
 public:
  TwoNodes() {
    const std::string tag = std::to_string(getpid() % 100000);
    a_ = "troupe-a" + tag;
    b_ = "troupe-b" + tag;
    veth_a_ = "trva" + tag;
    veth_b_ = "trvb" + tag;
    if (geteuid() != 0) {
      why_ = "not root: network namespaces need CAP_SYS_ADMIN";
      return;
    }
    if (!run_quiet("command -v ip")) {
      why_ = "no `ip` (iproute2) to make namespaces";
      return;
    }
    const std::vector<std::string> steps = {
        "ip netns add " + a_,
        "ip netns add " + b_,
        "ip link add " + veth_a_ + " type veth peer name " + veth_b_,
        "ip link set " + veth_a_ + " netns " + a_,
        "ip link set " + veth_b_ + " netns " + b_,
        "ip -n " + a_ + " addr add 10.213.0.1/24 dev " + veth_a_,
        "ip -n " + b_ + " addr add 10.213.0.2/24 dev " + veth_b_,
        "ip -n " + a_ + " link set " + veth_a_ + " up",
        "ip -n " + b_ + " link set " + veth_b_ + " up",
        "ip -n " + a_ + " link set lo up",
        "ip -n " + b_ + " link set lo up",
    };
    for (const std::string& s : steps)
      if (!run_quiet(s)) {
        why_ = "`" + s + "` failed";
        return;
      }
    made_ = true;
  }
  ~TwoNodes() {
    run_quiet("ip netns del " + a_);  // takes its end of the veth pair, and so the pair
    run_quiet("ip netns del " + b_);
  }
  bool made() const { return made_; }
  const std::string& why() const { return why_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  const std::string& veth(const std::string& ns) const { return ns == a_ ? veth_a_ : veth_b_; }

  // Runs fn on a thread that entered namespace ns (setns acts on the calling thread).
  static void in(const std::string& ns, const std::function<void()>& fn) {
    std::thread t([&] {
      const int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << ns;
      ASSERT_EQ(setns(fd, CLONE_NEWNET), 0) << ns;
      close(fd);
      fn();
    });
    t.join();
  }

 private:
  std::string a_, b_, veth_a_, veth_b_, why_;
  bool made_ = false;
};

std::string two_node_yaml(const TwoNodes&) {
  return "cluster-secret: test-cluster-secret-0123\n"
         "nodes:\n"
         "  - {name: a, host: 10.213.0.1, port: 7410}\n"
         "  - {name: b, host: 10.213.0.2, port: 7410}\n"
         "router: {node: a, http-port: 0, tcp-port: 0}\n"
         "instances:\n"
         "  - {name: dep2, ranks: [a, b], threads: 1}\n" +
         cluster_serve_section();
}

std::vector<int32_t> dep2_greedy(const std::vector<int32_t>& prompt, int64_t n) {
  return runtime::dep_engine_greedy(*golden_model().forward, 2, prompt, n);
}

TEST(ServeClusterNetns, TwoNodesInNetworkNamespacesGiveOneProcesssTokens) {
  TwoNodes nodes;
  if (!nodes.made()) GTEST_SKIP() << "two-node test skipped: " << nodes.why();
  test::TempDir dir;
  const std::string file = dir.file("cluster.yaml");
  std::ofstream(file) << two_node_yaml(nodes);
  // UCX on each node's veth only (its loopback is a different one on each side).
  auto node = [&](const char* name, const std::string& ns) {
    return std::make_unique<Daemon>(
        std::vector<std::string>{"--config", file, "--node", name},
        std::vector<std::string>{"ip", "netns", "exec", ns, "env",
                                 "UCX_NET_DEVICES=" + nodes.veth(ns)});
  };
  auto b = node("b", nodes.b());  // rank 1 before its leader
  auto a = node("a", nodes.a());
  const uint16_t port = a->port(60s);
  ASSERT_NE(port, 0) << a->output();
  bool ready = false;
  TwoNodes::in(nodes.a(), [&] {
    const auto until = std::chrono::steady_clock::now() + 120s;
    while (!ready && std::chrono::steady_clock::now() < until) {
      ready = http_at("10.213.0.1", port, "GET", "/health").status == 200;
      if (!ready) std::this_thread::sleep_for(50ms);
    }
  });
  ASSERT_TRUE(ready) << a->output() << b->output();
  for (Daemon* d : {a.get(), b.get()}) {
    EXPECT_TRUE(d->wait_output("group formed; serving", 60s)) << d->output();
    EXPECT_TRUE(d->wait_output("UCX transports rank [01]: tcp/" + nodes.veth(d == a.get() ? nodes.a() : nodes.b()), 5s))
        << d->output();
  }

  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_tokens(12 + 9 * i, 1100 + i));
  std::vector<HttpResponse> responses(prompts.size());
  TwoNodes::in(nodes.a(), [&] {
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i)
      clients.emplace_back([&, i] {  // a new thread: it starts in the namespace of its creator
        responses[i] = http_at("10.213.0.1", port, "POST", "/v1/completions",
                               completion(prompts[i], 16, false).dump());
      });
    for (auto& t : clients) t.join();
  });
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body << a->output();
    EXPECT_EQ(json::parse(responses[i].body)["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
              dep2_greedy(prompts[i], 16))
        << "request " << i;
  }
  for (Daemon* d : {b.get(), a.get()}) EXPECT_EQ(d->stop(SIGTERM), 0) << d->output();
}

}  // namespace
}  // namespace troupe::testing
