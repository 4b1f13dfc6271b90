//===- GpuTest.h - Skip a test, saying so, where no GPU is present ---------===//
#ifndef TXC_TEST_UNIT_CUDA_BACKEND_GPUTEST_H
#define TXC_TEST_UNIT_CUDA_BACKEND_GPUTEST_H

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#define TXC_SKIP_WITHOUT_GPU()                                                                     \
  do {                                                                                             \
    int count_ = 0;                                                                                \
    if (cudaGetDeviceCount(&count_) != cudaSuccess || count_ == 0) {                               \
      cudaGetLastError();                                                                          \
      GTEST_SKIP() << "no CUDA GPU on this machine";                                               \
    }                                                                                              \
  } while (0)

#endif
