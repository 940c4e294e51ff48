// Weight bytes for benchmarks on 2 MiB pages (MADV_HUGEPAGE: advice only, without THP it
// is plain memory), as the loaders hold a model's weights (model/file_copy.h): a decode
// bench on 4 KiB pages would measure TLB walks the engine does not pay.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace troupe::bench {

// One allocation, handed out in order in 64-byte aligned pieces; freed as a whole.
class HugeArena {
 public:
  explicit HugeArena(size_t bytes) {
    constexpr size_t kHuge = size_t{2} << 20;
    size_ = (bytes + kHuge - 1) / kHuge * kHuge;
    base_ = static_cast<uint8_t*>(std::aligned_alloc(kHuge, size_));
    if (base_ == nullptr) throw std::bad_alloc();
    ::madvise(base_, size_, MADV_HUGEPAGE);
  }
  ~HugeArena() { std::free(base_); }
  HugeArena(const HugeArena&) = delete;
  HugeArena& operator=(const HugeArena&) = delete;

  uint8_t* take(size_t bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded > size_ - used_) throw std::bad_alloc();
    uint8_t* p = base_ + used_;
    used_ += rounded;
    return p;
  }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0, used_ = 0;
};

}  // namespace troupe::bench
