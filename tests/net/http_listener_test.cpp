// net/common/listener: the accept loop and connection cap every server shares, over real
// sockets on 127.0.0.1: accepted connections hold a slot, the one over the cap goes to
// the refuse callback, a dropped slot frees its place, drain stops accepting.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "net/common/listener.h"
#include "net/http_raw.h"

namespace troupe::testing {
namespace {

using net::ConnectionSlot;
using net::Listener;

// Accepted connections greet "hi" and stay open (their slot kept); refused ones get "no".
struct Greeter {
  std::mutex mutex;
  std::vector<std::pair<std::shared_ptr<Listener::Socket>, ConnectionSlot>> held;

  uint16_t listen(Listener& l) {
    return l.listen(
        [this](Listener::Socket s, ConnectionSlot slot) {
          boost::asio::write(s, boost::asio::buffer("hi", 2));
          std::lock_guard lock(mutex);
          held.emplace_back(std::make_shared<Listener::Socket>(std::move(s)), std::move(slot));
        },
        [](Listener::Socket s) {
          boost::asio::write(s, boost::asio::buffer("no", 2));
          s.close();
        });
  }
  void drop_first() {
    std::lock_guard lock(mutex);
    held.erase(held.begin());  // closes the socket, frees the slot
  }
};

std::string greeting(int fd) {
  char buf[2];
  return recv(fd, buf, 2, MSG_WAITALL) == 2 ? std::string(buf, 2) : "";
}

TEST(Listener, CapRefusesTheNextAndAFreedSlotAdmitsOneMore) {
  Listener l({"127.0.0.1", 0, "test", 2, /*max_connections=*/2});
  Greeter g;
  const uint16_t port = g.listen(l);
  const int a = raw_connect(port), b = raw_connect(port);
  EXPECT_EQ(greeting(a), "hi");
  EXPECT_EQ(greeting(b), "hi");
  EXPECT_EQ(l.connections(), 2u);
  const int c = raw_connect(port);
  EXPECT_EQ(greeting(c), "no");
  EXPECT_EQ(l.connections(), 2u);  // a refused connection does not count
  g.drop_first();
  EXPECT_EQ(l.connections(), 1u);
  const int d = raw_connect(port);
  EXPECT_EQ(greeting(d), "hi");
  for (int fd : {a, b, c, d}) close(fd);
  l.stop();
}

TEST(Listener, DrainStopsAccepting) {
  Listener l({"127.0.0.1", 0, "test", 1, 0});
  Greeter g;
  const uint16_t port = g.listen(l);
  const int a = raw_connect(port);
  EXPECT_EQ(greeting(a), "hi");
  l.drain();
  // The listening socket closes on the acceptor's strand; then connecting fails.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int fd = -1;
  while ((fd = connect_to(port)) >= 0 && std::chrono::steady_clock::now() < until) {
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_LT(fd, 0);
  close(a);
  l.stop();
}

TEST(Listener, ABusyPortIsAnErrorNamingIt) {
  Listener first({"127.0.0.1", 0, "test", 1, 0});
  Greeter g;
  const uint16_t port = g.listen(first);
  Listener second({"127.0.0.1", port, "test", 1, 0});
  try {
    second.listen([](Listener::Socket, ConnectionSlot) {});
    ADD_FAILURE() << "listening twice on one port succeeded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("test 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace troupe::testing
