// The cluster file (config/cluster_config): the bytes are its text, parsed and checked as
// `troupe serve --config cluster.yaml --node NAME` does, then planned for every node it
// names (plan_node: its engines and what it connects to). Contract: every bad file is a troupe::Error naming the key and line; any other
// exception is a finding.
#include "config/cluster_config.h"
#include "fuzz/targets.h"
#include "kernels/check.h"

namespace troupe::fuzz {

void cluster_config(const uint8_t* data, size_t size) {
  const std::string text(as_text(data, size));
  (void)config::is_cluster_config(text);  // never throws
  try {
    const config::ClusterConfig c = config::parse_cluster_config(text, "fuzz.yaml");
    for (const config::ClusterNode& n : c.nodes) {
      try {
        (void)config::plan_node(c, n.name, /*insecure=*/false);
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::cluster_config)
