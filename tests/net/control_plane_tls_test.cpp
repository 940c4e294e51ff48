// The secured control plane in one process (net/control, actors/control_plane.h): two
// actor systems holding the same cluster secret talk over mutual TLS both ways (a
// second connection between two nodes, dialed back, must not break the first: CAF 0.17
// left OpenSSL's error queue dirty, net/control/openssl_shims.h); a system holding
// another secret, and one without TLS, are refused and counted, and the healthy
// connections keep working after those refusals.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "actors/control_plane.h"
#include "net/control/cluster_tls.h"
#include "net/control/openssl_shims.h"

namespace troupe::testing {
namespace {

using namespace std::chrono_literals;

caf::behavior add_one(caf::event_based_actor*) {
  return {[](int32_t x) { return x + 1; }};
}

// What `to` answers to x, or nullopt when it does not within a few seconds.
std::optional<int32_t> ask(caf::actor_system& sys, const caf::actor& to, int32_t x) {
  std::optional<int32_t> out;
  caf::scoped_actor self{sys};
  self->request(to, std::chrono::seconds(3), x)
      .receive([&](int32_t y) { out = y; }, [](const caf::error&) {});
  return out;
}

// An actor system with the middleman and, when given, TLS with the credentials.
struct Node {
  explicit Node(const net::control::ClusterTls* tls) {
    cfg.load<caf::io::middleman>();
    if (tls) tls->apply(cfg);
    sys.emplace(cfg);
    actor = sys->spawn(add_one);
    port = *actors::publish_control(actor, "127.0.0.1", 0);
  }
  ~Node() { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); }
  caf::expected<caf::actor> dial(uint16_t to) {
    return actors::dial_control<caf::actor>(*sys, "127.0.0.1", to);
  }
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  caf::actor actor;
  uint16_t port = 0;
};

TEST(ControlPlaneTls, TwoNodesTalkBothWaysAndStrangersAreRefusedWithoutHarm) {
  const net::control::ClusterTls secret("the-cluster-secret-0123"), other("another-secret-45678");
  EXPECT_NE(secret.fingerprint(), other.fingerprint());
  EXPECT_EQ(secret.fingerprint(), net::control::ClusterTls("the-cluster-secret-0123").fingerprint());

  Node a(&secret), b(&secret);
  ASSERT_TRUE(actors::control_plane_secured(*a.sys));
  auto b_at_a = a.dial(b.port);
  ASSERT_TRUE(b_at_a) << a.sys->render(b_at_a.error());
  EXPECT_EQ(ask(*a.sys, *b_at_a, 1), 2);
  auto a_at_b = b.dial(a.port);  // the dial back: a second connection between a and b
  ASSERT_TRUE(a_at_b) << b.sys->render(a_at_b.error());
  EXPECT_EQ(ask(*a.sys, *b_at_a, 10), 11);
  EXPECT_EQ(ask(*b.sys, *a_at_b, 20), 21);

  const uint64_t refused = net::control::refused_accepts();
  {
    Node stranger(&other);
    EXPECT_FALSE(stranger.dial(a.port));
  }
  {
    Node plain(nullptr);
    EXPECT_FALSE(actors::control_plane_secured(*plain.sys));
    EXPECT_FALSE(plain.dial(b.port));
  }
  EXPECT_GE(net::control::refused_accepts(), refused + 2);
  // The refusals left OpenSSL errors on the multiplexer threads: the healthy connections
  // must not pay for them.
  EXPECT_EQ(ask(*a.sys, *b_at_a, 30), 31);
  EXPECT_EQ(ask(*b.sys, *a_at_b, 40), 41);
}

}  // namespace
}  // namespace troupe::testing
