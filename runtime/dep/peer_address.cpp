#include "runtime/dep/peer_address.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/check.h"
#include "runtime/wire_bytes.h"

namespace troupe::runtime {
namespace {

constexpr char kMagic[4] = {'T', 'R', 'P', 'A'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxField = 64 * 1024;  // a UCP address is a few hundred bytes

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// /proc/<pid>/stat: "pid (comm) state ... starttime(22) ...". comm may hold spaces and
// parentheses, so fields count from the last ')'. Empty state: no such process.
struct ProcStat {
  char state = 0;
  uint64_t start_time = 0;
};

ProcStat read_proc_stat(int64_t pid) {
  const std::string line = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  ProcStat s;
  rest >> s.state;
  std::string field;
  for (int i = 4; i < 22 && rest >> field; ++i) {
  }
  rest >> s.start_time;
  return rest ? s : ProcStat{};
}

}  // namespace

Bytes encode_peer_address(const PeerAddress& a) {
  Bytes out;
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  put_le<uint32_t>(out, kVersion);
  put_le<uint32_t>(out, static_cast<uint32_t>(a.host_key.size()));
  for (char c : a.host_key) out.push_back(static_cast<std::byte>(c));
  put_le<int64_t>(out, a.pid);
  put_le<uint64_t>(out, a.start_time);
  put_le<uint32_t>(out, static_cast<uint32_t>(a.ucp_address.size()));
  out.insert(out.end(), a.ucp_address.begin(), a.ucp_address.end());
  return out;
}

PeerAddress decode_peer_address(const Bytes& wire) {
  WireReader in(wire, "peer address");
  const std::byte* magic = in.take(4, "magic");
  TROUPE_CHECK(std::memcmp(magic, kMagic, 4) == 0, "peer address: bad magic (not a troupe peer)");
  const uint32_t version = in.get<uint32_t>("version");
  TROUPE_CHECK(version == kVersion, "peer address: version ", version, ", this build reads ", kVersion);
  PeerAddress a;
  const uint32_t key = in.get<uint32_t>("host key length");
  TROUPE_CHECK(key <= kMaxField, "peer address: a host key of ", key, " bytes");
  const std::byte* k = in.take(key, "host key");
  a.host_key.assign(reinterpret_cast<const char*>(k), key);
  a.pid = in.get<int64_t>("pid");
  a.start_time = in.get<uint64_t>("start time");
  const uint32_t n = in.get<uint32_t>("address length");
  TROUPE_CHECK(n <= kMaxField, "peer address: a UCP address of ", n, " bytes");
  const std::byte* p = in.take(n, "UCP address");
  a.ucp_address.assign(p, p + n);
  in.expect_end();
  return a;
}

PeerAddress this_process_address(Bytes ucp_address) {
  PeerAddress a;
  auto ns = [](const char* path) {
    char link[256] = {};
    const ssize_t n = readlink(path, link, sizeof(link) - 1);
    return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string("?");
  };
  // The network namespace too: processes in different ones stand for different machines
  // (the two-node test's namespaces), so they talk as hosts do (TCP, UCX peer errors).
  a.host_key = read_first_line("/proc/sys/kernel/random/boot_id") + "/" + ns("/proc/self/ns/pid") +
               "/" + ns("/proc/self/ns/net");
  a.pid = static_cast<int64_t>(getpid());
  a.start_time = read_proc_stat(a.pid).start_time;
  a.ucp_address = std::move(ucp_address);
  return a;
}

bool process_alive(int64_t pid, uint64_t start_time) {
  const ProcStat s = read_proc_stat(pid);
  return s.state != 0 && s.state != 'Z' && s.state != 'X' && s.start_time == start_time;
}

}  // namespace troupe::runtime
