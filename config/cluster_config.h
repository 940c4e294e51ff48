// The cluster file: one YAML file describes a whole deployment, and every node starts
// from the same file with `troupe serve --config cluster.yaml --node NAME` (docs/cluster.md).
//
//   cluster-secret: "..."          # or cluster-secret-file: PATH (required across hosts)
//   nodes:                         # a node is one troupe process; several may share a host
//     - {name: router, host: 127.0.0.1, port: 7100}
//     - {name: rank0, host: 127.0.0.1, port: 7101, model: /models/v41}
//   router: {node: router, http-port: 8000, tcp-port: 8001}
//   instances:
//     - {name: dep2, role: mixed, ranks: [rank0, rank1], threads: 1}
//   serve:                         # optional: `troupe serve` keys for every node
//     max-num-seqs: 64
//
// A file is a cluster file when its top level has `nodes`; any other --config file is the
// single-node serve config (config/load.h). Errors name the key and file:line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/serve_config.h"

namespace troupe::config {

struct ClusterNode {
  std::string name;
  std::string host;   // where its control port listens and peers reach it
  int64_t port = 0;   // control port (CAF middleman), 1..65535
  std::string model;  // checkpoint folder on this node; empty: serve.model (or the tiny model)
  int line = 0;       // where it is defined, for messages
};

// mixed: serves whole requests; prefill: computes prompts and hands each request, with
// its KV, to a decode instance, which streams the rest (docs/pd.md).
enum class InstanceRole : uint8_t { Mixed, Prefill, Decode };

struct ClusterInstance {
  std::string name;
  InstanceRole role = InstanceRole::Mixed;
  std::vector<std::string> ranks;  // the node of each rank, in rank order: DP size = size()
  int64_t threads = 1;             // kernel threads per rank
  bool enable_expert_parallel = true;  // MoE expert-parallel over the ranks (DEP-R)
  int64_t num_redundant_experts = 0;
  int line = 0;
};

struct ClusterRouter {
  std::string node;
  int64_t http_port = 8000;  // OpenAI-compatible API
  int64_t tcp_port = 8001;   // msgpack TCP API
};

struct ClusterConfig {
  std::string source;  // the file, as given
  std::vector<ClusterNode> nodes;
  ClusterRouter router;
  std::vector<ClusterInstance> instances;
  std::string secret;  // cluster-secret, or the contents of cluster-secret-file
  ServeConfig serve;   // the `serve:` keys over the defaults (validated); per-node fields
                       // (host, ports, model, ranks) come from the sections above

  const ClusterNode* node(const std::string& name) const;
  // Whether every node is on one host (then a missing secret is allowed).
  bool one_host() const;
};

// Parses and checks a cluster file's text; `source` names it in errors.
ClusterConfig parse_cluster_config(const std::string& text, const std::string& source);
ClusterConfig load_cluster_config(const std::string& path);

// Whether the YAML text is a cluster file (its top level is a map with `nodes`). Never
// throws: text that does not parse is not a cluster file (the serve loader reports it).
bool is_cluster_config(const std::string& text);

// The unit a process runs and the router routes to: a whole instance in one process
// (every rank on one node: in-process DEP-R, as `troupe serve --data-parallel-size R`), or
// one rank of an instance whose ranks are on several nodes. Such a rank is either an
// engine of its own (enable-expert-parallel false: it steps on its own), or a member of
// the instance's expert-parallel group (its MoE exchange over UCX with the other ranks'
// processes, lockstep steps by DP sync; the group forms at rank 0's node).
struct ClusterEngine {
  std::string instance;
  int rank = -1;  // -1: the whole instance; else this rank of it
  int ranks = 1;  // the instance's data-parallel size
  std::string node;
  ServeConfig serve;  // what the engine runs with (data-parallel-size: this engine's ranks)
  InstanceRole role = InstanceRole::Mixed;  // the instance's
  bool group_member = false;  // one rank of an expert-parallel group spread over nodes
  std::string leader;         // group_member: the node of rank 0, where the group forms

  // "instance dep2 rank 0 on node rank0 (127.0.0.1:7101)", for logs and /health.
  std::string describe(const ClusterConfig& cluster) const;
};

// Every engine of the cluster, in instance then rank order. Throws troupe::Error (file:
// line) for what is not built yet: a node with more than one engine.
std::vector<ClusterEngine> cluster_engines(const ClusterConfig& cluster);

// What the process started with `--node NAME` runs.
struct NodeRun {
  const ClusterNode* node = nullptr;
  bool router = false;                 // the HTTP and TCP APIs and the cluster router
  std::optional<ClusterEngine> engine;  // the engine this process runs, if any
  // The router: the engines of the other nodes, to connect to over the control plane.
  std::vector<ClusterEngine> remote;
  ServeConfig serve;  // this process's settings (the router's host and ports on the router)

  // Whether this is today's single-process serve: the router with its engine and no other.
  bool single_process() const { return router && engine && remote.empty(); }
};

// The secret rule: a cluster whose nodes are on more than one host must have a secret
// (else a stranger on the network could join as a rank), unless `insecure` (--insecure).
void check_cluster_secret(const ClusterConfig& cluster, bool insecure);

// Throws troupe::Error naming --node when `name` is not a node of the file (with the
// nearest name), and what cluster_engines and check_cluster_secret throw.
NodeRun plan_node(const ClusterConfig& cluster, const std::string& name, bool insecure);

}  // namespace troupe::config
