// The out-of-band step that bootstraps a cross-process group: every rank contributes a
// byte string (its UCP worker address, runtime/dep/peer_address.h) and gets everyone's,
// in rank order. The caller provides it (the control plane passes the strings over CAF);
// directory_all_gather is the one for tests and benchmarks: files in a directory that
// all ranks see (one host, or a shared file system), no actors and no sockets.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/dep/communicator.h"

namespace troupe::runtime {

// Called once by each of the group's ranks with its own string; returns [size] strings,
// [r] = rank r's, its own included. Throws troupe::Error when it cannot (a rank never came).
using AllGather = std::function<std::vector<Bytes>(const Bytes& mine)>;

// Rank `rank` of `size` writes DIR/<name>.<rank> (to a temporary name, then renamed, so
// a reader never sees half a file) and waits until all `size` files are there, at most
// timeout_s (then throws naming the ranks missing). `name` tells groups sharing DIR
// apart; a group's files are left for its owner to remove with the directory.
AllGather directory_all_gather(std::string dir, std::string name, int rank, int size,
                               double timeout_s = 60);

}  // namespace troupe::runtime
