// One HTTP/1.1 request from a CLI command to a troupe server (cluster status's /health,
// drain's POST /admin/drain), with a deadline: the status and body, or why it failed.
#pragma once

#include <string>

namespace troupe::cli {

struct HttpAnswer {
  int status = 0;     // 0: no answer
  std::string body;   // or, with status 0, why there was none
};

HttpAnswer http_call(const std::string& host, int64_t port, const std::string& method,
                     const std::string& target, const std::string& body = {},
                     const std::string& api_key = {});

}  // namespace troupe::cli
