// A static placement with redundant experts and no planner (MODEL.md §9, SGLang EP4): each
// GPU holds its own Nlog / G experts and copies of the first `copies_per_gpu` experts of the
// next GPU (g + 1 mod G). For 384 experts on 4 GPUs with 8 copies: 416 slots, 104 per GPU:
//
//   GPU 0 slots [  0,104): experts [  0, 96) + copies of [ 96,104)
//   GPU 1 slots [104,208): experts [ 96,192) + copies of [192,200)
//   GPU 2 slots [208,312): experts [192,288) + copies of [288,296)
//   GPU 3 slots [312,416): experts [288,384) + copies of [  0,  8)
#pragma once

#include <cstdint>

#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime::eplb {

// The same layout in every layer; own experts have replica rank 0, copies rank 1. Throws
// troupe::Error unless num_gpus divides num_logical and copies_per_gpu <= Nlog / G.
ExpertPlacement neighbor_copy_placement(int64_t num_layers, int64_t num_logical, int64_t num_gpus,
                                        int64_t copies_per_gpu);

// The default layout of an instance of R ranks (--data-parallel-size R with
// --enable-expert-parallel): Nphy = Nlog + redundant, rounded up to a multiple of R, so R
// need not divide Nlog; slot e < Nlog holds expert e (replica rank 0), and extra slot
// Nlog + j holds a copy of expert j mod Nlog. Rank r owns slots [r·S, (r+1)·S), S = Nphy / R.
// For 32 experts on 3 ranks: 33 slots, 11 per rank, slot 32 a copy of expert 0.
ExpertPlacement ep_default_placement(int64_t num_layers, int64_t num_logical, int64_t ranks,
                                     int64_t redundant);

}  // namespace troupe::runtime::eplb
