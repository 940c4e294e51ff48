// `troupe drain --config cluster.yaml --instance NAME`: asks the cluster's router to move
// every request of instance NAME to another decode instance and take nothing new there
// (docs/pd.md "Drain"), by POST /admin/drain on the router's HTTP port (the cluster
// file's router.http-port; --url http://HOST:PORT when that is 0). The API key is
// --api-key, else the cluster file's serve api-key. Prints the answer; exit 0 when the
// drain started, 1 when the router refused it or did not answer.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/http_call.h"
#include "config/cluster_config.h"
#include "kernels/check.h"

namespace troupe::cli {
namespace {

struct Endpoint {
  std::string host;
  int64_t port = 0;
};

// http://HOST:PORT (nothing after the port).
Endpoint parse_url(const std::string& url) {
  const std::string scheme = "http://";
  TROUPE_CHECK(url.rfind(scheme, 0) == 0, "--url must be http://HOST:PORT, not '", url, "'");
  const std::string rest = url.substr(scheme.size());
  const size_t colon = rest.rfind(':');
  TROUPE_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < rest.size(),
               "--url must be http://HOST:PORT, not '", url, "'");
  const std::string port = rest.substr(colon + 1);
  TROUPE_CHECK(port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos,
               "--url: bad port '", port, "'");
  const int64_t p = std::stoll(port);
  TROUPE_CHECK(p >= 1 && p <= 65535, "--url: port ", p, " is out of range");
  return {rest.substr(0, colon), p};
}

}  // namespace

int run_drain(const CommandArgs& argv) {
  Args a(argv, {"config", "instance", "url", "api-key"}, {});
  if (!a.positional().empty()) TROUPE_FAIL("drain takes no positional arguments");
  if (!a.has("config") || !a.has("instance"))
    TROUPE_FAIL("drain needs --config cluster.yaml --instance NAME");
  const config::ClusterConfig c = config::load_cluster_config(*a.get("config"));
  const std::string instance = *a.get("instance");
  bool known = false;
  for (const config::ClusterInstance& i : c.instances) known |= i.name == instance;
  if (!known) TROUPE_FAIL("drain: the cluster file has no instance '" << instance << "'");
  Endpoint router;
  if (a.has("url")) {
    router = parse_url(*a.get("url"));
  } else {
    if (c.router.http_port == 0)
      TROUPE_FAIL("drain: the router's http-port is 0 (the OS picks it): pass --url http://HOST:PORT");
    router = {c.node(c.router.node)->host, c.router.http_port};
  }
  const std::string key = a.get_or("api-key", c.serve.api_key);
  const HttpAnswer answer = http_call(router.host, router.port, "POST", "/admin/drain",
                                      nlohmann::json{{"instance", instance}}.dump(), key);
  if (answer.status == 0) {
    std::fprintf(stderr, "drain: the router at %s:%lld did not answer: %s\n", router.host.c_str(),
                 static_cast<long long>(router.port), answer.body.c_str());
    return 1;
  }
  std::printf("%s\n", answer.body.c_str());
  return answer.status == 200 ? 0 : 1;
}

}  // namespace troupe::cli
