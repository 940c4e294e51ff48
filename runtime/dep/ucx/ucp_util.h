// Helpers shared by the UCP users of this directory (ucx_worker.cpp, ucx_rma.cpp); it
// includes ucp.h, so only files in runtime/dep/ucx include it.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace troupe::runtime::ucp {

// Throws troupe::Error "UCX: what: status" unless s is UCS_OK.
void check_status(ucs_status_t s, const char* what);

// The transports of an endpoint's lanes, from ucp_ep_print_info: "sysv/memory
// cma/memory", "tcp/lo"; "?" when it cannot tell.
std::string lane_transports(ucp_ep_h ep);

// Closes an endpoint and waits (at most 2 s of progress) for the close: forced when its
// peer is gone or abandoned (nothing to flush to), else flushing first.
void close_endpoint(ucp_worker_h worker, ucp_ep_h ep, bool force);

}  // namespace troupe::runtime::ucp
