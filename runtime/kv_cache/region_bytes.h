// The byte buffer of a KV hand-off's region (runtime/kv_transfer/kv_handoff.h), of the
// staging memory a receiver leases for a sender's put (staging_leases.h), and of the paged
// KV pool itself (paged_kv.h).
//
// Why its own allocator: a receiver must never expose stale bytes (another request's KV)
// in a region it leases, so the region must start zeroed, and std::vector's resize(n)
// zero-fills with a memset, inside the transfer agent's reserve handler: slow for GB
// regions. This allocator hands out memory that is already zero instead: regions of a
// MiB and more come straight from fresh anonymous mmap pages (the kernel zeroes a page
// when it is first touched, here by the put that writes it), smaller ones from calloc.
// And it skips value-initialization (construct() without arguments default-initializes,
// which for bytes writes nothing), so resize(n) of a new buffer costs no memset.
//
// The price: a buffer grown by resize() *within its capacity* after a shrink shows its
// own earlier bytes again, not zeros. Never another buffer's: every allocation starts
// zeroed. Code here fills what it grows (insert, assign) or takes a fresh buffer.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace troupe::runtime {

template <typename T>
struct FreshZeroAllocator {
  using value_type = T;
  static constexpr size_t kMmapBytes = size_t(1) << 20;

  FreshZeroAllocator() = default;
  template <typename U>
  FreshZeroAllocator(const FreshZeroAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kMmapBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
    void* p = std::calloc(n == 0 ? 1 : n, sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= kMmapBytes)
      munmap(p, n * sizeof(T));
    else
      std::free(p);
  }

  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-init: the zeros the allocation brought stay
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  friend bool operator==(const FreshZeroAllocator&, const FreshZeroAllocator&) { return true; }
};

using RegionBytes = std::vector<uint8_t, FreshZeroAllocator<uint8_t>>;

}  // namespace troupe::runtime
