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

#include "runtime/backends/cuda/CudaKernels.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace txc::cuda {
namespace {

struct NormCase {
  EType type;
  int64_t rows, cols, group;
  bool residual;
};

float roundTo(EType t, float v) {
  if (t == EType::kBF16)
    return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

std::vector<unsigned char> encode(EType t, const std::vector<float> &values) {
  std::vector<unsigned char> bytes(values.size() * (t == EType::kBF16 ? 2 : 4));
  for (size_t i = 0; i < values.size(); ++i) {
    if (t == EType::kBF16) {
      __nv_bfloat16 b = __float2bfloat16_rn(values[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    }
  }
  return bytes;
}

std::vector<float> decode(EType t, const std::vector<unsigned char> &bytes) {
  const size_t n = bytes.size() / (t == EType::kBF16 ? 2 : 4);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    if (t == EType::kBF16) {
      __nv_bfloat16 b;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      values[i] = __bfloat162float(b);
    } else {
      std::memcpy(&values[i], bytes.data() + 4 * i, 4);
    }
  }
  return values;
}

void *upload(const std::vector<unsigned char> &bytes) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

std::vector<unsigned char> download(const void *p, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

void runCase(const NormCase &c) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " cols " + std::to_string(c.cols) + " group " +
               std::to_string(c.group) + (c.residual ? " with residual" : ""));
  std::mt19937 rng(static_cast<uint32_t>(c.cols * 31 + c.rows));
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  auto fresh = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v)
      x = roundTo(c.type, uniform(rng) + (uniform(rng) > 0 ? 0.25f : -0.25f));
    return v;
  };
  const int64_t n = c.rows * c.cols;
  std::vector<float> input = fresh(n), residual = fresh(n), weight = fresh(c.group);
  const size_t elem = c.type == EType::kBF16 ? 2 : 4;
  void *d_input = upload(encode(c.type, input));
  void *d_residual = c.residual ? upload(encode(c.type, residual)) : nullptr;
  void *d_weight = upload(encode(c.type, weight));
  void *d_sum = nullptr, *d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_sum, n * elem), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, n * elem), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_sum, 0x7f, n * elem), cudaSuccess); // poison
  ASSERT_EQ(cudaMemset(d_out, 0x7f, n * elem), cudaSuccess);
  ASSERT_EQ(launchRmsNorm(d_input, c.type, d_residual, c.type, d_weight, c.type, c.group, c.rows,
                          c.cols, 1e-5f, c.residual ? d_sum : nullptr, c.type, d_out, c.type,
                          nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> out = decode(c.type, download(d_out, n * elem));
  std::vector<float> sum = decode(c.type, download(d_sum, n * elem));
  // Two roundings of the output type apart at most (the kernels sum the
  // squares in another order than this loop).
  const double rel = c.type == EType::kBF16 ? 2.0 / 128 : 1e-5;
  int bad = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<double> row(static_cast<size_t>(c.cols));
    for (int64_t j = 0; j < c.cols; ++j) {
      const int64_t i = r * c.cols + j;
      row[j] = c.residual ? roundTo(c.type, input[i] + residual[i]) : input[i];
      if (c.residual && sum[i] != static_cast<float>(row[j]) && bad++ < 5)
        ADD_FAILURE() << "sum[" << r << ", " << j << "] " << sum[i] << " expected " << row[j];
    }
    for (int64_t g = 0; g < c.cols; g += c.group) {
      double squares = 0;
      for (int64_t j = 0; j < c.group; ++j)
        squares += row[g + j] * row[g + j];
      const double inv_rms = 1.0 / std::sqrt(squares / c.group + 1e-5);
      for (int64_t j = 0; j < c.group; ++j) {
        const double want = row[g + j] * inv_rms * weight[j];
        const double got = out[r * c.cols + g + j];
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
  const EType bf = EType::kBF16, f = EType::kF32;
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
