// TROUPE_HD marks small scalar functions that the CPU kernels and the CUDA kernels
// (kernels/cuda) share, so both backends run one definition: __host__ __device__
// under nvcc, nothing for the C++ compiler.
#pragma once

#if defined(__CUDACC__)
#define TROUPE_HD __host__ __device__
#else
#define TROUPE_HD
#endif
