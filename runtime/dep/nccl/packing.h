// How an all_to_all's byte blocks travel as one contiguous buffer per direction (the
// NCCL communicator stages them in device memory). Pure logic, tested on the CPU.
//
//   send = [b0, b1, b2]  ->  buffer b0|b1|b2, counts [|b0|, |b1|, |b2|], displs [0, |b0|, |b0|+|b1|]
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/dep/communicator.h"

namespace troupe::runtime::nccl_detail {

struct Packed {
  Bytes buffer;
  std::vector<int64_t> counts, displs;  // [peers]
};

inline std::vector<int64_t> displacements(const std::vector<int64_t>& counts) {
  std::vector<int64_t> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

inline Packed pack(const std::vector<Bytes>& blocks) {
  Packed p;
  for (const Bytes& b : blocks) p.counts.push_back(static_cast<int64_t>(b.size()));
  p.displs = displacements(p.counts);
  p.buffer.resize(blocks.empty() ? 0 : p.displs.back() + p.counts.back());
  for (size_t i = 0; i < blocks.size(); ++i)
    if (!blocks[i].empty()) std::memcpy(p.buffer.data() + p.displs[i], blocks[i].data(), blocks[i].size());
  return p;
}

// buffer holds the blocks of counts back to back.
inline std::vector<Bytes> unpack(const Bytes& buffer, const std::vector<int64_t>& counts) {
  std::vector<Bytes> out(counts.size());
  int64_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    out[i].assign(buffer.begin() + at, buffer.begin() + at + counts[i]);
    at += counts[i];
  }
  return out;
}

}  // namespace troupe::runtime::nccl_detail
