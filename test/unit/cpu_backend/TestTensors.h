//===- TestTensors.h - Random tensors in any storage dtype -----------------===//
#ifndef TXC_TEST_UNIT_CPU_BACKEND_TESTTENSORS_H
#define TXC_TEST_UNIT_CPU_BACKEND_TESTTENSORS_H

#include "runtime/backends/cpu/Tensor.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace txc::cpu::testing {

/// A row-major tensor owning its bytes; values() are the stored values
/// widened to double, which is what a reference must compute from.
struct TestTensor {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<unsigned char> bytes;

  TestTensor() = default;
  TestTensor(DType dtype, int64_t rows, int64_t cols);
  double at(int64_t r, int64_t c) const;
  void set(int64_t r, int64_t c, double value);
  ConstMatrix view() const { return {bytes.data(), dtype, rows, cols}; }
  Matrix mut() { return {bytes.data(), dtype, rows, cols}; }
};

/// Uniform in [low, high) with values never exactly zero, rounded to dtype.
TestTensor randomTensor(DType dtype, int64_t rows, int64_t cols,
                        std::mt19937 &rng, double low = -1.0,
                        double high = 1.0);

/// Filled with NaN so a kernel that skips an element is caught.
TestTensor poisonedTensor(DType dtype, int64_t rows, int64_t cols);

/// The tolerance for comparing a stored result with a double reference:
/// the dtype's rounding of `magnitude` plus fp32 accumulation slack.
double toleranceFor(DType dtype, double magnitude);

std::string tempPath(const std::string &stem);

} // namespace txc::cpu::testing

#endif
