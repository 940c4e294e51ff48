// The kernels under CUDA graph capture (how decode is meant to run): a step-like
// sequence (decode GEMM, RMSNorm in place, RoPE, attention with its pool scratch) is run
// once directly, then captured on the context's stream, instantiated and replayed into
// poisoned outputs; the replay must give the direct run's bits. Stream-ordered pool
// allocations become graph memory nodes, so the scratch must work there too.
#include <cuda_runtime.h>

#include <bit>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "tests/cuda/check.h"
#include "tests/cuda/check_weights.h"

namespace troupe::cuda_check {

void check_graph(DeviceContext& dev, Report& rep) {
  rep.begin_case("graph capture: gemm -> rms_norm -> rope -> attention, replay == direct");
  const int64_t m = 4, n = 256, k = 512, heads = 4, dim = n / heads, keys = 40;
  const HostWeight w = make_weight(kernels::WeightFormat::FP4, n, k, 11);
  const DeviceWeight dw(dev, w);
  const auto dx = upload(dev, normal(m * k, 12));
  const auto dnorm = upload(dev, normal(n, 13));
  const std::vector<int64_t> pos = {3, 9, 200, 4095};
  const auto dpos = upload(dev, pos);
  const std::vector<double> freqs = kernels::rope_frequencies(10000.0, 32, {});
  const auto dfreq = upload(dev, freqs);
  const auto dpool = upload(dev, normal(keys * dim, 14));
  std::vector<const float*> rows(m * keys);
  for (int64_t i = 0; i < m * keys; ++i) rows[i] = dpool.get() + (i * 7 % keys) * dim;
  const auto drows = upload(dev, rows);
  const auto dsink = upload(dev, normal(heads, 15));
  auto dy = upload(dev, std::vector<float>(m * n, kNaN));
  auto dout = upload(dev, std::vector<float>(m * n, kNaN));

  const auto step = [&] {
    kernels::GemmParams g;
    g.x = dx.get(), g.w = dw.view(), g.y = dy.get(), g.m = m;
    kernels::gemm(g);
    kernels::RmsNormParams r;
    r.x = dy.get(), r.weight = dnorm.get(), r.out = dy.get(), r.rows = m, r.n = n;
    kernels::rms_norm(r);
    kernels::RopeParams rp;
    rp.x = dy.get(), rp.count = m * heads, rp.n = dim, rp.rope_dim = 32;
    rp.positions = dpos.get(), rp.per_position = heads, rp.freqs = dfreq.get();
    kernels::rope(rp);
    kernels::AttentionParams a;
    a.q = dy.get(), a.keys = drows.get(), a.sink = dsink.get(), a.out = dout.get();
    a.m = m, a.heads = heads, a.dim = dim, a.max_keys = keys, a.scale = 0.125f;
    kernels::attention(a);
  };
  step();
  const std::vector<float> direct = download(dev, dout);

  const std::vector<float> poison(m * n, kNaN);
  dev.upload(dy.get(), poison.data(), poison.size() * sizeof(float));
  dev.upload(dout.get(), poison.data(), poison.size() * sizeof(float));
  dev.synchronize();
  cudaStream_t s = dev.stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool captured = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (captured) {
    step();
    captured = cudaStreamEndCapture(s, &graph) == cudaSuccess &&
               cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  rep.check(captured, std::string("capture and instantiate: ") + cudaGetErrorString(cudaGetLastError()));
  if (captured) {
    rep.check(cudaGraphLaunch(exec, s) == cudaSuccess, "graph launch");
    const std::vector<float> replay = download(dev, dout);
    for (size_t i = 0; i < replay.size(); ++i)
      rep.check(std::bit_cast<uint32_t>(replay[i]) == std::bit_cast<uint32_t>(direct[i]),
                "out[" + std::to_string(i) + "] replay differs from the direct run");
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  rep.end_case();
}

}  // namespace troupe::cuda_check
