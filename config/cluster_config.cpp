#include "config/cluster_config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <set>
#include <string_view>

#include "config/value_parse.h"
#include "config/yaml_doc.h"
#include "runtime/dep/rank_tiers.h"
#include "kernels/check.h"

namespace troupe::config {
namespace {

constexpr std::array<std::string_view, 6> kTopKeys = {
    "cluster-secret", "cluster-secret-file", "nodes", "router", "instances", "serve"};
constexpr std::array<std::string_view, 4> kNodeKeys = {"name", "host", "port", "model"};
constexpr std::array<std::string_view, 3> kRouterKeys = {"node", "http-port", "tcp-port"};
constexpr std::array<std::string_view, 6> kInstanceKeys = {
    "name", "role", "ranks", "threads", "enable-expert-parallel", "num-redundant-experts"};

// The keys of one map section: each known (else the nearest is suggested) and set once.
void check_keys(const YAML::Node& map, std::span<const std::string_view> allowed,
                const std::string& what, const std::string& source) {
  std::map<std::string, int> first_line;
  for (const auto& kv : map) {
    const std::string at = yaml_at(source, kv.first);
    if (!kv.first.IsScalar()) TROUPE_FAIL(at << ": a key of " << what << " must be a plain name");
    const std::string& name = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      const std::string near = nearest_name(name, allowed);
      TROUPE_FAIL(at << ": unknown key '" << name << "' in " << what
                     << (near.empty() ? "" : " (did you mean '" + near + "'?)"));
    }
    const auto [it, fresh] = first_line.emplace(name, kv.first.Mark().line + 1);
    if (!fresh)
      TROUPE_FAIL(at << ": key '" << name << "' is set twice in " << what << " (first on line "
                     << it->second << ")");
  }
}

const YAML::Node& scalar(const YAML::Node& v, const std::string& key, const char* expects,
                         const std::string& source) {
  if (!v.IsScalar())
    TROUPE_FAIL(yaml_at(source, v) << ": key '" << key << "' expects " << expects << ", got "
                                   << node_kind(v));
  return v;
}

std::string text_of(const YAML::Node& v, const std::string& key, const std::string& source) {
  return scalar(v, key, "a string", source).Scalar();
}

int64_t int_of(const YAML::Node& v, const std::string& key, int64_t lo, int64_t hi,
               const std::string& source) {
  const std::string expects =
      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  const std::optional<int64_t> n = parse_int(scalar(v, key, expects.c_str(), source).Scalar());
  if (!n || *n < lo || *n > hi)
    TROUPE_FAIL(yaml_at(source, v) << ": key '" << key << "' expects " << expects << ", got '"
                                   << v.Scalar() << "'");
  return *n;
}

bool bool_of(const YAML::Node& v, const std::string& key, const std::string& source) {
  const std::optional<bool> b = parse_bool(scalar(v, key, "true or false", source).Scalar());
  if (!b)
    TROUPE_FAIL(yaml_at(source, v) << ": key '" << key << "' expects true or false, got '"
                                   << v.Scalar() << "'");
  return *b;
}

// A required key of a map section.
YAML::Node need(const YAML::Node& map, const char* key, const std::string& what,
                const std::string& source) {
  const YAML::Node v = map[key];
  if (!v) TROUPE_FAIL(yaml_at(source, map) << ": " << what << " needs '" << key << "'");
  return v;
}

// Node names go into logs, metrics labels and command lines: keep them plain.
void check_name(const std::string& name, const std::string& what, const std::string& at) {
  const bool plain = !name.empty() && name.size() <= 64 &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                              c == '_' || c == '.';
                     });
  if (!plain)
    TROUPE_FAIL(at << ": " << what << " '" << name
                   << "' must be 1-64 characters of letters, digits, '-', '_' and '.'");
}

std::vector<ClusterNode> parse_nodes(const YAML::Node& list, const std::string& source) {
  if (!list.IsSequence() || list.size() == 0)
    TROUPE_FAIL(yaml_at(source, list) << ": 'nodes' expects a list of maps (name, host, port), got "
                                      << (list.IsSequence() ? "an empty list" : node_kind(list)));
  std::vector<ClusterNode> nodes;
  std::map<std::string, int> line_of_name;
  for (const YAML::Node& n : list) {
    const std::string at = yaml_at(source, n);
    if (!n.IsMap()) TROUPE_FAIL(at << ": each entry of 'nodes' must be a map, got " << node_kind(n));
    check_keys(n, kNodeKeys, "a node", source);
    ClusterNode node;
    node.line = n.Mark().line + 1;
    node.name = text_of(need(n, "name", "a node", source), "name", source);
    check_name(node.name, "node name", at);
    node.host = text_of(need(n, "host", "node '" + node.name + "'", source), "host", source);
    if (node.host.empty() || node.host.find_first_of(" \t/") != std::string::npos)
      TROUPE_FAIL(at << ": node '" << node.name << "': host '" << node.host
                     << "' must be a host name or address");
    node.port = int_of(need(n, "port", "node '" + node.name + "'", source), "port", 1, 65535, source);
    if (n["model"]) node.model = text_of(n["model"], "model", source);
    const auto [it, fresh] = line_of_name.emplace(node.name, node.line);
    if (!fresh)
      TROUPE_FAIL(at << ": node '" << node.name << "' is defined twice (first on line "
                     << it->second << ")");
    nodes.push_back(std::move(node));
  }
  return nodes;
}

ClusterRouter parse_router(const YAML::Node& map, const ClusterConfig& c) {
  const std::string& source = c.source;
  if (!map.IsMap())
    TROUPE_FAIL(yaml_at(source, map) << ": 'router' expects a map (node, http-port, tcp-port), got "
                                     << node_kind(map));
  check_keys(map, kRouterKeys, "the router", source);
  ClusterRouter r;
  const YAML::Node node = need(map, "node", "the router", source);
  r.node = text_of(node, "node", source);
  if (!c.node(r.node))
    TROUPE_FAIL(yaml_at(source, node) << ": the router's node '" << r.node
                                      << "' is not in 'nodes'");
  if (map["http-port"]) r.http_port = int_of(map["http-port"], "http-port", 0, 65535, source);
  if (map["tcp-port"]) r.tcp_port = int_of(map["tcp-port"], "tcp-port", 0, 65535, source);
  return r;
}

std::vector<ClusterInstance> parse_instances(const YAML::Node& list, const ClusterConfig& c) {
  const std::string& source = c.source;
  if (!list.IsSequence() || list.size() == 0)
    TROUPE_FAIL(yaml_at(source, list)
                << ": 'instances' expects a list of maps (name, role, ranks, threads), got "
                << (list.IsSequence() ? "an empty list" : node_kind(list)));
  std::vector<ClusterInstance> out;
  std::map<std::string, int> line_of_name;
  for (const YAML::Node& n : list) {
    const std::string at = yaml_at(source, n);
    if (!n.IsMap())
      TROUPE_FAIL(at << ": each entry of 'instances' must be a map, got " << node_kind(n));
    check_keys(n, kInstanceKeys, "an instance", source);
    ClusterInstance in;
    in.line = n.Mark().line + 1;
    in.name = text_of(need(n, "name", "an instance", source), "name", source);
    check_name(in.name, "instance name", at);
    const std::string what = "instance '" + in.name + "'";
    if (n["role"]) {
      const YAML::Node role = n["role"];
      const std::string r = text_of(role, "role", source);
      if (r == "prefill") in.role = InstanceRole::Prefill;
      else if (r == "decode") in.role = InstanceRole::Decode;
      else if (r != "mixed")
        TROUPE_FAIL(yaml_at(source, role) << ": " << what
                                          << ": role expects mixed, prefill or decode, got '" << r
                                          << "'");
    }
    const YAML::Node ranks = need(n, "ranks", what, source);
    if (!ranks.IsSequence() || ranks.size() == 0)
      TROUPE_FAIL(yaml_at(source, ranks) << ": " << what
                                         << ": 'ranks' expects a list of node names (the node "
                                            "of each rank, in rank order), got "
                                         << (ranks.IsSequence() ? "an empty list" : node_kind(ranks)));
    if (ranks.size() > 256)
      TROUPE_FAIL(yaml_at(source, ranks) << ": " << what << ": at most 256 ranks, got "
                                         << ranks.size());
    for (const YAML::Node& r : ranks) {
      const std::string name = text_of(r, "ranks", source);
      if (!c.node(name))
        TROUPE_FAIL(yaml_at(source, r) << ": " << what << ": rank " << in.ranks.size()
                                       << "'s node '" << name << "' is not in 'nodes'");
      in.ranks.push_back(name);
    }
    if (n["threads"]) in.threads = int_of(n["threads"], "threads", 1, 1024, source);
    if (n["enable-expert-parallel"])
      in.enable_expert_parallel = bool_of(n["enable-expert-parallel"], "enable-expert-parallel",
                                          source);
    if (n["num-redundant-experts"])
      in.num_redundant_experts =
          int_of(n["num-redundant-experts"], "num-redundant-experts", 0, 1 << 20, source);
    if (in.num_redundant_experts > 0 && !(in.enable_expert_parallel && in.ranks.size() > 1))
      TROUPE_FAIL(at << ": " << what
                     << ": num-redundant-experts needs enable-expert-parallel and more than one "
                        "rank");
    const auto [it, fresh] = line_of_name.emplace(in.name, in.line);
    if (!fresh)
      TROUPE_FAIL(at << ": instance '" << in.name << "' is defined twice (first on line "
                     << it->second << ")");
    out.push_back(std::move(in));
  }
  return out;
}

// Keys of `serve:` that the cluster sections set per node.
std::string owned_by_cluster(const std::string& key) {
  if (key == "host") return "is each node's 'host' in a cluster file";
  if (key == "port" || key == "tcp-port")
    return "is the router's 'http-port' / 'tcp-port' in a cluster file";
  if (key == "data-parallel-size" || key == "enable-expert-parallel" ||
      key == "num-redundant-experts" || key == "threads")
    return "is set per instance in a cluster file ('ranks', 'enable-expert-parallel', "
           "'num-redundant-experts', 'threads')";
  return "";
}

// Two listeners on one host and port: the second process could not start.
void check_ports(const ClusterConfig& c) {
  std::map<std::pair<std::string, int64_t>, std::string> taken;
  auto claim = [&](const std::string& host, int64_t port, const std::string& what) {
    if (port == 0) return;  // the OS picks
    const auto [it, fresh] = taken.emplace(std::make_pair(host, port), what);
    if (!fresh)
      TROUPE_FAIL(c.source << ": " << what << " and " << it->second << " both use " << host << ":"
                           << port);
  };
  for (const ClusterNode& n : c.nodes)
    claim(n.host, n.port, "node '" + n.name + "' (line " + std::to_string(n.line) + ")");
  const std::string& host = c.node(c.router.node)->host;
  claim(host, c.router.http_port, "the router's http-port");
  claim(host, c.router.tcp_port, "the router's tcp-port");
}

void check_every_node_runs_something(const ClusterConfig& c) {
  std::set<std::string> used = {c.router.node};
  for (const ClusterInstance& in : c.instances) used.insert(in.ranks.begin(), in.ranks.end());
  for (const ClusterNode& n : c.nodes)
    if (!used.count(n.name))
      TROUPE_FAIL(c.source << ":" << n.line << ": node '" << n.name
                           << "' runs neither the router nor a rank of any instance");
}

// P/D (docs/pd.md): prefill instances need a decode instance to hand to, and the other
// way round. Their ranks may be processes of their own: a hand-off goes to and from one
// rank process, each of which has its own scheduler and transfer agent.
void check_roles(const ClusterConfig& c) {
  const auto has = [&](InstanceRole r) {
    return std::any_of(c.instances.begin(), c.instances.end(),
                       [&](const ClusterInstance& in) { return in.role == r; });
  };
  for (const ClusterInstance& in : c.instances) {
    if (in.role == InstanceRole::Mixed) continue;
    const bool prefill = in.role == InstanceRole::Prefill;
    if (!has(prefill ? InstanceRole::Decode : InstanceRole::Prefill))
      TROUPE_FAIL(c.source << ":" << in.line << ": instance '" << in.name << "' is a "
                           << (prefill ? "prefill" : "decode") << " instance, and no instance is a "
                           << (prefill ? "decode" : "prefill") << " one");
  }
}

std::string read_secret(const YAML::Node& root, const std::string& source) {
  const YAML::Node inline_secret = root["cluster-secret"], file = root["cluster-secret-file"];
  if (inline_secret && file)
    TROUPE_FAIL(yaml_at(source, file) << ": set cluster-secret or cluster-secret-file, not both");
  std::string secret;
  const YAML::Node& at = inline_secret ? inline_secret : file;
  if (inline_secret) secret = text_of(inline_secret, "cluster-secret", source);
  if (file) {
    const std::string path = text_of(file, "cluster-secret-file", source);
    // Bounded: a secret is short, and a path like /dev/zero must not read forever.
    std::ifstream in(path, std::ios::binary);
    if (!in) TROUPE_FAIL(yaml_at(source, file) << ": cluster-secret-file '" << path
                                               << "' cannot be read");
    secret.resize(4097);
    in.read(secret.data(), std::streamsize(secret.size()));
    secret.resize(size_t(in.gcount()));
    if (secret.size() > 4096)
      TROUPE_FAIL(yaml_at(source, file) << ": cluster-secret-file '" << path
                                        << "' holds more than 4096 bytes: not a secret");
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  }
  if ((inline_secret || file) && secret.size() < 16)
    TROUPE_FAIL(yaml_at(source, at) << ": the cluster secret must be at least 16 characters, got "
                                    << secret.size());
  return secret;
}

}  // namespace

const ClusterNode* ClusterConfig::node(const std::string& name) const {
  for (const ClusterNode& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

bool ClusterConfig::one_host() const {
  for (const ClusterNode& n : nodes)
    if (n.host != nodes.front().host) return false;
  return true;
}

bool is_cluster_config(const std::string& text) {
  try {
    const YAML::Node root = YAML::Load(text);
    return root.IsMap() && root["nodes"];
  } catch (const std::exception&) {
    return false;
  }
}

ClusterConfig parse_cluster_config(const std::string& text, const std::string& source) {
  const YAML::Node root = parse_yaml(text, source);
  if (!root.IsMap() || !root["nodes"])
    TROUPE_FAIL(source << ": a cluster file needs a top-level 'nodes' list (docs/cluster.md)");
  check_keys(root, kTopKeys, "the cluster file", source);
  ClusterConfig c;
  c.source = source;
  c.nodes = parse_nodes(root["nodes"], source);
  c.router = parse_router(need(root, "router", "the cluster file", source), c);
  c.instances = parse_instances(need(root, "instances", "the cluster file", source), c);
  c.secret = read_secret(root, source);
  if (const YAML::Node serve = root["serve"]) {
    if (!serve.IsMap())
      TROUPE_FAIL(yaml_at(source, serve) << ": 'serve' expects a map of troupe serve keys, got "
                                         << node_kind(serve));
    KeyOrigins origins;
    apply_serve_config_map(c.serve, serve, source, &origins, owned_by_cluster);
    c.serve.validate(origins);
  }
  check_ports(c);
  check_every_node_runs_something(c);
  check_roles(c);
  return c;
}

ClusterConfig load_cluster_config(const std::string& path) {
  return parse_cluster_config(read_text_file(path, "cluster file"), path);
}

std::string ClusterEngine::describe(const ClusterConfig& c) const {
  const ClusterNode* n = c.node(node);
  return "instance " + instance + (rank >= 0 ? " rank " + std::to_string(rank) : "") +
         " on node " + node + " (" + n->host + ":" + std::to_string(n->port) + ")";
}

namespace {

// The serve settings of an engine of `ranks` ranks of `in` on `node`: the serve keys,
// then the node's model, the instance's shape and threads (threads per rank x ranks).
// member: the engine is one rank of the instance's expert-parallel group.
ServeConfig engine_serve_config(const ClusterConfig& c, const ClusterNode& node,
                                const ClusterInstance& in, int ranks, bool member = false) {
  ServeConfig s = c.serve;
  if (!node.model.empty()) s.model = node.model;
  s.data_parallel_size = ranks;
  const bool grouped = ranks > 1 || member;
  s.enable_expert_parallel = in.enable_expert_parallel && grouped;
  s.num_redundant_experts = grouped ? in.num_redundant_experts : 0;
  s.threads = in.threads * ranks;
  s.validate({{"data-parallel-size", c.source + " line " + std::to_string(in.line)}});
  return s;
}

}  // namespace

std::vector<ClusterEngine> cluster_engines(const ClusterConfig& c) {
  std::vector<ClusterEngine> out;
  std::map<std::string, std::string> engine_of_node;
  auto add = [&](ClusterEngine e, const ClusterInstance& in) {
    const auto [it, fresh] = engine_of_node.emplace(e.node, e.describe(c));
    if (!fresh)
      TROUPE_FAIL(c.source << ":" << in.line << ": node '" << e.node << "' would run "
                           << it->second << " and " << e.describe(c)
                           << ": one engine per process so far; give each its own node");
    out.push_back(std::move(e));
  };
  for (const ClusterInstance& in : c.instances) {
    const int R = static_cast<int>(in.ranks.size());
    const bool one_node =
        std::all_of(in.ranks.begin(), in.ranks.end(), [&](const std::string& n) {
          return n == in.ranks.front();
        });
    if (one_node) {
      ClusterEngine e;
      e.instance = in.name;
      e.ranks = R;
      e.node = in.ranks.front();
      e.serve = engine_serve_config(c, *c.node(in.ranks.front()), in, R);
      e.role = in.role;
      add(std::move(e), in);
      continue;
    }
    for (int r = 0; r < R; ++r) {
      const std::string& node = in.ranks[size_t(r)];
      const bool member = in.enable_expert_parallel;
      ClusterEngine e;
      e.instance = in.name;
      e.rank = r;
      e.ranks = R;
      e.node = node;
      e.serve = engine_serve_config(c, *c.node(node), in, 1, member);
      // A rank of its own without expert parallelism is a one-rank engine: its disk tier
      // folder is named by its rank here (a group member's is named by spawn_engine), so
      // nodes on one host sharing kv-disk-dir never share files.
      if (!member) e.serve.kv_disk_dir = runtime::rank_disk_dir(e.serve.kv_disk_dir, r, R);
      e.group_member = member;
      e.role = in.role;
      if (member) e.leader = in.ranks.front();
      add(std::move(e), in);
    }
  }
  return out;
}

void check_cluster_secret(const ClusterConfig& c, bool insecure) {
  if (c.secret.empty() && !c.one_host() && !insecure)
    TROUPE_FAIL(c.source << ": the nodes are on more than one host, so the cluster needs "
                            "cluster-secret or cluster-secret-file (or --insecure, which lets "
                            "anyone who reaches a control port join)");
}

NodeRun plan_node(const ClusterConfig& c, const std::string& name, bool insecure) {
  NodeRun run;
  run.node = c.node(name);
  if (!run.node) {
    std::vector<std::string_view> names;
    for (const ClusterNode& n : c.nodes) names.push_back(n.name);
    const std::string near = nearest_name(name, names);
    TROUPE_FAIL("--node '" << name << "' is not a node of " << c.source
                           << (near.empty() ? "" : " (did you mean '" + near + "'?)"));
  }
  check_cluster_secret(c, insecure);
  run.router = c.router.node == name;
  for (ClusterEngine& e : cluster_engines(c)) {
    if (e.node == name)
      run.engine = std::move(e);
    else if (run.router)
      run.remote.push_back(std::move(e));
  }
  run.serve = run.engine ? run.engine->serve : c.serve;
  if (run.router) {
    run.serve.host = run.node->host;
    run.serve.port = c.router.http_port;
    run.serve.tcp_port = c.router.tcp_port;
  }
  return run;
}

}  // namespace troupe::config
