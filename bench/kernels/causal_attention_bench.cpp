// Causal GQA attention at decode, the LLaMA family's (kernels/causal_attention.h), at the
// peer bench's shape (16 heads over 4 KV heads, head_dim 64): B one-token sequences, each
// over `context` keys held as the engine pages them, a token's K and V (2 KiB) in blocks of 64
// rows scattered over the arena. Each call reads a fresh set of blocks (calls rotate over
// >= 256 MiB of them), so its K / V bytes come from DRAM, as a long context's do; judged
// against DRAM read bandwidth at those bytes (the goal: each KV byte read once a step,
// at the machine's bandwidth).
//
// Two layouts of the same bytes. The ".../head-major/..." cases hold them as the engine's
// paged blocks do (model/llama_forward.cpp: ckv_pieces): within each block of 64 rows,
// KV head 0's 64 K rows side by side, then its 64 V rows, then head 1's, ..., so a
// (sequence, KV head) item reads one 32 KiB stretch a block. The others hold whole
// [K | V] rows one after another (the engine's blocks before), where an item reads a
// 256-byte slice of each 2 KiB row.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/bench.h"
#include "bench/kernels/huge_arena.h"
#include "kernels/causal_attention.h"
#include "kernels/dispatch.h"

namespace troupe::bench {
namespace {

constexpr int64_t kHeads = 16, kHeadDim = 64, kBlockRows = 64;

// kv_heads: 4 (the peer shape), or 1 (multi-query attention: one KV head, so one item
// per sequence unless its keys are split).
void bench_decode(State& s, kernels::CpuPath path, int64_t seqs, int64_t context, bool head_major,
                  int64_t kv_heads) {
  if (!kernels::cpu_supports(path)) return s.skip(kernels::missing_reason(path));
  kernels::ScopedCpuPath scoped(path);
  const int64_t row_floats = 2 * kv_heads * kHeadDim;  // a token's K and V
  const int64_t row_bytes = row_floats * 4, call_rows = seqs * context;
  const int64_t sets = std::max<int64_t>(2, (int64_t{256} << 20) / (call_rows * row_bytes) + 1);
  const int64_t blocks = sets * seqs * ((context + kBlockRows - 1) / kBlockRows);
  HugeArena arena(blocks * kBlockRows * row_bytes);
  auto* base = reinterpret_cast<float*>(arena.take(blocks * kBlockRows * row_bytes));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t i = 0; i < blocks * kBlockRows * row_floats; i += 7) base[i] = nd(rng);
  // The blocks in a shuffled order, as a pool hands them out over time.
  std::vector<int64_t> order(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) order[size_t(b)] = b;
  std::shuffle(order.begin(), order.end(), rng);
  // Per call sequence its K and V row pointers (KV head 0's slice), `context` each.
  const int64_t run = kBlockRows * kHeadDim, head_stride = head_major ? 2 * run : 0;
  std::vector<const float*> krows(size_t(sets * call_rows)), vrows(krows.size());
  int64_t next_block = 0;
  for (int64_t at = 0; at < sets * call_rows; ++at) {
    const int64_t j = at % context;
    if (j % kBlockRows == 0) ++next_block;
    const float* block = base + order[size_t(next_block - 1)] * kBlockRows * row_floats;
    krows[size_t(at)] = block + (j % kBlockRows) * (head_major ? kHeadDim : row_floats);
    vrows[size_t(at)] = krows[size_t(at)] + (head_major ? run : kv_heads * kHeadDim);
  }
  std::vector<float> qv(size_t(seqs * kHeads * kHeadDim)), out(qv.size());
  for (float& x : qv) x = nd(rng);
  std::vector<std::vector<kernels::CausalAttentionSeq>> calls(static_cast<size_t>(sets));
  for (int64_t set = 0; set < sets; ++set)
    for (int64_t q = 0; q < seqs; ++q) {
      const size_t at = size_t((set * seqs + q) * context);
      calls[size_t(set)].push_back({qv.data() + q * kHeads * kHeadDim, &krows[at], &vrows[at],
                                    out.data() + q * kHeads * kHeadDim, 1, context - 1,
                                    head_stride});
    }
  s.shape = "B=" + std::to_string(seqs) + " context " + std::to_string(context) + ", 16/" +
            std::to_string(kv_heads) + " heads x 64";
  s.bytes = double(call_rows) * row_bytes;
  s.flops = 4.0 * seqs * kHeads * context * kHeadDim;
  s.bound = Bound::Memory;
  size_t next = 0;
  s.run([&] {
    const auto& c = calls[next++ % calls.size()];
    kernels::CausalAttentionParams p;
    p.seqs = c.data();
    p.num_seqs = seqs;
    p.heads = kHeads;
    p.kv_heads = kv_heads;
    p.head_dim = kHeadDim;
    p.scale = 0.125f;
    kernels::causal_attention(p);
  });
}

[[maybe_unused]] const int kRegistered = [] {
  for (kernels::CpuPath path : {kernels::CpuPath::Avx512, kernels::CpuPath::Avx2})
    for (int64_t seqs : {1, 8})
      for (int64_t context : {512, 2048})
        for (bool head_major : {false, true}) {
          add("causal/decode/b" + std::to_string(seqs) + "/ctx" + std::to_string(context) +
                  (head_major ? "/head-major/" : "/") + kernels::to_string(path),
              [=](State& s) { bench_decode(s, path, seqs, context, head_major, 4); });
        }
  // One sequence, one KV head: its decode is one item.
  for (kernels::CpuPath path : {kernels::CpuPath::Avx512, kernels::CpuPath::Avx2})
    for (int64_t context : {512, 2048, 8192})
      add("causal/decode/b1/ctx" + std::to_string(context) + "/mqa/" + kernels::to_string(path),
          [=](State& s) { bench_decode(s, path, 1, context, true, 1); });
  return 0;
}();

}  // namespace
}  // namespace troupe::bench
