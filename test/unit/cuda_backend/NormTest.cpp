//===- NormTest.cpp - rms_norm and add_rms_norm against an fp64 reference -===//
//
// Fresh random rows (never zeros), the result buffers poisoned first: the
// 16-bit vector kernel (every register width, with and without the residual
// sum) and the generic kernel (f32, a width not a multiple of 8, per-head
// groups), each within the rounding of its output type of a double-precision
// norm of the same rounded inputs.
//
//===----------------------------------------------------------------------===//
#include "GpuTest.h"
#include "TestTensors.h"

#include "runtime/backends/cuda/CudaKernels.h"

#include <cmath>
#include <random>
#include <vector>

namespace txc::cuda {
namespace {

using cpu::testing::poisonedTensor;
using cpu::testing::randomTensor;
using cpu::testing::TestTensor;

struct NormCase {
  DType dtype;
  int64_t rows, cols, group;
  bool residual;
};

/// v rounded to the storage type, as a store then a load gives it.
double roundTo(DType dtype, double v) {
  TestTensor t(dtype, 1, 1);
  t.set(0, 0, v);
  return t.at(0, 0);
}

void *upload(const TestTensor &t) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, t.bytes.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

void download(TestTensor &t, const void *p) {
  EXPECT_EQ(cudaMemcpy(t.bytes.data(), p, t.bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
}

void runCase(const NormCase &c) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " cols " + std::to_string(c.cols) + " group " +
               std::to_string(c.group) + (c.residual ? " with residual" : ""));
  std::mt19937 rng(static_cast<uint32_t>(c.cols * 31 + c.rows));
  const EType type = c.dtype == DType::kBF16 ? EType::kBF16 : EType::kF32;
  TestTensor input = randomTensor(c.dtype, c.rows, c.cols, rng, -2.0, 2.0);
  TestTensor residual = randomTensor(c.dtype, c.rows, c.cols, rng, -2.0, 2.0);
  TestTensor weight = randomTensor(c.dtype, 1, c.group, rng, -2.0, 2.0);
  TestTensor sum = poisonedTensor(c.dtype, c.rows, c.cols);
  TestTensor out = poisonedTensor(c.dtype, c.rows, c.cols);
  void *d_input = upload(input), *d_weight = upload(weight);
  void *d_residual = c.residual ? upload(residual) : nullptr;
  void *d_sum = upload(sum), *d_out = upload(out);
  ASSERT_EQ(launchRmsNorm(d_input, type, d_residual, type, d_weight, type, c.group, c.rows, c.cols,
                          1e-5f, c.residual ? d_sum : nullptr, type, d_out, type, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  download(out, d_out);
  download(sum, d_sum);
  // Two roundings of the output type apart at most (the kernels sum the
  // squares in another order than this loop).
  const double rel = c.dtype == DType::kBF16 ? 2.0 / 128 : 1e-5;
  int bad = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<double> row(static_cast<size_t>(c.cols));
    for (int64_t j = 0; j < c.cols; ++j) {
      row[j] = c.residual ? roundTo(c.dtype, input.at(r, j) + residual.at(r, j)) : input.at(r, j);
      if (c.residual && sum.at(r, j) != row[j] && bad++ < 5)
        ADD_FAILURE() << "sum[" << r << ", " << j << "] " << sum.at(r, j) << " expected " << row[j];
    }
    for (int64_t g = 0; g < c.cols; g += c.group) {
      double squares = 0;
      for (int64_t j = 0; j < c.group; ++j)
        squares += row[g + j] * row[g + j];
      const double inv_rms = 1.0 / std::sqrt(squares / c.group + 1e-5);
      for (int64_t j = 0; j < c.group; ++j) {
        const double want = row[g + j] * inv_rms * weight.at(0, j);
        const double got = out.at(r, g + j);
        if (!(std::fabs(got - want) <= rel * std::fabs(want) + 1e-6) && bad++ < 5)
          ADD_FAILURE() << "out[" << r << ", " << g + j << "] " << got << " expected " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  for (void *p : {d_input, d_residual, d_weight, d_sum, d_out})
    cudaFree(p);
}

TEST(NormTest, MatchesTheFp64ReferenceOnBothKernels) {
  TXC_SKIP_WITHOUT_GPU();
  const DType bf = DType::kBF16, f = DType::kF32;
  const NormCase cases[] = {
      {bf, 32, 4096, 4096, true}, // Llama-3-8B's add_rms_norm at batch 32 (4 vectors a thread)
      {bf, 5, 1024, 1024, false}, // Qwen3-0.6B (1 vector)
      {bf, 3, 2048, 2048, true},  // 2 vectors
      {bf, 2, 8192, 8192, false}, // 8 vectors
      {bf, 7, 1000, 1000, true},  // a partial last round of vectors
      {bf, 4, 1004, 1004, true},  // not a multiple of 8: the generic kernel
      {bf, 6, 512, 128, false},   // per-head groups: the generic kernel
      {f, 9, 4096, 4096, true},   // f32: the generic kernel
  };
  for (const NormCase &c : cases)
    runCase(c);
}

} // namespace
} // namespace txc::cuda
