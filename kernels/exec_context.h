// Where kernels run: a thread pool of their own (own workers, own job slot) and a thread
// count, so R ranks of one process never wait on each other's kernels. A rank binds its
// context to the thread that runs its steps (ScopedExecContext); every kernel called on
// that thread then runs parallel_for on it (kernels/parallel.h). Threads that bind none
// use the process's default context, sized by set_num_threads().
//
//   kernels::ExecContext ctx(2);                 // the rank's: 2 kernel threads
//   { kernels::ScopedExecContext bind(ctx); forward.run(inputs); }
//
// Per-thread kernel scratch (thread_local in the kernels) is per pool worker, so it is
// the context's too. A context may also pin the backend its kernels dispatch to (a rank on
// a device; tests), over the process-wide setting (kernels/dispatch.h).
#pragma once

#include <cstdint>
#include "kernels/function_ref.h"
#include <memory>
#include <optional>

#include "kernels/dispatch.h"

namespace troupe::kernels {

namespace cuda { class DeviceContext; }

class ExecContext {
 public:
  // threads <= 0: the process default (set_num_threads, else all hardware threads),
  // read at each call, so it follows set_num_threads.
  explicit ExecContext(int threads = 0);
  ~ExecContext();
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;

  int threads() const;
  // The backend kernels called under this context dispatch to; nullopt: the process's.
  std::optional<Backend> backend() const { return backend_; }
  void set_backend(std::optional<Backend> b) { backend_ = b; }
  // The rank's GPU for Backend::Cuda kernels; null: none (they throw).
  cuda::DeviceContext* device() const { return device_; }
  void set_device(cuda::DeviceContext* d) { device_ = d; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n), on this context's workers.
  void parallel_for(int64_t n, int64_t min_chunk, FunctionRef<void(int64_t, int64_t)> fn);

  struct Pool;

 private:
  int threads_;
  std::optional<Backend> backend_;
  cuda::DeviceContext* device_ = nullptr;
  std::unique_ptr<Pool> pool_;
};

// The context bound to this thread, else the process default.
ExecContext& current_context();
// The context bound to this thread (ScopedExecContext), or nullptr.
const ExecContext* bound_context();

// Binds ctx to the calling thread for the scope (nesting restores the outer binding).
class ScopedExecContext {
 public:
  explicit ScopedExecContext(ExecContext& ctx);
  ~ScopedExecContext();
  ScopedExecContext(const ScopedExecContext&) = delete;
  ScopedExecContext& operator=(const ScopedExecContext&) = delete;

 private:
  ExecContext* saved_;
};

}  // namespace troupe::kernels
