#include "runtime/dep/ucx/ucx_communicator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "kernels/check.h"
#include "runtime/dep/ucx/ucx_worker.h"

namespace troupe::runtime {
namespace {

// A tag: kind (2 bits) | sender (14) | step's low 32 bits | exchange in the step (16).
enum class Kind : uint64_t { Hello = 0, Data = 1, Abort = 2, Mail = 3 };
constexpr int kMaxRanks = 1 << 14;
constexpr int64_t kMaxExchanges = 1 << 16;

uint64_t make_tag(Kind kind, int sender, int64_t step, int64_t exchange) {
  return static_cast<uint64_t>(kind) << 62 | static_cast<uint64_t>(sender) << 48 |
         (static_cast<uint64_t>(step) & 0xffffffffu) << 16 | static_cast<uint64_t>(exchange);
}
Kind tag_kind(uint64_t t) { return static_cast<Kind>(t >> 62); }
int tag_sender(uint64_t t) { return static_cast<int>((t >> 48) & (kMaxRanks - 1)); }
uint32_t tag_step(uint64_t t) { return static_cast<uint32_t>(t >> 16); }
int64_t tag_exchange(uint64_t t) { return static_cast<int64_t>(t & 0xffff); }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string text_of(const Bytes& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }
Bytes bytes_of(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return Bytes(p, p + s.size());
}

}  // namespace

UcxCommunicator::UcxCommunicator(int rank, int size, const AllGather& all_gather, UcxOptions options)
    : rank_(rank), size_(size), options_(options) {
  TROUPE_CHECK(size >= 1 && size <= kMaxRanks && rank >= 0 && rank < size, "UcxCommunicator: rank ",
               rank, " of ", size);
  worker_ = std::make_unique<UcxWorker>(options.keepalive_interval_s);
  const PeerAddress me = this_process_address(worker_->address());
  const std::vector<Bytes> all = all_gather(encode_peer_address(me));
  TROUPE_CHECK(static_cast<int>(all.size()) == size, "UcxCommunicator: the all-gather returned ",
               all.size(), " addresses for ", size, " ranks");
  for (int r = 0; r < size; ++r) {
    peers_.push_back(r == rank ? me : decode_peer_address(all[r]));
    // Same host, Auto: shared memory, no UCX peer errors, so /proc is the watch.
    watch_.push_back(r != rank && options.peer_errors == UcxOptions::PeerErrors::Auto &&
                     peers_[r].host_key == me.host_key);
  }
  for (int r = 0; r < size; ++r)
    if (r != rank)
      worker_->connect(r, peers_[r].ucp_address, !watch_[r]);
  // The hello: every endpoint wired up, every peer's worker running.
  for (int r = 0; r < size; ++r)
    if (r != rank) worker_->send(r, make_tag(Kind::Hello, rank, 0, 0), {});
  const double deadline = now_s() + options.connect_timeout_s;
  while (static_cast<int>(hellos_.size()) < size - 1) {
    pump();
    throw_if_any_peer_gone();
    if (options.cancel && options.cancel->load())
      TROUPE_FAIL("UcxCommunicator rank " << rank << ": the group's forming was given up");
    if (now_s() > deadline)
      TROUPE_FAIL("UcxCommunicator rank " << rank << ": " << hellos_.size() << " of " << size - 1
                                          << " peers said hello within " << options.connect_timeout_s
                                          << " s");
    std::this_thread::yield();
  }
  spdlog::info("UCX rank {} of {}: transports {}", rank, size, transports());
}

UcxCommunicator::~UcxCommunicator() = default;

void UcxCommunicator::begin_step() {
  step_ += 1;
  exchange_ = 0;
  completed_ = 0;
  // What is left of finished steps: buffers of a failed exchange, never collected.
  arrived_.erase(arrived_.begin(), arrived_.lower_bound(Key{step_, 0, 0}));
}

int64_t UcxCommunicator::unwrap_step(uint32_t low) const {
  return step_ + static_cast<int32_t>(low - static_cast<uint32_t>(step_));
}

void UcxCommunicator::pump() {
  std::vector<UcxMessage> came;
  worker_->progress(came);
  for (UcxMessage& m : came) {
    const int from = tag_sender(m.tag);
    if (from >= size_ || from == rank_) continue;  // not of this group: ignore
    switch (tag_kind(m.tag)) {
      case Kind::Hello:
        hellos_.insert(from);
        break;
      case Kind::Data: {
        const int64_t step = unwrap_step(tag_step(m.tag));
        if (step >= step_) arrived_[Key{step, tag_exchange(m.tag), from}] = std::move(m.data);
        break;
      }
      case Kind::Abort:
        record_failure(unwrap_step(tag_step(m.tag)), tag_exchange(m.tag), text_of(m.data));
        break;
      case Kind::Mail:
        mail_.emplace_back(from, std::move(m.data));
        break;
    }
  }
  if (const double now = now_s(); now >= next_watch_) {
    next_watch_ = now + 0.05;
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && watch_[r] && worker_->peer_error(r).empty() &&
          !process_alive(peers_[r].pid, peers_[r].start_time))
        worker_->fail_peer(r, "its process (pid " + std::to_string(peers_[r].pid) + ") exited");
  }
}

void UcxCommunicator::record_failure(int64_t step, int64_t completed, const std::string& why) {
  auto [it, fresh] = failed_.try_emplace(step, Failure{why, completed});  // the first names it
  if (!fresh) it->second.completed = std::min(it->second.completed, completed);
  while (failed_.size() > 64) failed_.erase(failed_.begin());
}

void UcxCommunicator::throw_if_failed(int64_t exchange) {
  // An exchange the aborter completed is one every rank sent its buffers for: it
  // completes everywhere (as in InProcessGroup, whose barrier lets no rank out early).
  auto f = failed_.find(step_);
  if (f != failed_.end() && exchange >= f->second.completed) TROUPE_FAIL(f->second.why);
}

void UcxCommunicator::close(const std::string& why) {
  std::lock_guard lock(close_mu_);
  if (closed_.load()) return;  // the first names it
  close_why_ = why;
  closed_.store(true);
}

void UcxCommunicator::throw_if_peer_gone(int peer) {
  if (closed_.load()) {
    std::lock_guard lock(close_mu_);
    TROUPE_FAIL("UCX rank " << rank_ << ": the group is closed: " << close_why_);
  }
  const std::string& why = worker_->peer_error(peer);
  if (!why.empty()) TROUPE_FAIL("UCX rank " << rank_ << ": rank " << peer << " is gone: " << why);
}

void UcxCommunicator::throw_if_any_peer_gone() {
  for (int r = 0; r < size_; ++r)
    if (r != rank_) throw_if_peer_gone(r);
}

std::vector<Bytes> UcxCommunicator::all_to_all(std::vector<Bytes> send) {
  TROUPE_CHECK(static_cast<int>(send.size()) == size_, "all_to_all: ", send.size(), " buffers for ",
               size_, " ranks");
  const int64_t k = exchange_++;
  TROUPE_CHECK(k < kMaxExchanges, "all_to_all: more than ", kMaxExchanges, " exchanges in one step");
  pump();
  throw_if_failed(k);  // sends nothing
  throw_if_any_peer_gone();
  for (int r = 0; r < size_; ++r)
    if (r != rank_) worker_->send(r, make_tag(Kind::Data, rank_, step_, k), std::move(send[r]));
  std::vector<Bytes> recv(size_);
  recv[rank_] = std::move(send[rank_]);
  const double deadline = now_s() + options_.exchange_timeout_s;
  for (int r = 0; r < size_;) {
    auto it = r == rank_ ? arrived_.end() : arrived_.find(Key{step_, k, r});
    if (r == rank_ || it != arrived_.end()) {
      if (r != rank_) recv[r] = std::move(it->second), arrived_.erase(it);
      ++r;
      continue;
    }
    pump();
    if (arrived_.count(Key{step_, k, r})) continue;
    throw_if_failed(k);
    throw_if_peer_gone(r);
    if (now_s() > deadline)
      TROUPE_FAIL("UCX rank " << rank_ << ": nothing from rank " << r << " for step " << step_
                              << ", exchange " << k << " within " << options_.exchange_timeout_s << " s");
    std::this_thread::yield();
  }
  completed_ = k + 1;
  return recv;
}

void UcxCommunicator::abort(const std::string& why) {
  const std::string text = "rank " + std::to_string(rank_) + " failed: " + why;
  record_failure(step_, completed_, text);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !worker_->peer_error(r).empty()) continue;
    try {
      worker_->send(r, make_tag(Kind::Abort, rank_, step_, completed_), bytes_of(text));
    } catch (const std::exception&) {  // that peer is gone: it waits for nothing
    }
  }
  // An abort nobody receives helps nobody: push it out before this rank goes quiet
  // (bounded, and immediate where UCX sent it eagerly).
  worker_->flush(0.2);
}

std::string UcxCommunicator::transports() const {
  std::string out;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) out += (out.empty() ? "rank " : "; rank ") + std::to_string(r) + ": " + worker_->transports(r);
  return out.empty() ? "none (one rank)" : out;
}

void UcxCommunicator::post(int to, Bytes message) {
  TROUPE_CHECK(to >= 0 && to < size_ && to != rank_, "post: no peer ", to);
  throw_if_peer_gone(to);
  worker_->send(to, make_tag(Kind::Mail, rank_, 0, 0), std::move(message));
}

std::optional<std::pair<int, Bytes>> UcxCommunicator::next_mail(double timeout_s) {
  const double deadline = now_s() + timeout_s;
  for (;;) {
    if (!mail_.empty()) {
      auto m = std::move(mail_.front());
      mail_.pop_front();
      return m;
    }
    pump();
    if (mail_.empty()) throw_if_any_peer_gone();
    if (mail_.empty() && now_s() >= deadline) return std::nullopt;
    if (mail_.empty()) std::this_thread::yield();
  }
}

}  // namespace troupe::runtime
