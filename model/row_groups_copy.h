// Row groups (kernels/q8_row_groups.h) packed into memory of their own, beside the bytes
// the views already read: a GGUF file's Q8_0 / Q4_0 matrices that cannot be regrouped in
// place (model/llama_weights.cpp), and a V4.1 checkpoint's FP4 experts when they run on
// int8 (ForwardOptions::expert_precision = Int8: with them every expert GEMM runs on
// int8, prefill too; the checkpoint's codes stay mapped for the other readers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "kernels/weights.h"

namespace troupe::model {

struct ModelWeights;
struct DsparkWeights;
class Checkpoint;

// The views' row groups in one anonymous mapping on 2 MiB pages, each view's share 64-byte
// aligned (the kernels' loads then never split a cache line at a group's start); sets
// each view's `groups`. Returns the mapping's owner, or null where there was nothing to
// pack or no memory to map (the views keep no groups: the GEMMs read their bytes, the
// same values). `packed`, where given, is called with each view as soon as its groups
// are written (the expert loader gives that view's checkpoint bytes back there, so that
// the load never holds all the experts twice).
std::shared_ptr<uint8_t> pack_row_groups_copy(std::span<kernels::WeightView* const> views,
                                              int64_t* bytes = nullptr,
                                              const std::function<void(kernels::WeightView&)>& packed = {});

// Row groups for every FP4 routed expert matrix (w1, w3, w2 of each layer's experts; the
// draft's stages' too), when this process's int8 GEMM reads them
// (kernels::q8_row_groups_used()): the int8 expert path then runs the row-group kernels
// at every M (kernels/gemm.h kInt8MaxRows; docs/kernels-bench.md). Returns the bytes
// packed. TROUPE_Q8_ROW_GROUPS=0 leaves them out (to measure without them).
//
// With `release` (the checkpoint the views point into), each grouped matrix's codes and
// scales are given back to the system (Checkpoint::release) and its view keeps only its
// groups (data = scale = null, as a GGUF matrix regrouped in place): the experts are
// then held once. Such a view runs only GemmPrecision::Int8 on the row-group kernels;
// any other reader fails with an error naming why (kernels/gemm.cpp). Each matrix is given
// back as soon as its groups are written, so the load's peak holds one copy of the
// experts, not two. Without `release` the experts' bytes are held twice (the
// checkpoint's and the groups).
int64_t add_expert_row_groups(ModelWeights& w, Checkpoint* release = nullptr);
int64_t add_expert_row_groups(DsparkWeights& w, Checkpoint* release = nullptr);

}  // namespace troupe::model
