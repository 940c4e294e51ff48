// UcxCommunicator (runtime/dep/ucx) with its ranks in processes of their own on loopback:
// R = 2 and 3 troupe_ucx_peer processes (tests/ucx_peer/), rendezvous through files. Each
// case runs with UCX's own choice (shared memory on one host, the peers watched through
// /proc) and with every endpoint in UCX peer error mode (TCP). Checked against
// references computed here: the payloads of payload.h, the in-process group's logits.
#ifdef TROUPE_HAVE_UCX

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/check.h"
#include "model/temp_dir.h"
#include "runtime/dep/in_process_group.h"
#include "runtime/dep/peer_address.h"
#include "runtime/eplb/static_placement.h"
#include "support/dep_rank_forward.h"
#include "ucx_peer/payload.h"
#include "ucx_peer/peer_prompts.h"
#include "support/test_paths.h"

extern char** environ;

namespace troupe::runtime {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// R peer processes of one mode; their output goes to DIR/log.<rank>.
class Peers {
 public:
  Peers(const test::TempDir& dir, const std::string& mode, int size, bool peer_errors)
      : dir_(dir), pids_(size, -1) {
    for (int r = 0; r < size; ++r) {
      std::vector<std::string> args = {TROUPE_UCX_PEER, mode, dir.path().string(), std::to_string(r),
                                       std::to_string(size)};
      if (peer_errors) args.push_back("peer");
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      const std::string log = dir.file("log." + std::to_string(r));
      posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      posix_spawn_file_actions_adddup2(&fa, 1, 2);
      EXPECT_EQ(posix_spawn(&pids_[r], TROUPE_UCX_PEER, &fa, nullptr, argv.data(), environ), 0);
      posix_spawn_file_actions_destroy(&fa);
    }
  }
  ~Peers() {
    for (pid_t p : pids_)
      if (p > 0) kill(p, SIGKILL), waitpid(p, nullptr, 0);
  }

  // Waits for rank r to exit (at most `guard`, then kills it: a hang) and returns its
  // exit status; -1 for a hang or a signal.
  int wait(int r, std::chrono::seconds guard = std::chrono::seconds(120)) {
    const auto deadline = std::chrono::steady_clock::now() + guard;
    int status = 0;
    while (waitpid(pids_[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pids_[r], SIGKILL);
        waitpid(pids_[r], &status, 0);
        pids_[r] = -1;
        ADD_FAILURE() << "rank " << r << " hung:\n" << log(r);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pids_[r] = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void wait_all_ok() {
    for (int r = 0; r < static_cast<int>(pids_.size()); ++r) EXPECT_EQ(wait(r), 0) << "rank " << r << ":\n" << log(r);
  }
  void kill_rank(int r) {
    kill(pids_[r], SIGKILL);
    waitpid(pids_[r], nullptr, 0);
    pids_[r] = -1;
  }
  std::string out(int r) const { return read_all(dir_.file("out." + std::to_string(r))); }
  std::string log(int r) const { return read_all(dir_.file("log." + std::to_string(r))); }

 private:
  const test::TempDir& dir_;
  std::vector<pid_t> pids_;
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
std::string after_first_line(const std::string& s) { return s.substr(s.find('\n') + 1); }

class UcxPeers : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  int size() const { return std::get<0>(GetParam()); }
  bool peer_errors() const { return std::get<1>(GetParam()); }
  test::TempDir dir;
};

TEST_P(UcxPeers, AllToAllDeliversEveryBufferToItsRank) {
  Peers peers(dir, "exchange", size(), peer_errors());
  peers.wait_all_ok();
  for (int me = 0; me < size(); ++me) {
    std::string want;
    for (int64_t step = 1; step <= 12; ++step)
      for (int64_t k = 0; k < 2; ++k)
        for (int from = 0; from < size(); ++from)
          want += testing::receipt(step, k, from, testing::payload(11, step, k, from, me));
    const std::string got = peers.out(me);
    EXPECT_EQ(after_first_line(got), want) << "rank " << me;
    // The transport line names a transport for every peer; peer error mode means TCP.
    EXPECT_NE(first_line(got).find("rank " + std::to_string((me + 1) % size()) + ": "), std::string::npos)
        << first_line(got);
    if (peer_errors()) {
      EXPECT_NE(first_line(got).find("tcp"), std::string::npos) << first_line(got);
    }
  }
}

TEST_P(UcxPeers, AnAbortFailsThatStepOnEveryRankAndTheNextStepWorks) {
  Peers peers(dir, "abort", size(), peer_errors());
  peers.wait_all_ok();
  const int aborter = size() - 1;
  const std::string why2 = "rank " + std::to_string(aborter) + " failed: injected in step 2";
  const std::string why3 = "rank " + std::to_string(aborter) + " failed: injected in step 3";
  for (int me = 0; me < aborter; ++me) {
    std::istringstream got(after_first_line(peers.out(me)));
    std::vector<std::string> lines;
    for (std::string l; std::getline(got, l);) lines.push_back(l);
    ASSERT_EQ(lines.size(), 8u) << peers.out(me);
    EXPECT_EQ(lines[0], "step 1 exchange 0: ok");
    EXPECT_EQ(lines[1], "step 1 exchange 1: ok");
    EXPECT_EQ(lines[2], "step 2 exchange 0: threw " + why2);
    EXPECT_EQ(lines[3], "step 2 exchange 1: threw " + why2);  // entering later throws too
    EXPECT_EQ(lines[4], "step 3 exchange 0: ok");
    EXPECT_EQ(lines[5], "step 3 exchange 1: threw " + why3);
    EXPECT_EQ(lines[6], "step 4 exchange 0: ok");
    EXPECT_EQ(lines[7], "step 4 exchange 1: ok");
  }
  EXPECT_EQ(after_first_line(peers.out(aborter)),
            "step 1 exchange 0: ok\nstep 1 exchange 1: ok\nstep 2 exchange 0: aborted\n"
            "step 3 exchange 0: ok\nstep 3 exchange 1: aborted\nstep 4 exchange 0: ok\n"
            "step 4 exchange 1: ok\n");
}

TEST_P(UcxPeers, AKilledPeerMakesTheOthersThrowNotHang) {
  Peers peers(dir, "kill", size(), peer_errors());
  const int victim = size() - 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < size(); ++r)
    while (!std::filesystem::exists(dir.file("ready." + std::to_string(r)))) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rank " << r << " never got ready:\n"
                                                            << peers.log(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  peers.kill_rank(victim);
  for (int me = 0; me < victim; ++me) {
    // The peers' exchange timeout is 300 s: a throw before the guard is the watch's.
    EXPECT_EQ(peers.wait(me, std::chrono::seconds(60)), 0) << peers.log(me);
    const std::string line = after_first_line(peers.out(me));
    EXPECT_NE(line.find("step 2 exchange 0: threw"), std::string::npos) << line;
    EXPECT_NE(line.find("rank " + std::to_string(victim) + " is gone"), std::string::npos) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(Loopback, UcxPeers, ::testing::Combine(::testing::Values(2, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return "R" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "PeerErrors" : "Auto");
                         });

// DEP-2 prefill with the ranks in two processes: logits bit-equal to the in-process group.
TEST(UcxMoe, TwoProcessesGiveTheInProcessGroupsLogits) {
  test::TempDir dir;
  Peers peers(dir, "moe", 2, false);
  const auto& g = testing::golden_model();
  const auto prompts = testing::peer_prompts();
  auto placement = std::make_shared<const eplb::ExpertPlacement>(
      eplb::ep_default_placement(g.config.num_hidden_layers, g.config.n_routed_experts, 2, 0));
  peers.wait_all_ok();
  for (bool own : {false, true}) {
    InProcessGroup group(2);
    std::map<size_t, std::vector<float>> want;
    std::mutex mu;
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        auto mine = testing::dep_rank_forward(g, group.communicator(r), placement, prompts, own);
        std::lock_guard lock(mu);
        want.merge(mine);
      });
    for (auto& t : threads) t.join();
    ASSERT_EQ(want.size(), prompts.size());
    for (const auto& [i, logits] : want) {
      const std::string got = read_all(dir.file("logits." + std::to_string(own) + "." + std::to_string(i)));
      ASSERT_EQ(got.size(), logits.size() * sizeof(float)) << "sequence " << i << ", copies " << own;
      EXPECT_EQ(std::memcmp(got.data(), logits.data(), got.size()), 0) << "sequence " << i << ", copies " << own;
    }
  }
}

TEST(PeerAddress, RoundTripsAndRefusesBrokenBytes) {
  PeerAddress a{"boot/pid:[4026531836]", 1234, 987654321, Bytes(300, std::byte{7})};
  const Bytes wire = encode_peer_address(a);
  EXPECT_EQ(decode_peer_address(wire), a);
  for (size_t cut : {size_t(0), size_t(3), size_t(8), wire.size() - 1}) {
    Bytes shorter(wire.begin(), wire.begin() + static_cast<ptrdiff_t>(cut));
    EXPECT_THROW(decode_peer_address(shorter), Error) << cut;
  }
  Bytes longer = wire;
  longer.push_back(std::byte{0});
  EXPECT_THROW(decode_peer_address(longer), Error);
  Bytes bad = wire;
  bad[0] = std::byte{'X'};
  EXPECT_THROW(decode_peer_address(bad), Error);
}

TEST(PeerAddress, ThisProcessIsAliveAndAReapedChildIsNot) {
  const PeerAddress me = this_process_address({});
  EXPECT_TRUE(process_alive(me.pid, me.start_time));
  EXPECT_FALSE(process_alive(me.pid, me.start_time + 1));  // the pid, reused later
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_alive(child, me.start_time));
}

}  // namespace
}  // namespace troupe::runtime

#endif  // TROUPE_HAVE_UCX
