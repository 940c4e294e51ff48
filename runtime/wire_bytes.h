// Little-endian integers into and out of byte strings, for the small binary formats that
// cross processes (runtime/dep/peer_address.h, runtime/collectives/step_metadata_wire.h).
// The reader checks every length against the end and throws troupe::Error naming the
// field and the format: its input comes from another process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/check.h"

namespace troupe::runtime {

template <typename T>
void put_le(std::vector<std::byte>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<std::byte>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

class WireReader {
 public:
  WireReader(const std::vector<std::byte>& b, const char* format) : b_(b), format_(format) {}

  template <typename T>
  T get(const char* field) {
    const std::byte* p = take(sizeof(T), field);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return static_cast<T>(v);
  }
  const std::byte* take(size_t n, const char* field) {
    TROUPE_CHECK(b_.size() - at_ >= n, format_, ": ", field, " (", n, " bytes) past the end of ",
                 b_.size(), " bytes");
    const std::byte* p = b_.data() + at_;
    at_ += n;
    return p;
  }
  void expect_end() const {
    TROUPE_CHECK(at_ == b_.size(), format_, ": ", b_.size() - at_, " trailing bytes");
  }

 private:
  const std::vector<std::byte>& b_;
  const char* format_;
  size_t at_ = 0;
};

}  // namespace troupe::runtime
