# The CUDA backend (kernels/cuda, docs/cuda.md). TROUPE_CUDA=ON (the default) builds it
# when nvcc is found (PATH, CUDACXX or /usr/local/cuda) and says so when not;
# TROUPE_CUDA=OFF never looks. Either way troupe_kernels has the cuda:: entry points:
# the real ones, or kernels/cuda/disabled.cpp, which throws "no CUDA backend".
#
# CI compiles for one architecture (CMAKE_CUDA_ARCHITECTURES, default 90 = H100/H200)
# through ccache; scripts/device-check.sh builds the same targets on the device machine.
set(TROUPE_CUDA_ENABLED OFF)
if(TROUPE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Before enable_language: afterwards CMake has already filled in nvcc's default.
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 knows no C++20 flag for nvcc (12.0+ has -std=c++20); say it here.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(TROUPE_CUDA_ENABLED ON)
  else()
    message(STATUS "troupe: nvcc not found, building without the CUDA backend")
  endif()
endif()

# Pure host logic of the backend (launch planning): built and tested everywhere.
target_sources(troupe_kernels PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cuda/gemm_plan.cpp)

if(NOT TROUPE_CUDA_ENABLED)
  target_sources(troupe_kernels PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cuda/disabled.cpp)
  return()
endif()

message(STATUS "troupe: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES})")
file(GLOB TROUPE_CUDA_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
target_sources(troupe_kernels PRIVATE ${TROUPE_CUDA_SRCS}
               ${CMAKE_SOURCE_DIR}/kernels/cuda/device_context.cpp)
# troupe_kernels exists before CUDA is enabled, so it did not pick up the defaults.
set_target_properties(troupe_kernels PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
                      CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
# Static cudart: binaries need only the driver (libcuda) at run time, and without one
# they still start (device_count() = 0, with the reason). PRIVATE: the rest of the tree
# compiles with the same flags as without CUDA (and shares ccache entries); only the
# link picks cudart up.
target_link_libraries(troupe_kernels PRIVATE CUDA::cudart_static)
# --expt-relaxed-constexpr: the shared TROUPE_HD rules call std::max and friends.
target_compile_options(troupe_kernels PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)

# The device checks: a self-contained program (no GTest: the device machine has none)
# comparing every CUDA kernel with kernels/ref on tables of cases. Exit code 77 = no
# GPU, which ctest reports as skipped.
file(GLOB TROUPE_CUDA_CHECK_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cuda/*.cpp)
add_executable(troupe_cuda_check ${TROUPE_CUDA_CHECK_SRCS})
target_link_libraries(troupe_cuda_check PRIVATE troupe_kernels CUDA::cudart_static)
enable_testing()
add_test(NAME cuda_check COMMAND troupe_cuda_check)
set_tests_properties(cuda_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)

# Device benchmarks (figures, never pass/fail): GEMM, attention, MoE at decode and
# prefill shapes against the bandwidth measured in the same run.
file(GLOB TROUPE_CUDA_BENCH_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bench/cuda/*.cpp)
if(TROUPE_CUDA_BENCH_SRCS)
  add_executable(troupe_cuda_bench ${TROUPE_CUDA_BENCH_SRCS})
  target_link_libraries(troupe_cuda_bench PRIVATE troupe_kernels CUDA::cudart_static)
  if(TARGET CUDA::cublas)  # the measured matrix peak
    target_link_libraries(troupe_cuda_bench PRIVATE CUDA::cublas)
    target_compile_definitions(troupe_cuda_bench PRIVATE TROUPE_BENCH_CUBLAS=1)
  endif()
endif()

# NCCL (runtime/dep/nccl): the Communicator between GPU ranks, where nccl.h and libnccl
# are found (CUDA 13 at /usr/local/cuda ships them); otherwise there is none and the
# build says so.
find_path(TROUPE_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(TROUPE_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
if(TROUPE_NCCL_INCLUDE AND TROUPE_NCCL_LIB)
  message(STATUS "troupe: NCCL found (${TROUPE_NCCL_LIB}): building troupe_nccl")
  add_library(troupe_nccl STATIC ${CMAKE_SOURCE_DIR}/runtime/dep/nccl/nccl_communicator.cpp)
  target_include_directories(troupe_nccl PUBLIC ${CMAKE_SOURCE_DIR} ${TROUPE_NCCL_INCLUDE})
  target_link_libraries(troupe_nccl PUBLIC troupe_kernels ${TROUPE_NCCL_LIB}
                        PRIVATE CUDA::cudart_static)
  target_compile_definitions(troupe_nccl PUBLIC TROUPE_HAVE_NCCL=1)
  target_link_libraries(troupe_cuda_check PRIVATE troupe_nccl)
else()
  message(STATUS "troupe: NCCL not found: no NcclCommunicator in this build")
endif()
