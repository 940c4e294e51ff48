#include "runtime/dep/ucx/ucx_rma.h"

#include <ucp/api/ucp.h>

#include "kernels/check.h"
#include "runtime/dep/ucx/ucp_util.h"

namespace troupe::runtime {

struct UcxRma::Endpoint {
  ucp_ep_h ep = nullptr;
};

// A put in flight: the put's request (null once done) and the flush behind it.
struct UcxRma::Put {
  std::vector<uint8_t> peer;
  ucp_rkey_h rkey = nullptr;
  void* put = nullptr;
  void* flush = nullptr;
  std::string error;
};

namespace {

// A request pointer from a UCP call: null (done at once), an error, or one to poll.
// Returns the error's text, or "" (then *out is the request or null).
std::string started(ucs_status_ptr_t r, void** out) {
  *out = nullptr;
  if (UCS_PTR_IS_ERR(r)) return ucs_status_string(UCS_PTR_STATUS(r));
  *out = r;
  return {};
}

// Frees request *r once it is done; its status, or UCS_INPROGRESS.
ucs_status_t reap(void** r) {
  if (*r == nullptr) return UCS_OK;
  const ucs_status_t s = ucp_request_check_status(*r);
  if (s == UCS_INPROGRESS) return s;
  ucp_request_free(*r);
  *r = nullptr;
  return s;
}

void cancel(ucp_worker_h worker, void** r) {
  if (*r == nullptr) return;
  ucp_request_cancel(worker, *r);
  ucp_request_free(*r);
  *r = nullptr;
}

}  // namespace

UcxRma::UcxRma() {
  ucp_config_t* config = nullptr;
  ucp::check_status(ucp_config_read(nullptr, nullptr, &config), "reading the configuration");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  const ucs_status_t s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  ucp::check_status(s, "ucp_init");
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // Serialized, not single: a scheduled actor (the transfer agent) calls it from whichever
  // CAF worker runs it, one call at a time.
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  const ucs_status_t w = ucp_worker_create(context_, &wp, &worker_);
  if (w != UCS_OK) ucp_cleanup(context_);
  ucp::check_status(w, "ucp_worker_create");
}

UcxRma::~UcxRma() {
  while (!endpoints_.empty()) drop_endpoint(endpoints_.begin()->first, true);
  puts_.clear();
  for (auto& [id, memh] : regions_) ucp_mem_unmap(context_, static_cast<ucp_mem_h>(memh));
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

std::vector<uint8_t> UcxRma::address() const {
  ucp_address_t* a = nullptr;
  size_t n = 0;
  ucp::check_status(ucp_worker_get_address(worker_, &a, &n), "ucp_worker_get_address");
  const auto* p = reinterpret_cast<const uint8_t*>(a);
  std::vector<uint8_t> out(p, p + n);
  ucp_worker_release_address(worker_, a);
  return out;
}

RmaTransport::Exposed UcxRma::expose(uint64_t region, std::span<uint8_t> memory) {
  TROUPE_CHECK(!regions_.contains(region), "UCX: region ", region, " exposed twice");
  TROUPE_CHECK(!memory.empty(), "UCX: an empty region");
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = memory.data();
  mp.length = memory.size();
  ucp_mem_h memh = nullptr;
  ucp::check_status(ucp_mem_map(context_, &mp, &memh), "ucp_mem_map");
  void* key = nullptr;
  size_t key_size = 0;
  const ucs_status_t s = ucp_rkey_pack(context_, memh, &key, &key_size);
  if (s != UCS_OK) ucp_mem_unmap(context_, memh);
  ucp::check_status(s, "ucp_rkey_pack");
  const auto* k = static_cast<const uint8_t*>(key);
  Exposed out{reinterpret_cast<uint64_t>(memory.data()), std::vector<uint8_t>(k, k + key_size)};
  ucp_rkey_buffer_release(key);
  regions_[region] = memh;
  return out;
}

void UcxRma::withdraw(uint64_t region) {
  const auto it = regions_.find(region);
  if (it == regions_.end()) return;
  ucp_mem_unmap(context_, static_cast<ucp_mem_h>(it->second));
  regions_.erase(it);
}

UcxRma::Endpoint& UcxRma::endpoint(const std::vector<uint8_t>& peer_address) {
  auto& slot = endpoints_[peer_address];
  if (slot) return *slot;
  auto e = std::make_unique<Endpoint>();
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  const ucs_status_t s = ucp_ep_create(worker_, &ep, &e->ep);
  if (s != UCS_OK) {
    endpoints_.erase(peer_address);
    TROUPE_FAIL("UCX: cannot reach the receiver: " << ucs_status_string(s));
  }
  slot = std::move(e);
  return *slot;
}

// Every other put to that peer ends with it (their keys were unpacked on it).
void UcxRma::drop_endpoint(const std::vector<uint8_t>& peer_address, bool force) {
  const auto it = endpoints_.find(peer_address);
  if (it == endpoints_.end()) return;
  // Closing first completes every request on it (cancelled when forced); only then may
  // their keys go (ucp.h: after the operations using them are done).
  ucp::close_endpoint(worker_, it->second->ep, force);
  endpoints_.erase(it);
  for (auto& [id, p] : puts_) {
    if (p->peer != peer_address) continue;
    cancel(worker_, &p->put);
    cancel(worker_, &p->flush);
    if (p->rkey) ucp_rkey_destroy(p->rkey);
    p->rkey = nullptr;
    if (p->error.empty()) p->error = "another put to this receiver failed or was abandoned";
  }
}

uint64_t UcxRma::put(const std::vector<uint8_t>& peer_address, const std::vector<uint8_t>& rkey,
                     uint64_t remote_address, std::span<const uint8_t> data) {
  TROUPE_CHECK(!peer_address.empty() && !rkey.empty(), "UCX: a put without an address or key");
  Endpoint& e = endpoint(peer_address);
  auto p = std::make_unique<Put>();
  p->peer = peer_address;
  ucp::check_status(ucp_ep_rkey_unpack(e.ep, rkey.data(), &p->rkey), "ucp_ep_rkey_unpack");
  ucp_request_param_t param{};
  std::string why = started(ucp_put_nbx(e.ep, data.data(), data.size(), remote_address,
                                        p->rkey, &param), &p->put);
  if (why.empty()) why = started(ucp_ep_flush_nbx(e.ep, &param), &p->flush);
  if (!why.empty()) {
    drop_endpoint(peer_address, true);  // completes the put's request, if any
    cancel(worker_, &p->put);
    ucp_rkey_destroy(p->rkey);
    TROUPE_FAIL("UCX: put: " << why);
  }
  const uint64_t id = next_put_++;
  puts_[id] = std::move(p);
  return id;
}

RmaTransport::PutState UcxRma::state(uint64_t id, std::string* error) {
  const auto it = puts_.find(id);
  if (it == puts_.end()) {
    if (error) *error = "no such put";
    return PutState::Failed;
  }
  Put& p = *it->second;
  for (void** r : {&p.put, &p.flush}) {
    const ucs_status_t s = reap(r);
    if (s != UCS_OK && s != UCS_INPROGRESS && p.error.empty()) p.error = ucs_status_string(s);
  }
  if (p.error.empty() && (p.put || p.flush)) return PutState::InProgress;
  const bool failed = !p.error.empty();
  if (failed && error) *error = "UCX: put: " + p.error;
  const std::vector<uint8_t> peer = p.peer;
  if (failed) drop_endpoint(peer, true);  // cancels and frees this one's too
  if (p.rkey) ucp_rkey_destroy(p.rkey);
  puts_.erase(it);
  return failed ? PutState::Failed : PutState::Done;
}

void UcxRma::abandon(uint64_t id) {
  const auto it = puts_.find(id);
  if (it == puts_.end()) return;
  const std::vector<uint8_t> peer = it->second->peer;
  drop_endpoint(peer, true);  // cancels it, frees its key
  puts_.erase(id);
}

bool UcxRma::progress() { return ucp_worker_progress(worker_) != 0; }

std::string UcxRma::transports(const std::vector<uint8_t>& peer_address) const {
  const auto it = endpoints_.find(peer_address);
  return it == endpoints_.end() ? "?" : ucp::lane_transports(it->second->ep);
}

}  // namespace troupe::runtime
