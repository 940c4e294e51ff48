// A rank's GPU: the device id, one stream every Backend::Cuda kernel of the rank runs
// on, and a stream-ordered memory pool of its own for weights, caches and scratch.
// Nothing here is process-wide: R ranks of one process hold R contexts (one device
// each, or several on one device), and a rank binds its context to the thread that
// runs its steps through its ExecContext (kernels/exec_context.h):
//
//   kernels::cuda::DeviceContext gpu(0);
//   kernels::ExecContext ctx(1);
//   ctx.set_device(&gpu);
//   ctx.set_backend(kernels::Backend::Cuda);
//   { kernels::ScopedExecContext bind(ctx); kernels::gemm(p); }   // p's pointers: device
//
// Plain C++ (no CUDA headers), so the rest of the tree includes it either way; built
// without CUDA (TROUPE_CUDA=OFF or no nvcc) device_count() is 0 and the rest throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace troupe::kernels::cuda {

// True when this build has the CUDA backend (kernels/cuda/*.cu compiled in).
bool built();
// Usable devices; 0 when there are none, with the reason in *why (no driver, no GPU,
// built without CUDA) for skip messages.
int device_count(std::string* why = nullptr);

class DeviceContext {
 public:
  explicit DeviceContext(int device);  // creates the stream and the pool on `device`
  ~DeviceContext();                    // waits for the stream, frees the pool
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const;
  CUstream_st* stream() const;
  int sm_count() const;
  std::string name() const;  // the device's, e.g. "NVIDIA H200"

  // Stream-ordered pool memory: usable by work queued on stream() after the call,
  // returned once the work queued before release() is done. 256-byte aligned.
  void* allocate(size_t bytes);
  void release(void* p);
  // Copies queued on stream(); host memory must stay valid until synchronize().
  void upload(void* device_dst, const void* host_src, size_t bytes);
  void download(void* host_dst, const void* device_src, size_t bytes);
  void fill_zero(void* device_dst, size_t bytes);
  void synchronize();  // waits for the stream; throws on an asynchronous kernel error

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The DeviceContext of the calling thread's ExecContext; throws troupe::Error naming
// the kernel when there is none (Backend::Cuda selected without a device bound).
DeviceContext& current_device(const char* kernel);

// An owning typed buffer in a context's pool (count elements of T).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceContext& ctx, size_t count)
      : ctx_(&ctx), count_(count),
        ptr_(count ? static_cast<T*>(ctx.allocate(count * sizeof(T))) : nullptr) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = o.ctx_, count_ = o.count_, ptr_ = o.ptr_;
      o.ptr_ = nullptr, o.count_ = 0;
    }
    return *this;
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  void reset() {
    if (ptr_) ctx_->release(ptr_);
    ptr_ = nullptr, count_ = 0;
  }

 private:
  DeviceContext* ctx_ = nullptr;
  size_t count_ = 0;
  T* ptr_ = nullptr;
};

}  // namespace troupe::kernels::cuda
