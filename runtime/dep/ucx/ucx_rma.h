// RmaTransport over UCP (runtime/kv_transfer/rma_transport.h): a context with RMA, one
// worker, registered regions (ucp_mem_map of the caller's memory, ucp_rkey_pack) and
// puts (ucp_put_nbx, then ucp_ep_flush_nbx: the flush completes once the bytes are in
// the remote memory). Endpoints are cached per peer address and use error mode none, so
// on one host UCX may pick shared memory (cma); a peer that goes away is caught by the
// caller's deadline, which abandons the put and closes the endpoint (docs/pd.md).
#pragma once

#include <map>
#include <memory>

#include "runtime/kv_transfer/rma_transport.h"

struct ucp_context;
struct ucp_worker;

namespace troupe::runtime {

class UcxRma final : public RmaTransport {
 public:
  UcxRma();  // throws troupe::Error when UCX cannot start
  ~UcxRma() override;
  UcxRma(const UcxRma&) = delete;
  UcxRma& operator=(const UcxRma&) = delete;

  std::vector<uint8_t> address() const override;
  Exposed expose(uint64_t region, std::span<uint8_t> memory) override;
  void withdraw(uint64_t region) override;
  uint64_t put(const std::vector<uint8_t>& peer_address, const std::vector<uint8_t>& rkey,
               uint64_t remote_address, std::span<const uint8_t> data) override;
  PutState state(uint64_t put, std::string* error) override;
  void abandon(uint64_t put) override;
  bool progress() override;
  std::string transports(const std::vector<uint8_t>& peer_address) const override;

 private:
  struct Endpoint;
  struct Put;
  Endpoint& endpoint(const std::vector<uint8_t>& peer_address);
  void drop_endpoint(const std::vector<uint8_t>& peer_address, bool force);

  ucp_context* context_ = nullptr;
  ucp_worker* worker_ = nullptr;
  std::map<std::vector<uint8_t>, std::unique_ptr<Endpoint>> endpoints_;
  std::map<uint64_t, void*> regions_;  // region id -> ucp_mem_h
  std::map<uint64_t, std::unique_ptr<Put>> puts_;
  uint64_t next_put_ = 1;
};

}  // namespace troupe::runtime
