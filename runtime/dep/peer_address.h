// What a rank of a cross-process group tells its peers before they connect (the UCX
// communicator's bootstrap, runtime/dep/ucx/ucx_communicator.h): its UCP worker address
// and who it is as a process, so a peer on the same host can watch it die.
//
//   wire (little-endian):  "TRPA" | u32 version = 1 | u32 host_key length | host_key bytes
//                          | i64 pid | u64 start_time | u32 address length | address bytes
//
// host_key names the host, pid and network namespace (boot id + both namespaces): two
// processes with the same key see each other's pids and share memory transports; ones in
// different network namespaces of a machine count as different hosts (TCP). Pure logic (plus /proc reads), no UCX, so the
// decoder is fuzzed (fuzz/peer_address_fuzz.cpp): it reads what another process sent.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/dep/communicator.h"

namespace troupe::runtime {

struct PeerAddress {
  std::string host_key;  // boot id + pid and net namespace; equal keys: pids are comparable
  int64_t pid = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22 (clock ticks after boot)
  Bytes ucp_address;        // ucp_worker_get_address's bytes, opaque here

  bool operator==(const PeerAddress&) const = default;
};

Bytes encode_peer_address(const PeerAddress& a);
// Throws troupe::Error naming what is wrong (bad magic or version, a length past the end,
// trailing bytes, sizes over 64 KiB).
PeerAddress decode_peer_address(const Bytes& wire);

// This process: its host key, pid and start time, with the given UCP address.
PeerAddress this_process_address(Bytes ucp_address);

// For a peer with this process's host key: false once that process has exited (gone from
// /proc, a zombie, or its pid reused by a process started at another time).
bool process_alive(int64_t pid, uint64_t start_time);

}  // namespace troupe::runtime
