// troupe_ucx_peer: one rank of a UcxCommunicator group in a process of its own, started by
// tests/runtime/ucx_communicator_test.cpp (R of them on loopback, rendezvous through files
// in DIR). It writes what it saw to DIR/out.<rank> and exits 0; the test checks the
// files against what it computes itself (payload.h, the in-process group).
//
//   troupe_ucx_peer MODE DIR RANK SIZE [peer]      peer: every endpoint in UCX peer
//                                                  error mode (TCP on one host)
//   exchange  12 steps of 2 all_to_all each, payloads of payload.h; a receipt per buffer
//   abort     step 1 plain; step 2 the last rank aborts before exchange 0; step 3 it makes
//             exchange 0 and aborts before exchange 1; step 4 plain: a line per exchange
//   kill      one plain step; then the last rank writes DIR/ready.<rank> and sleeps (the
//             test kills it), the others write ready and wait in an exchange: what it threw
//   moe       the DEP prefill of support/dep_rank_forward.h, both weight modes: each
//             sequence's logits in DIR/logits.<copies>.<sequence> (raw floats)
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "runtime/dep/ucx/ucx_communicator.h"
#include "runtime/eplb/static_placement.h"
#include "support/dep_rank_forward.h"
#include "ucx_peer/payload.h"
#include "ucx_peer/peer_prompts.h"

namespace {

using troupe::runtime::Bytes;
using troupe::runtime::UcxCommunicator;

constexpr uint64_t kSeed = 11;

std::vector<Bytes> payloads(int64_t step, int64_t k, int me, int size) {
  std::vector<Bytes> send;
  for (int to = 0; to < size; ++to) send.push_back(troupe::testing::payload(kSeed, step, k, me, to));
  return send;
}

void exchange(UcxCommunicator& c, std::ofstream& out) {
  for (int64_t step = 1; step <= 12; ++step) {
    c.begin_step();
    for (int64_t k = 0; k < 2; ++k) {
      const auto recv = c.all_to_all(payloads(step, k, c.rank(), c.size()));
      for (int from = 0; from < c.size(); ++from) out << troupe::testing::receipt(step, k, from, recv[from]);
    }
  }
}

// One exchange, as a line: "step S exchange K: ok" or "...: threw <message>".
void try_exchange(UcxCommunicator& c, std::ofstream& out, int64_t step, int64_t k) {
  out << "step " << step << " exchange " << k << ": ";
  try {
    const auto recv = c.all_to_all(payloads(step, k, c.rank(), c.size()));
    bool right = true;
    for (int from = 0; from < c.size(); ++from)
      right = right && recv[from] == troupe::testing::payload(kSeed, step, k, from, c.rank());
    out << (right ? "ok" : "wrong bytes") << "\n";
  } catch (const std::exception& e) {
    out << "threw " << e.what() << "\n";
  }
}

void abort_steps(UcxCommunicator& c, std::ofstream& out) {
  const bool aborter = c.rank() == c.size() - 1;
  for (int64_t step = 1; step <= 4; ++step) {
    c.begin_step();
    for (int64_t k = 0; k < 2; ++k) {
      if (aborter && ((step == 2 && k == 0) || (step == 3 && k == 1))) {
        c.abort("injected in step " + std::to_string(step));
        out << "step " << step << " exchange " << k << ": aborted\n";
        break;
      }
      try_exchange(c, out, step, k);
    }
  }
}

void kill_wait(UcxCommunicator& c, std::ofstream& out, const std::string& dir) {
  c.begin_step();
  c.all_to_all(payloads(1, 0, c.rank(), c.size()));
  std::ofstream(dir + "/ready." + std::to_string(c.rank())) << "ready\n";
  if (c.rank() == c.size() - 1)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the test kills it
  c.begin_step();
  try_exchange(c, out, 2, 0);
}

void moe(UcxCommunicator& c, std::ofstream& out, const std::string& dir) {
  const auto& g = troupe::testing::golden_model();
  auto placement = std::make_shared<const troupe::runtime::eplb::ExpertPlacement>(
      troupe::runtime::eplb::ep_default_placement(g.config.num_hidden_layers, g.config.n_routed_experts,
                                                  c.size(), 0));
  for (bool own : {false, true})
    for (const auto& [i, logits] :
         troupe::testing::dep_rank_forward(g, c, placement, troupe::testing::peer_prompts(), own)) {
      out << "copies " << own << " sequence " << i << " floats " << logits.size() << "\n";
      std::ofstream(dir + "/logits." + std::to_string(own) + "." + std::to_string(i), std::ios::binary)
          .write(reinterpret_cast<const char*>(logits.data()),
                 static_cast<std::streamsize>(logits.size() * sizeof(float)));
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s exchange|abort|kill|moe DIR RANK SIZE [peer]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int rank = std::atoi(argv[3]), size = std::atoi(argv[4]);
  troupe::runtime::UcxOptions options;
  if (argc > 5 && std::strcmp(argv[5], "peer") == 0)
    options.peer_errors = troupe::runtime::UcxOptions::PeerErrors::Always;
  options.exchange_timeout_s = 300;  // a throw in the kill test must come from the watch
  try {
    UcxCommunicator c(rank, size, troupe::runtime::directory_all_gather(dir, "addr", rank, size), options);
    std::ofstream out(dir + "/out." + std::to_string(rank), std::ios::binary);
    out << "transports " << c.transports() << "\n";
    if (mode == "exchange") exchange(c, out);
    else if (mode == "abort") abort_steps(c, out);
    else if (mode == "kill") kill_wait(c, out, dir);
    else if (mode == "moe") moe(c, out, dir);
    else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
