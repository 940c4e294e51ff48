#include "model/llama_weights.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <unordered_map>

#include "kernels/check.h"
#include "kernels/q8_row_groups.h"
#include "model/gguf.h"
#include "model/gguf_dequant.h"
#include "model/row_groups_copy.h"
#include "model/weights.h"

namespace troupe::model {
namespace {

std::string ne_str(const std::vector<int64_t>& ne) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < ne.size(); ++i) os << (i ? ", " : "") << ne[i];
  return os.str() + ']';
}

// The tensor, checked against ne (ne[0] first, as GGUF stores it).
const GgufTensor& find_checked(const GgufFile& f, const std::string& name, const std::vector<int64_t>& ne) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) TROUPE_FAIL(f.source() << ": tensor '" << name << "' " << ne_str(ne) << " is missing");
  if (f.rewritten(*t))
    TROUPE_FAIL(f.source() << ": tensor '" << name << "' was regrouped in place by an earlier load of "
                              "this file (open the file again)");
  if (t->ne != ne)
    TROUPE_FAIL(f.source() << ": tensor '" << name << "' has shape " << ne_str(t->ne) << ", expected "
                           << ne_str(ne));
  return *t;
}

std::vector<float> read_f32(const GgufFile& f, const std::string& name, const std::vector<int64_t>& ne) {
  const GgufTensor& t = find_checked(f, name, ne);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  dequantize_ggml(t.type, t.data, t.numel(), out.data());
  return out;
}

// A [rows, cols] matrix; stacked (ne = [cols, rows, planes]) tensors are planes * rows rows.
LlamaMatrix read_matrix(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols,
                        int64_t planes = 0) {
  std::vector<int64_t> ne{cols, rows};
  if (planes > 0) ne.push_back(planes);
  const GgufTensor& t = find_checked(f, name, ne);
  LlamaMatrix m;
  m.full.rows = rows * (planes > 0 ? planes : 1);
  m.full.cols = cols;
  // F32, BF16 and F16 in place: GGUF's alignment (>= 1, a power of two) may be below an
  // element's size, so a tensor is only read in place when its bytes are element-aligned
  // (else widened to an owned f32 copy below, exactly).
  const auto aligned = [&](uintptr_t a) { return reinterpret_cast<uintptr_t>(t.data) % a == 0; };
  const bool f32_in_place = t.type == GgmlType::F32 && aligned(4);
  const bool half_in_place = (t.type == GgmlType::BF16 || t.type == GgmlType::F16) && aligned(2);
  if (f32_in_place || half_in_place) {
    m.full.format = f32_in_place                ? kernels::WeightFormat::F32
                    : t.type == GgmlType::BF16 ? kernels::WeightFormat::BF16
                                               : kernels::WeightFormat::F16;
    m.full.data = t.data;
    return m;
  }
  // q8_0 / q4_0 blocks stay in the mapping too: the GEMM multiplies them on int8 dot
  // products (kernels/ggml_blocks.h); their 34 / 18-byte blocks need no alignment.
  if (t.type == GgmlType::Q8_0 || t.type == GgmlType::Q4_0) {
    m.full.format = t.type == GgmlType::Q8_0 ? kernels::WeightFormat::Q8_0 : kernels::WeightFormat::Q4_0;
    m.full.data = t.data;
    return m;
  }
  m.owned.resize(static_cast<size_t>(t.numel()));
  dequantize_ggml(t.type, t.data, t.numel(), m.owned.data());
  m.full.format = kernels::WeightFormat::F32;
  m.full.data = m.owned.data();
  return m;
}

// qwen2moe's shared expert and its gate; the gate's row is [D] in llama.cpp's loader, which
// also takes a [D, 1] tensor (the HF [1, D] weight written as it is).
void read_shared_expert(const GgufFile& f, const LlamaConfig& c, const std::string& p,
                        LlamaLayerWeights& w) {
  const int64_t D = c.dim, Fs = c.shared_ffn_dim;
  w.shared_gate = read_matrix(f, p + "ffn_gate_shexp.weight", Fs, D);
  w.shared_up = read_matrix(f, p + "ffn_up_shexp.weight", Fs, D);
  w.shared_down = read_matrix(f, p + "ffn_down_shexp.weight", D, Fs);
  const std::string gate = p + "ffn_gate_inp_shexp.weight";
  const GgufTensor* t = f.find_tensor(gate);
  const bool column = t && t->ne == std::vector<int64_t>{D, 1};
  w.shared_gate_inp = read_f32(f, gate, column ? std::vector<int64_t>{D, 1} : std::vector<int64_t>{D});
}

LlamaLayerWeights read_layer(const GgufFile& f, const LlamaConfig& c, int64_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t D = c.dim, F = c.ffn_dim, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
  LlamaLayerWeights w;
  w.attn_norm = read_f32(f, p + "attn_norm.weight", {D});
  w.wq = read_matrix(f, p + "attn_q.weight", Q, D);
  w.wk = read_matrix(f, p + "attn_k.weight", KV, D);
  w.wv = read_matrix(f, p + "attn_v.weight", KV, D);
  w.wo = read_matrix(f, p + "attn_output.weight", D, Q);
  if (c.qkv_bias) {
    w.bq = read_f32(f, p + "attn_q.bias", {Q});
    w.bk = read_f32(f, p + "attn_k.bias", {KV});
    w.bv = read_f32(f, p + "attn_v.bias", {KV});
  }
  if (f.find_tensor(p + "attn_output.bias"))
    TROUPE_FAIL(f.source() << ": tensor '" << p << "attn_output.bias' is not supported (troupe adds "
                           "q/k/v biases only)");
  w.ffn_norm = read_f32(f, p + "ffn_norm.weight", {D});
  if (!c.is_moe()) {
    w.gate = read_matrix(f, p + "ffn_gate.weight", F, D);
    w.up = read_matrix(f, p + "ffn_up.weight", F, D);
    w.down = read_matrix(f, p + "ffn_down.weight", D, F);
    return w;
  }
  const int64_t E = c.experts;
  if (!f.find_tensor(p + "ffn_gate_exps.weight") && f.find_tensor(p + "ffn_gate.0.weight"))
    TROUPE_FAIL(f.source() << ": per-expert tensors (" << p << "ffn_gate.0.weight, ...) are the old "
                           "Mixtral layout; troupe reads the stacked " << p << "ffn_gate_exps.weight");
  w.router = read_matrix(f, p + "ffn_gate_inp.weight", E, D);
  w.gate = read_matrix(f, p + "ffn_gate_exps.weight", F, D, E);
  w.up = read_matrix(f, p + "ffn_up_exps.weight", F, D, E);
  w.down = read_matrix(f, p + "ffn_down_exps.weight", D, F, E);
  if (c.has_shared_expert()) read_shared_expert(f, c, p, w);
  return w;
}

// The matrices' row groups in a mapping of their own that `w` owns (pack_row_groups_copy);
// the GGUF bytes stay where they are.
void regroup_into_copy(LlamaWeights& w, const std::vector<LlamaMatrix*>& todo) {
  std::vector<kernels::WeightView*> views;
  for (LlamaMatrix* m : todo) views.push_back(&m->full);
  w.row_groups = pack_row_groups_copy(views, &w.row_groups_bytes);
}

// The matrices regrouped in the file's own bytes (kernels::regroup_q8_in_place): one copy
// of each; its view keeps only the groups (data null).
void regroup_in_place(const GgufFile& f, const std::vector<LlamaMatrix*>& todo) {
  if (todo.empty()) return;
  std::unordered_map<const void*, const GgufTensor*> tensor_at;
  for (const GgufTensor& t : f.tensors()) tensor_at.emplace(t.data, &t);
  f.edit_in_place([&] {
    for (LlamaMatrix* m : todo) {
      const GgufTensor& t = *tensor_at.at(m->full.data);
      m->full.groups = kernels::regroup_q8_in_place(m->full, f.writable_data(t));
      m->full.data = nullptr;
      f.mark_rewritten(t);
    }
  });
}

// Every Q8_0 / Q4_0 matrix a GEMM multiplies gets row groups (kernels/q8_row_groups.h)
// when this process's GEMM reads them (AVX-512 VNNI or AVX2). In place in the file's
// bytes where nothing else reads the GGUF rows and the rows are whole groups, so the
// matrix is held once; into a copy beside the GGUF bytes where not:
//   - the tied embedding (the logits' GEMM reads it, its lookup GGUF rows);
//   - rows not a multiple of 16 (the last group, padded, would outgrow the matrix);
//   - stacked experts whose slices (expert e at rows e · F or e · D) start inside a group
//     (such a slice reads GGUF blocks, model::row_slice);
//   - a file that is not this process's copy (TROUPE_GGUF_MMAP=1).
// TROUPE_Q8_ROW_GROUPS=0 leaves the groups out (to measure without them); =copy regroups
// every matrix into the copy (the route before in-place; the tests compare the two).
void regroup_q8_matrices(LlamaWeights& w, const GgufFile& f, const LlamaConfig& c) {
  if (!kernels::q8_row_groups_used()) return;
  const char* env = std::getenv("TROUPE_Q8_ROW_GROUPS");
  const std::string mode = env ? env : "";
  if (mode == "0") return;
  const bool in_place = mode != "copy" && f.rewritable();
  std::vector<LlamaMatrix*> copy, here;
  // slice_rows: the row multiple an expert slice starts at (stacked experts), else 0.
  auto add = [&](LlamaMatrix& m, bool gemm_only, int64_t slice_rows = 0) {
    if (m.empty() || !kernels::is_ggml_block(m.full.format)) return;
    const bool whole = m.full.rows % kernels::kGroupRows == 0 && slice_rows % kernels::kGroupRows == 0;
    (in_place && gemm_only && whole ? here : copy).push_back(&m);
  };
  if (w.tied_output()) add(w.token_embd, false);
  add(w.output, true);
  const int64_t F = c.is_moe() ? c.ffn_dim : 0, D = c.is_moe() ? c.dim : 0;
  for (LlamaLayerWeights& l : w.layers) {
    for (LlamaMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.router, &l.shared_gate, &l.shared_up, &l.shared_down})
      add(*m, true);
    add(l.gate, true, F);
    add(l.up, true, F);
    add(l.down, true, D);
  }
  regroup_into_copy(w, copy);
  regroup_in_place(f, here);
}

}  // namespace

kernels::WeightView LlamaMatrix::slice(int64_t r0, int64_t n) const { return row_slice(full, r0, n); }

kernels::ExpertWeights LlamaLayerWeights::expert(int64_t e, int64_t F, int64_t D) const {
  if (!expert_gate.empty())
    return {expert_gate[size_t(e)].view(), expert_up[size_t(e)].view(), expert_down[size_t(e)].view()};
  return {gate.slice(e * F, F), up.slice(e * F, F), down.slice(e * D, D)};
}

LlamaWeights load_llama_weights(const GgufFile& f, const LlamaConfig& c) {
  LlamaWeights w;
  w.token_embd = read_matrix(f, "token_embd.weight", c.vocab_size, c.dim);
  w.output_norm = read_f32(f, "output_norm.weight", {c.dim});
  if (f.find_tensor("output.bias"))
    TROUPE_FAIL(f.source() << ": tensor 'output.bias' is not supported (no bias on the logits)");
  if (f.find_tensor("output.weight")) w.output = read_matrix(f, "output.weight", c.vocab_size, c.dim);
  w.layers.reserve(static_cast<size_t>(c.layers));
  for (int64_t l = 0; l < c.layers; ++l) w.layers.push_back(read_layer(f, c, l));
  regroup_q8_matrices(w, f, c);
  return w;
}

}  // namespace troupe::model
