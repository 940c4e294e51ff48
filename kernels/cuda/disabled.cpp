// Built without CUDA (TROUPE_CUDA=OFF, or no nvcc): the backend's entry points exist so
// the dispatch links, and each says why it cannot run.
#include "kernels/attention.h"
#include "kernels/check.h"
#include "kernels/cuda/device_context.h"
#include "kernels/gemm.h"
#include "kernels/indexer.h"
#include "kernels/moe.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"

namespace troupe::kernels::cuda {
namespace {
constexpr const char* kWhy = "this build has no CUDA backend (TROUPE_CUDA=OFF or no nvcc)";
[[noreturn]] void unavailable(const char* what) { TROUPE_FAIL(what << ": " << kWhy); }
}  // namespace

bool built() { return false; }
int device_count(std::string* why) {
  if (why) *why = kWhy;
  return 0;
}

struct DeviceContext::Impl {};
DeviceContext::DeviceContext(int) { unavailable("DeviceContext"); }
DeviceContext::~DeviceContext() = default;
int DeviceContext::device() const { unavailable("DeviceContext::device"); }
CUstream_st* DeviceContext::stream() const { unavailable("DeviceContext::stream"); }
int DeviceContext::sm_count() const { unavailable("DeviceContext::sm_count"); }
std::string DeviceContext::name() const { unavailable("DeviceContext::name"); }
void* DeviceContext::allocate(size_t) { unavailable("DeviceContext::allocate"); }
void DeviceContext::release(void*) { unavailable("DeviceContext::release"); }
void DeviceContext::upload(void*, const void*, size_t) { unavailable("DeviceContext::upload"); }
void DeviceContext::download(void*, const void*, size_t) { unavailable("DeviceContext::download"); }
void DeviceContext::fill_zero(void*, size_t) { unavailable("DeviceContext::fill_zero"); }
void DeviceContext::synchronize() { unavailable("DeviceContext::synchronize"); }
DeviceContext& current_device(const char* kernel) { unavailable(kernel); }

void gemm(const GemmParams&) { unavailable("cuda::gemm"); }
void rms_norm(const RmsNormParams&) { unavailable("cuda::rms_norm"); }
void softmax(const SoftmaxParams&) { unavailable("cuda::softmax"); }
void rope(const RopeParams&) { unavailable("cuda::rope"); }
void sample(const SampleParams&) { unavailable("cuda::sample"); }
void attention(const AttentionParams&) { unavailable("cuda::attention"); }
void indexer_score(const IndexerScoreParams&) { unavailable("cuda::indexer_score"); }
int64_t topk(const float*, int64_t, int64_t, int32_t*) { unavailable("cuda::topk"); }
void moe_gate(const MoeGateParams&) { unavailable("cuda::moe_gate"); }
void moe_experts(const MoeExpertsParams&) { unavailable("cuda::moe_experts"); }
void moe_expert_rows(const MoeExpertRowsParams&) { unavailable("cuda::moe_expert_rows"); }
void moe_combine(const MoeCombineParams&) { unavailable("cuda::moe_combine"); }

}  // namespace troupe::kernels::cuda
