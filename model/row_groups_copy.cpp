#include "model/row_groups_copy.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "kernels/q8_row_groups.h"
#include "model/weights.h"

namespace troupe::model {

std::shared_ptr<uint8_t> pack_row_groups_copy(std::span<kernels::WeightView* const> views, int64_t* bytes,
                                              const std::function<void(kernels::WeightView&)>& packed) {
  auto share = [](const kernels::WeightView* v) { return size_t(kernels::q8_row_groups_bytes(*v) + 63) / 64 * 64; };
  size_t total = 0;
  for (const kernels::WeightView* v : views) total += share(v);
  if (bytes) *bytes = 0;
  if (total == 0) return nullptr;
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t mapped = (total + kHuge - 1) / kHuge * kHuge;
  void* addr = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) return nullptr;
  ::madvise(addr, mapped, MADV_HUGEPAGE);  // advice only: without THP this is plain memory
  std::shared_ptr<uint8_t> owner(static_cast<uint8_t*>(addr), [mapped](uint8_t* p) { ::munmap(p, mapped); });
  uint8_t* next = owner.get();
  for (kernels::WeightView* v : views) {
    kernels::pack_q8_row_groups(*v, next);
    v->groups = next;
    next += share(v);
    if (packed) packed(*v);
  }
  if (bytes) *bytes = int64_t(total);
  return owner;
}

namespace {

// FP4 expert matrices of whole 32-column blocks, not yet grouped.
void collect(MoeWeights& ffn, std::vector<kernels::WeightView*>& out) {
  for (kernels::ExpertWeights& e : ffn.experts)
    for (kernels::WeightView* v : {&e.w1, &e.w3, &e.w2})
      if (v->format == kernels::WeightFormat::FP4 && v->groups == nullptr && v->cols % 32 == 0 && v->rows > 0)
        out.push_back(v);
}

// TROUPE_Q8_ROW_GROUPS=0 leaves them out, as for a GGUF file's matrices (to measure
// without them).
int64_t pack_into(std::vector<kernels::WeightView*>& views, std::shared_ptr<uint8_t>& owner, Checkpoint* release) {
  const char* env = std::getenv("TROUPE_Q8_ROW_GROUPS");
  if (!kernels::q8_row_groups_used() || views.empty() || (env && std::strcmp(env, "0") == 0)) return 0;
  int64_t bytes = 0;
  // Each view's bytes go back once its own groups are written; views sharing bytes (none
  // today) keep them, as a later one still reads them.
  std::map<const void*, int> readers;
  for (const kernels::WeightView* v : views) readers[v->data] += 1;
  auto give_back = [release, &readers](kernels::WeightView& v) {
    if (readers[v.data] > 1 || !release->release(v.data, kernels::data_bytes(v))) return;
    release->release(v.scale, kernels::scale_bytes(v));
    v.data = nullptr;  // the groups hold the codes and the scales
    v.scale = nullptr;
  };
  owner = pack_row_groups_copy(views, &bytes, release ? give_back : std::function<void(kernels::WeightView&)>{});
  return bytes;
}

}  // namespace

int64_t add_expert_row_groups(ModelWeights& w, Checkpoint* release) {
  std::vector<kernels::WeightView*> views;
  for (LayerWeights& l : w.layers) collect(l.ffn, views);
  return pack_into(views, w.expert_row_groups, release);
}

int64_t add_expert_row_groups(DsparkWeights& w, Checkpoint* release) {
  std::vector<kernels::WeightView*> views;
  for (DsparkStageWeights& s : w.stages) collect(s.ffn, views);
  return pack_into(views, w.expert_row_groups, release);
}

}  // namespace troupe::model
