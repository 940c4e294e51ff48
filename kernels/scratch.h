// Scratch memory for the decode hot path without heap allocations in steady state
// (issue 13, low-latency path): scratch_vector<T> is a std::vector whose blocks come from
// the calling thread's ScratchPool, a cache of freed blocks by power-of-two size class.
// A block freed goes back to the pool of the thread that frees it; the next request of
// its class on that thread takes it again, so a forward pass that repeats its shapes
// (decode steps of a steady batch) reuses the same blocks every step and calls
// operator new never.
//
//   scratch_vector<float> q(rows * n);      // as std::vector, from the pool
//
// Limits: blocks above kMaxPooledBytes (a large prefill's activations) are allocated and
// freed as usual; a pool keeps at most kMaxCachedBytes of free blocks (more go back to
// the system). A pool frees what it holds when its thread ends. Use it for buffers that live within a step; values
// that outlive one (a plan, outputs) stay std::vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace troupe::kernels {

class ScratchPool {
 public:
  static constexpr size_t kMinBytes = 64;
  static constexpr size_t kMaxPooledBytes = size_t{64} << 20;
  static constexpr size_t kMaxCachedBytes = size_t{256} << 20;

  // The calling thread's pool.
  static ScratchPool& local();

  void* allocate(size_t bytes);
  void deallocate(void* p, size_t bytes) noexcept;

  // Blocks taken from the operating system / given back (tests, diagnostics).
  int64_t fresh_blocks() const { return fresh_; }

  ScratchPool() = default;  // a pool of one's own (tests); local() is the thread's
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr int kClasses = 21;  // 64 B .. 64 MiB
  FreeBlock* free_[kClasses] = {};
  size_t cached_bytes_ = 0;
  int64_t fresh_ = 0;
  bool thread_pool_ = false;  // local()'s: its end ends the thread's pooling
};

void* scratch_allocate(size_t bytes);
void scratch_deallocate(void* p, size_t bytes) noexcept;

template <class T>
struct ScratchAllocator {
  using value_type = T;
  ScratchAllocator() noexcept = default;
  template <class U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(scratch_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { scratch_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const ScratchAllocator<U>&) const noexcept { return true; }
};

template <class T>
using scratch_vector = std::vector<T, ScratchAllocator<T>>;

// The same pool, but elements a resize adds are default-initialised (for float: left as
// they are, no pass over the memory) instead of zeroed: for buffers a kernel writes in
// full before anything reads them (a GEMM's y, an expert's activations).
template <class T>
struct ScratchAllocatorNoInit : ScratchAllocator<T> {
  template <class U>
  struct rebind {
    using other = ScratchAllocatorNoInit<U>;
  };
  ScratchAllocatorNoInit() noexcept = default;
  template <class U>
  ScratchAllocatorNoInit(const ScratchAllocatorNoInit<U>&) noexcept {}  // NOLINT: rebinding
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <class T>
using scratch_buffer = std::vector<T, ScratchAllocatorNoInit<T>>;

}  // namespace troupe::kernels
