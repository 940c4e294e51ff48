#include "kernels/scratch.h"

#include <bit>
#include <utility>

namespace troupe::kernels {
namespace {

// A thread's pool is gone while its thread_local destructors run after it; blocks
// freed then go straight back to the system.
thread_local bool t_pool_dead = false;

int size_class(size_t bytes) {
  const size_t b = bytes < ScratchPool::kMinBytes ? ScratchPool::kMinBytes : bytes;
  return std::bit_width(b - 1) - 6;  // 64 B -> 0, 65..128 B -> 1, ...
}

size_t class_bytes(int c) { return ScratchPool::kMinBytes << c; }

// Through operator new, so a count of heap allocations (the decode allocation test)
// sees every block the pools take.
void* system_allocate(size_t bytes) { return ::operator new(bytes); }
void system_free(void* p) noexcept { ::operator delete(p); }

}  // namespace

ScratchPool& ScratchPool::local() {
  thread_local ScratchPool pool;
  pool.thread_pool_ = true;
  return pool;
}

ScratchPool::~ScratchPool() {
  for (FreeBlock*& head : free_)
    while (head != nullptr) system_free(std::exchange(head, head->next));
  if (thread_pool_) t_pool_dead = true;
}

void* ScratchPool::allocate(size_t bytes) {
  if (bytes > kMaxPooledBytes) return system_allocate(bytes);
  const int c = size_class(bytes);
  if (FreeBlock* b = free_[c]) {
    free_[c] = b->next;
    cached_bytes_ -= class_bytes(c);
    return b;
  }
  ++fresh_;
  return system_allocate(class_bytes(c));
}

void ScratchPool::deallocate(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  // The block holds its whole class: that is what keeping it costs.
  const int c = bytes > kMaxPooledBytes ? -1 : size_class(bytes);
  if (c < 0 || cached_bytes_ + class_bytes(c) > kMaxCachedBytes) {
    system_free(p);
    return;
  }
  free_[c] = new (p) FreeBlock{free_[c]};
  cached_bytes_ += class_bytes(c);
}

void* scratch_allocate(size_t bytes) {
  if (t_pool_dead) return system_allocate(bytes > ScratchPool::kMaxPooledBytes ? bytes : class_bytes(size_class(bytes)));
  return ScratchPool::local().allocate(bytes);
}

void scratch_deallocate(void* p, size_t bytes) noexcept {
  if (t_pool_dead) {
    system_free(p);
    return;
  }
  ScratchPool::local().deallocate(p, bytes);
}

}  // namespace troupe::kernels
