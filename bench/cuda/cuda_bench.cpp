// troupe_cuda_bench: the CUDA kernels at decode and prefill shapes of a V4.1-Flash-class
// model (MODEL.md: H = 5120, I = 2304, nE = 384, D = 512), each against a ceiling
// measured in the same run:
//   copy bandwidth  device-to-device cudaMemcpy of 2 GiB, (read + written bytes) / time
//   matrix peak     cuBLAS bf16 GEMM 8192^3 (when the build found cuBLAS), TFLOP/s
// Decode lines report the bytes they must stream (weights, keys) / time as % of the copy
// bandwidth; prefill lines report TFLOP/s as % of the bf16 matrix peak (the kernels are
// SIMT f32 today, so that % is low by design; the f32 SIMT figure is the datasheet's
// ~67 TFLOP/s). Median of the repetitions, with min and max. Figures, never pass/fail.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#if defined(TROUPE_BENCH_CUBLAS)
#include <cublas_v2.h>
#endif

#include "kernels/attention.h"
#include "kernels/cuda/device_context.h"
#include "kernels/exec_context.h"
#include "kernels/gemm.h"
#include "kernels/moe.h"

namespace {

using namespace troupe::kernels;

#define OK(expr)                                                                   \
  do {                                                                             \
    const cudaError_t e_ = (expr);                                                 \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(e_));             \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

struct Timing {
  double median_ms, min_ms, max_ms;
};

// Times fn on the stream: 2 warm-up calls, then `reps` calls each between two events.
Timing time_it(cudaStream_t s, int reps, const std::function<void()>& fn) {
  cudaEvent_t a, b;
  OK(cudaEventCreate(&a));
  OK(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    OK(cudaEventRecord(a, s));
    fn();
    OK(cudaEventRecord(b, s));
    OK(cudaEventSynchronize(b));
    float t = 0;
    OK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  OK(cudaEventDestroy(a));
  OK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back()};
}

// Device memory filled with a byte pattern that decodes to finite, modest values
// (0x38 = E4M3 1.0, nibbles 0x2 = E2M1 1.0, scale code 0x70 = 2^-15).
void* device_fill(cuda::DeviceContext& dev, size_t bytes, int value) {
  void* p = dev.allocate(bytes);
  OK(cudaMemsetAsync(p, value, bytes, dev.stream()));
  return p;
}

struct Ceilings {
  double copy_gbs = 0;   // GB/s
  double matrix_tf = 0;  // TFLOP/s, 0 when not measured
};

Ceilings measure_ceilings(cuda::DeviceContext& dev) {
  Ceilings c;
  const size_t bytes = size_t(2) << 30;
  void* a = device_fill(dev, bytes, 0);
  void* b = device_fill(dev, bytes, 0);
  const Timing t = time_it(dev.stream(), 10, [&] {
    OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, dev.stream()));
  });
  c.copy_gbs = 2.0 * bytes / (t.median_ms * 1e-3) / 1e9;
  std::printf("ceiling copy bandwidth: %.0f GB/s (2 GiB D2D, median of 10, min %.3f ms max %.3f ms)\n",
              c.copy_gbs, t.min_ms, t.max_ms);
  dev.release(a);
  dev.release(b);
#if defined(TROUPE_BENCH_CUBLAS)
  const int n = 8192;
  cublasHandle_t h;
  if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
    cublasSetStream(h, dev.stream());
    void* A = device_fill(dev, size_t(n) * n * 2, 0x3c);
    void* B = device_fill(dev, size_t(n) * n * 2, 0x3c);
    void* C = device_fill(dev, size_t(n) * n * 4, 0);
    const float one = 1, zero = 0;
    const Timing g = time_it(dev.stream(), 10, [&] {
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16BF, n, B, CUDA_R_16BF,
                   n, &zero, C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    c.matrix_tf = 2.0 * n * n * double(n) / (g.median_ms * 1e-3) / 1e12;
    std::printf("ceiling bf16 matrix (cuBLAS %d^3): %.0f TFLOP/s (median of 10)\n", n, c.matrix_tf);
    dev.release(A), dev.release(B), dev.release(C);
    cublasDestroy(h);
  }
#endif
  if (c.matrix_tf == 0) std::printf("ceiling bf16 matrix: not measured (built without cuBLAS)\n");
  return c;
}

void report(const char* what, const Timing& t, double bytes, double flops, const Ceilings& c) {
  const double s = t.median_ms * 1e-3;
  std::printf("%-44s %9.3f ms [%.3f, %.3f]  %8.0f GB/s (%5.1f%% of copy)  %7.2f TFLOP/s",
              what, t.median_ms, t.min_ms, t.max_ms, bytes / s / 1e9,
              100.0 * bytes / s / 1e9 / c.copy_gbs, flops / s / 1e12);
  if (c.matrix_tf > 0) std::printf(" (%5.1f%% of bf16 peak)", 100.0 * flops / s / 1e12 / c.matrix_tf);
  std::printf("\n");
}

size_t weight_bytes(WeightFormat f, int64_t rows, int64_t cols) {
  return f == WeightFormat::FP4 ? rows * cols / 2 + rows * cols / 32 : rows * cols + rows * cols / 32;
}

WeightView device_weight(cuda::DeviceContext& dev, WeightFormat f, int64_t rows, int64_t cols) {
  const size_t data = f == WeightFormat::FP4 ? rows * cols / 2 : rows * cols;
  return {f, rows, cols, device_fill(dev, data, f == WeightFormat::FP4 ? 0x22 : 0x38),
          static_cast<const uint8_t*>(device_fill(dev, rows * ((cols + 31) / 32), 0x70))};
}

void bench_gemm(cuda::DeviceContext& dev, const Ceilings& c) {
  struct Shape { WeightFormat f; int64_t n, k; };
  const Shape shapes[] = {{WeightFormat::FP8, 12288, 5120}, {WeightFormat::FP4, 24576, 5120}};
  for (const Shape& sh : shapes) {
    const WeightView w = device_weight(dev, sh.f, sh.n, sh.k);
    for (int64_t m : {1, 2, 4, 8, 16, 64, 4096}) {
      float* x = static_cast<float*>(device_fill(dev, m * sh.k * 4, 0));
      float* y = static_cast<float*>(device_fill(dev, m * sh.n * 4, 0));
      GemmParams p;
      p.x = x, p.w = w, p.y = y, p.m = m;
      const Timing t = time_it(dev.stream(), m >= 4096 ? 3 : 20, [&] { gemm(p); });
      char what[96];
      std::snprintf(what, sizeof what, "gemm %s N=%ld K=%ld M=%ld", to_string(sh.f), long(sh.n),
                    long(sh.k), long(m));
      report(what, t, double(weight_bytes(sh.f, sh.n, sh.k)) + 4.0 * m * (sh.k + sh.n),
             2.0 * m * sh.n * sh.k, c);
      dev.release(x), dev.release(y);
    }
  }
}

void bench_attention(cuda::DeviceContext& dev, const Ceilings& c) {
  const int64_t heads = 64, dim = 512, keys = 128 + 512;  // window + selected rows
  for (int64_t m : {1, 64, 1024}) {
    float* rows = static_cast<float*>(device_fill(dev, m * keys * dim * 4, 0));
    std::vector<const float*> ptr(m * keys);
    for (int64_t i = 0; i < m * keys; ++i) ptr[i] = rows + i * dim;
    auto* dptr = static_cast<const float**>(dev.allocate(ptr.size() * sizeof(float*)));
    dev.upload(dptr, ptr.data(), ptr.size() * sizeof(float*));
    float* q = static_cast<float*>(device_fill(dev, m * heads * dim * 4, 0));
    float* out = static_cast<float*>(device_fill(dev, m * heads * dim * 4, 0));
    float* sink = static_cast<float*>(device_fill(dev, heads * 4, 0));
    AttentionParams p;
    p.q = q, p.keys = dptr, p.sink = sink, p.out = out;
    p.m = m, p.heads = heads, p.dim = dim, p.max_keys = keys, p.scale = 0.04f;
    const Timing t = time_it(dev.stream(), 10, [&] { attention(p); });
    char what[96];
    std::snprintf(what, sizeof what, "attention m=%ld heads=%ld dim=%ld keys=%ld", long(m),
                  long(heads), long(dim), long(keys));
    report(what, t, 4.0 * m * keys * dim, 4.0 * m * heads * keys * dim, c);
    dev.release(rows), dev.release(dptr), dev.release(q), dev.release(out), dev.release(sink);
  }
}

void bench_moe(cuda::DeviceContext& dev, const Ceilings& c) {
  const int64_t hidden = 5120, inter = 2304, experts = 384, top_k = 6;
  std::vector<ExpertWeights> table(experts);
  for (auto& e : table)
    e = {device_weight(dev, WeightFormat::FP4, inter, hidden),
         device_weight(dev, WeightFormat::FP4, inter, hidden),
         device_weight(dev, WeightFormat::FP4, hidden, inter)};
  auto* dtable = static_cast<ExpertWeights*>(dev.allocate(experts * sizeof(ExpertWeights)));
  dev.upload(dtable, table.data(), experts * sizeof(ExpertWeights));
  for (int64_t m : {1, 16, 64, 2048}) {
    std::vector<int32_t> pick(m * top_k);
    for (int64_t i = 0; i < m * top_k; ++i) pick[i] = int32_t((i * 61) % experts);  // spread
    std::vector<bool> used(experts);
    for (int32_t e : pick) used[e] = true;
    const int64_t active = std::count(used.begin(), used.end(), true);
    auto* dpick = static_cast<int32_t*>(dev.allocate(pick.size() * 4));
    dev.upload(dpick, pick.data(), pick.size() * 4);
    float* x = static_cast<float*>(device_fill(dev, m * hidden * 4, 0));
    float* out = static_cast<float*>(device_fill(dev, m * hidden * 4, 0));
    float* w = static_cast<float*>(device_fill(dev, m * top_k * 4, 0));
    MoeExpertsParams p;
    p.x = x, p.pick = dpick, p.weight = w, p.experts = dtable, p.out = out;
    p.m = m, p.hidden = hidden, p.inter = inter, p.experts_count = experts, p.top_k = top_k;
    p.swiglu_limit = 7.0f;
    const Timing t = time_it(dev.stream(), m >= 2048 ? 3 : 10, [&] { moe_experts(p); });
    char what[96];
    std::snprintf(what, sizeof what, "moe_experts FP4 m=%ld top_k=%ld (%ld experts)", long(m),
                  long(top_k), long(active));
    report(what, t, 3.0 * active * weight_bytes(WeightFormat::FP4, inter, hidden),
           6.0 * m * top_k * hidden * inter, c);
    dev.release(dpick), dev.release(x), dev.release(out), dev.release(w);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::printf("SKIP troupe_cuda_bench: %s\n", why.c_str());
    return 77;
  }
  const std::string only = argc > 1 ? argv[1] : "";
  cuda::DeviceContext gpu(0);
  ExecContext ctx(1);
  ctx.set_device(&gpu);
  ctx.set_backend(Backend::Cuda);
  ScopedExecContext bind(ctx);
  std::printf("troupe_cuda_bench on %s (%d SMs)\n", gpu.name().c_str(), gpu.sm_count());
  const Ceilings c = measure_ceilings(gpu);
  if (only.empty() || only == "gemm") bench_gemm(gpu, c);
  if (only.empty() || only == "attention") bench_attention(gpu, c);
  if (only.empty() || only == "moe") bench_moe(gpu, c);
  gpu.synchronize();
  return 0;
}
