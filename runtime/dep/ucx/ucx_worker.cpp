#include "runtime/dep/ucx/ucx_worker.h"

#include <chrono>
#include <cstdlib>

#include "kernels/check.h"
#include "runtime/dep/ucx/ucp_util.h"

namespace troupe::runtime {

struct UcxWorker::Peer {
  int id = 0;
  ucp_ep_h ep = nullptr;
  bool peer_errors = false;
  std::string error;
};

struct UcxWorker::Pending {
  void* request = nullptr;
  int peer = -1;  // sends: the destination
  UcxMessage message;
};

namespace {

using ucp::check_status;

void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* error = static_cast<std::string*>(arg);
  if (error->empty()) *error = std::string("UCX endpoint failed: ") + ucs_status_string(status);
}

}  // namespace

UcxWorker::UcxWorker(double keepalive_interval_s) {
  ucp_config_t* config = nullptr;
  check_status(ucp_config_read(nullptr, nullptr, &config), "reading the configuration");
  if (!std::getenv("UCX_KEEPALIVE_INTERVAL")) {
    const std::string ms = std::to_string(static_cast<int64_t>(keepalive_interval_s * 1000)) + "ms";
    ucp_config_modify(config, "KEEPALIVE_INTERVAL", ms.c_str());
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  const ucs_status_t s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check_status(s, "ucp_init");
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  const ucs_status_t w = ucp_worker_create(context_, &wp, &worker_);
  if (w != UCS_OK) ucp_cleanup(context_);
  check_status(w, "ucp_worker_create");
}

UcxWorker::~UcxWorker() {
  try {
    flush(2.0);
  } catch (const std::exception&) {  // a receive failed as we leave: nothing to tell
  }
  // A failed peer confirms nothing: force. Else flush.
  for (const auto& p : peers_)
    if (p->ep) ucp::close_endpoint(worker_, p->ep, !p->error.empty());
  for (auto* list : {&sends_, &recvs_})
    for (Pending& p : *list) {
      ucp_request_cancel(worker_, p.request);
      ucp_request_free(p.request);
    }
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

Bytes UcxWorker::address() const {
  ucp_address_t* a = nullptr;
  size_t n = 0;
  check_status(ucp_worker_get_address(worker_, &a, &n), "ucp_worker_get_address");
  const auto* p = reinterpret_cast<const std::byte*>(a);
  Bytes out(p, p + n);
  ucp_worker_release_address(worker_, a);
  return out;
}

void UcxWorker::connect(int id, const Bytes& ucp_address, bool peer_errors) {
  for (const auto& p : peers_) TROUPE_CHECK(p->id != id, "UCX: peer ", id, " connected twice");
  auto p = std::make_unique<Peer>();
  p->id = id;
  p->peer_errors = peer_errors;
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(ucp_address.data());
  ep.err_mode = peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  if (peer_errors) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_handler.cb = on_endpoint_error;
    ep.err_handler.arg = &p->error;
  }
  const ucs_status_t s = ucp_ep_create(worker_, &ep, &p->ep);
  TROUPE_CHECK(s == UCS_OK, "UCX: cannot reach peer ", id, ": ", ucs_status_string(s));
  peers_.push_back(std::move(p));
}

UcxWorker::Peer& UcxWorker::peer(int id) const {
  for (const auto& p : peers_)
    if (p->id == id) return *p;
  TROUPE_FAIL("UCX: no endpoint to peer " << id);
}

void UcxWorker::send(int id, uint64_t tag, Bytes data) {
  Peer& p = peer(id);
  TROUPE_CHECK(p.error.empty(), p.error);
  ucp_request_param_t param{};
  ucs_status_ptr_t r = ucp_tag_send_nbx(p.ep, data.data(), data.size(), tag, &param);
  if (r == nullptr) return;  // done at once (eager): UCX copied the bytes
  if (UCS_PTR_IS_ERR(r)) {
    fail_peer(id, std::string("UCX send failed: ") + ucs_status_string(UCS_PTR_STATUS(r)));
    TROUPE_FAIL(p.error);
  }
  sends_.push_back({r, id, {tag, std::move(data)}});
}

bool UcxWorker::progress(std::vector<UcxMessage>& out) {
  bool any = ucp_worker_progress(worker_) != 0;
  ucp_tag_recv_info_t info{};
  while (ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, 0, 0, 1, &info)) {
    any = true;
    UcxMessage m{info.sender_tag, Bytes(info.length)};
    ucp_request_param_t param{};
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker_, m.data.data(), m.data.size(), msg, &param);
    TROUPE_CHECK(!UCS_PTR_IS_ERR(r), "UCX receive failed: ", ucs_status_string(UCS_PTR_STATUS(r)));
    if (r == nullptr)
      out.push_back(std::move(m));
    else
      recvs_.push_back({r, -1, std::move(m)});
  }
  const size_t before = out.size() + sends_.size();
  reap(out);
  return any || out.size() + sends_.size() != before;
}

namespace {

// Frees each finished request of `list` and hands it, with its status, to `done`.
template <typename Done>
void take_finished(std::vector<UcxWorker::Pending>& list, Done done) {
  for (size_t i = 0; i < list.size();) {
    const ucs_status_t s = ucp_request_check_status(list[i].request);
    if (s == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(list[i].request);
    UcxWorker::Pending p = std::move(list[i]);
    list.erase(list.begin() + static_cast<ptrdiff_t>(i));
    done(p, s);
  }
}

}  // namespace

void UcxWorker::reap(std::vector<UcxMessage>& out) {
  take_finished(recvs_, [&](Pending& p, ucs_status_t s) {
    TROUPE_CHECK(s == UCS_OK, "UCX receive failed: ", ucs_status_string(s));
    out.push_back(std::move(p.message));
  });
  take_finished(sends_, [&](Pending& p, ucs_status_t s) {
    if (s != UCS_OK) fail_peer(p.peer, std::string("UCX send failed: ") + ucs_status_string(s));
  });
}

const std::string& UcxWorker::peer_error(int id) const { return peer(id).error; }

void UcxWorker::fail_peer(int id, std::string why) {
  Peer& p = peer(id);
  if (p.error.empty()) p.error = std::move(why);
}

std::string UcxWorker::transports(int id) const { return ucp::lane_transports(peer(id).ep); }

void UcxWorker::flush(double timeout_s) {
  std::vector<UcxMessage> ignored;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  // Sends to a failed peer never finish (nobody fetches a rendezvous to a dead process).
  auto waiting = [&] {
    for (const Pending& p : sends_)
      if (peer(p.peer).error.empty()) return true;
    return false;
  };
  while (waiting() && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker_);
    reap(ignored);
  }
}

}  // namespace troupe::runtime
