// DeviceContext on the CUDA runtime: a non-blocking stream and a cudaMemPool of the
// context's own (not the device's default pool, which every context would share),
// kept reserved once grown so steady-state steps allocate without the driver.
#include "kernels/cuda/device_context.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/check.h"
#include "kernels/exec_context.h"

#define CUDA_OK(expr)                                                                   \
  do {                                                                                  \
    const cudaError_t err_ = (expr);                                                    \
    TROUPE_CHECK(err_ == cudaSuccess, #expr, ": ", cudaGetErrorString(err_));           \
  } while (0)

namespace troupe::kernels::cuda {

bool built() { return true; }

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = std::string("no CUDA device: ") + cudaGetErrorString(err);
    (void)cudaGetLastError();  // clear the sticky-free error state
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device: cudaGetDeviceCount() found none";
  return n;
}

struct DeviceContext::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  cudaDeviceProp prop{};
};

DeviceContext::DeviceContext(int device) : impl_(std::make_unique<Impl>()) {
  std::string why;
  const int n = device_count(&why);
  TROUPE_CHECK(n > 0, "DeviceContext(", device, "): ", why);
  TROUPE_CHECK(device >= 0 && device < n, "DeviceContext: device ", device, " is outside [0, ",
               n, ")");
  impl_->device = device;
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaGetDeviceProperties(&impl_->prop, device));
  CUDA_OK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  CUDA_OK(cudaMemPoolCreate(&impl_->pool, &props));
  uint64_t keep = UINT64_MAX;  // never trim at synchronize: steps reuse the memory
  CUDA_OK(cudaMemPoolSetAttribute(impl_->pool, cudaMemPoolAttrReleaseThreshold, &keep));
}

DeviceContext::~DeviceContext() {
  // No throwing from a destructor: errors here are reported by the last synchronize().
  cudaSetDevice(impl_->device);
  if (impl_->stream) cudaStreamSynchronize(impl_->stream);
  if (impl_->pool) cudaMemPoolDestroy(impl_->pool);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

int DeviceContext::device() const { return impl_->device; }
CUstream_st* DeviceContext::stream() const { return impl_->stream; }
int DeviceContext::sm_count() const { return impl_->prop.multiProcessorCount; }
std::string DeviceContext::name() const { return impl_->prop.name; }

void* DeviceContext::allocate(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  CUDA_OK(cudaSetDevice(impl_->device));
  CUDA_OK(cudaMallocFromPoolAsync(&p, bytes, impl_->pool, impl_->stream));
  return p;
}

// No throw: DeviceBuffer calls this from its destructor. A failure here means the
// context is already broken, which the next synchronize() reports.
void DeviceContext::release(void* p) {
  if (p) (void)cudaFreeAsync(p, impl_->stream);
}

void DeviceContext::upload(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, impl_->stream));
}

void DeviceContext::download(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, impl_->stream));
}

void DeviceContext::fill_zero(void* dst, size_t bytes) {
  if (bytes) CUDA_OK(cudaMemsetAsync(dst, 0, bytes, impl_->stream));
}

void DeviceContext::synchronize() { CUDA_OK(cudaStreamSynchronize(impl_->stream)); }

DeviceContext& current_device(const char* kernel) {
  DeviceContext* dev = current_context().device();
  TROUPE_CHECK(dev != nullptr, kernel,
               ": Backend::Cuda needs a cuda::DeviceContext on the thread's ExecContext "
               "(ExecContext::set_device)");
  return *dev;
}

}  // namespace troupe::kernels::cuda
