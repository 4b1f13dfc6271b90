//===- TestTensors.cpp - Random tensors in any storage dtype ---------------===//
#include "TestTensors.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <unistd.h>

namespace txc::cpu::testing {

TestTensor::TestTensor(DType dtype, int64_t rows, int64_t cols)
    : dtype(dtype), rows(rows), cols(cols),
      bytes(static_cast<size_t>(rows * cols) * dtypeSize(dtype)) {}

double TestTensor::at(int64_t r, int64_t c) const {
  return loadElement(bytes.data(), dtype, static_cast<size_t>(r * cols + c));
}

void TestTensor::set(int64_t r, int64_t c, double value) {
  storeElement(bytes.data(), dtype, static_cast<size_t>(r * cols + c),
               static_cast<float>(value));
}

TestTensor randomTensor(DType dtype, int64_t rows, int64_t cols,
                        std::mt19937 &rng, double low, double high) {
  TestTensor tensor(dtype, rows, cols);
  std::uniform_real_distribution<double> uniform(low, high);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double value = uniform(rng);
      if (std::fabs(value) < 1e-3)
        value = 0.25;
      tensor.set(r, c, value);
    }
  return tensor;
}

TestTensor poisonedTensor(DType dtype, int64_t rows, int64_t cols) {
  TestTensor tensor(dtype, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      tensor.set(r, c, std::numeric_limits<double>::quiet_NaN());
  return tensor;
}

double toleranceFor(DType dtype, double magnitude) {
  double unit = dtype == DType::kBF16 ? 1.0 / 256 : dtype == DType::kF16 ? 1.0 / 2048 : 0.0;
  return unit * std::fabs(magnitude) + 2e-5 * (1.0 + std::fabs(magnitude));
}

std::string tempPath(const std::string &stem) {
  static std::atomic<int> counter{0};
  return ::testing::TempDir() + "txc_cpu_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++) + "_" + stem;
}

} // namespace txc::cpu::testing
