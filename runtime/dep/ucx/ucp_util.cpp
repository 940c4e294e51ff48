#include "runtime/dep/ucx/ucp_util.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "kernels/check.h"

namespace troupe::runtime::ucp {

void check_status(ucs_status_t s, const char* what) {
  TROUPE_CHECK(s == UCS_OK, "UCX: ", what, ": ", ucs_status_string(s));
}

std::string lane_transports(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (!f) return "?";
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  // Lines like "#   lane[0]:  3:sysv/memory.0 md[2]  -> ...": the "N:tl/dev.0" token.
  std::istringstream in(std::string(text, size));
  std::free(text);
  std::set<std::string> seen;
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.find("lane[") == std::string::npos) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      const size_t colon = w.find(':'), slash = w.find('/');
      if (colon == std::string::npos || slash == std::string::npos || colon > slash) continue;
      std::string tl = w.substr(colon + 1);
      if (const size_t dot = tl.rfind('.'); dot != std::string::npos) tl.resize(dot);
      if (seen.insert(tl).second) out += (out.empty() ? "" : " ") + tl;
      break;
    }
  }
  return out.empty() ? "?" : out;
}

void close_endpoint(ucp_worker_h worker, ucp_ep_h ep, bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  // ucp.h asks for peer error mode on both sides of a forced close, because it may hurt
  // the remote side; that side is gone, or its lease outlives anything we still write.
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  void* r = ucp_ep_close_nbx(ep, &param);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS &&
         std::chrono::steady_clock::now() < deadline)
    ucp_worker_progress(worker);
  if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);  // released: UCX drops it when done
}

}  // namespace troupe::runtime::ucp
