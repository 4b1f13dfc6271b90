//===- cuda_check.h - The bench programs' check of a CUDA runtime call ----===//
//
// A benchmark has no caller to hand an error to: a failed CUDA runtime call
// names itself, its file and line, and exits with status 2.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define BENCH_CHECK_CUDA(call)                                                                     \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "CUDA error %s at %s:%d in %s\n", cudaGetErrorString(e_), __FILE__,     \
                   __LINE__, #call);                                                               \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)
