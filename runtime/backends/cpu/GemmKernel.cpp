//===- GemmKernel.cpp - txk.gemm with its epilogues -----------------------===//
//
// acc = input @ weight^T (+ bias) in fp32, then none / residual_add / swiglu.
// The input is converted to fp32 once; threads split the weight's rows, so
// every weight row is converted once per step and read once (the weights
// dominate the bytes, as in a decode GEMV). Results go to an fp32 scratch
// and are stored row by row at the end, so the output may alias the input
// or the residual (in-place plans) without corrupting them.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/Kernels.h"

#include <cmath>
#include <vector>

namespace txc::cpu {

StatusOr<GemmEpilogue> parseGemmEpilogue(const std::string &name) {
  if (name.empty() || name == "none")
    return GemmEpilogue::kNone;
  if (name == "residual_add")
    return GemmEpilogue::kResidualAdd;
  if (name == "swiglu")
    return GemmEpilogue::kSwiglu;
  return unimplemented("gemm epilogue '" + name +
                       "' is not supported (none, residual_add, swiglu)");
}

namespace {

// Eight partial sums break the dependency chain so the compiler can keep
// several FMAs in flight; the order is fixed, so results are reproducible.
float dot(const float *a, const float *b, int64_t n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k)
      partial[k] += a[i + k] * b[i + k];
  float total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                ((partial[4] + partial[5]) + (partial[6] + partial[7]));
  for (; i < n; ++i)
    total += a[i] * b[i];
  return total;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

} // namespace

Status gemmKernel(const ConstMatrix &input, const ConstMatrix &weight,
                  const ConstMatrix &maybe_bias, GemmEpilogue epilogue,
                  const ConstMatrix &maybe_residual, const Matrix &out,
                  ThreadPool &pool) {
  const int64_t m = input.rows, k = input.cols, n = weight.rows;
  if (weight.cols != k)
    return invalidArgument("gemm input " + shapeString(m, k) +
                           " does not match weight " +
                           shapeString(weight.rows, weight.cols) +
                           " (weights are [out, in])");
  if (maybe_bias.present() && maybe_bias.rows * maybe_bias.cols != n)
    return invalidArgument("gemm bias of " +
                           std::to_string(maybe_bias.rows * maybe_bias.cols) +
                           " elements does not match " + std::to_string(n) +
                           " weight rows");
  int64_t out_cols = n;
  if (epilogue == GemmEpilogue::kSwiglu) {
    if (n % 2 != 0)
      return invalidArgument("swiglu gemm needs an even number of weight rows "
                             "([gate; up]), got " + std::to_string(n));
    out_cols = n / 2;
  }
  if (out.rows != m || out.cols != out_cols)
    return invalidArgument("gemm result " + shapeString(out.rows, out.cols) +
                           " must be " + shapeString(m, out_cols));
  if (epilogue == GemmEpilogue::kResidualAdd && maybe_residual.present() &&
      (maybe_residual.rows != m || maybe_residual.cols != out_cols))
    return invalidArgument("gemm residual " +
                           shapeString(maybe_residual.rows, maybe_residual.cols) +
                           " must be " + shapeString(m, out_cols));

  std::vector<float> input_f32(static_cast<size_t>(m * k));
  pool.parallelFor(m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      input.loadRowF32(r, input_f32.data() + r * k);
  });
  std::vector<float> bias_f32;
  if (maybe_bias.present()) {
    bias_f32.resize(static_cast<size_t>(n));
    loadRow(maybe_bias.data, maybe_bias.dtype, 0, static_cast<size_t>(n),
            bias_f32.data());
  }

  // acc[r, j] for output column j; swiglu reads weight rows j and j + n/2.
  std::vector<float> acc(static_cast<size_t>(m * out_cols));
  pool.parallelFor(out_cols, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> w_row(static_cast<size_t>(k));
    std::vector<float> up_row(static_cast<size_t>(k));
    for (int64_t j = begin; j < end; ++j) {
      weight.loadRowF32(j, w_row.data());
      if (epilogue == GemmEpilogue::kSwiglu) {
        weight.loadRowF32(j + out_cols, up_row.data());
        float gate_bias = bias_f32.empty() ? 0.0f : bias_f32[j];
        float up_bias = bias_f32.empty() ? 0.0f : bias_f32[j + out_cols];
        for (int64_t r = 0; r < m; ++r) {
          const float *x = input_f32.data() + r * k;
          float gate = dot(x, w_row.data(), k) + gate_bias;
          float up = dot(x, up_row.data(), k) + up_bias;
          acc[r * out_cols + j] = silu(gate) * up;
        }
      } else {
        float bias = bias_f32.empty() ? 0.0f : bias_f32[j];
        for (int64_t r = 0; r < m; ++r)
          acc[r * out_cols + j] = dot(input_f32.data() + r * k, w_row.data(), k) + bias;
      }
    }
  });

  bool add_residual =
      epilogue == GemmEpilogue::kResidualAdd && maybe_residual.present();
  pool.parallelFor(m, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> residual(static_cast<size_t>(out_cols));
    for (int64_t r = begin; r < end; ++r) {
      float *row = acc.data() + r * out_cols;
      if (add_residual) {
        maybe_residual.loadRowF32(r, residual.data());
        for (int64_t j = 0; j < out_cols; ++j)
          row[j] += residual[j];
      }
      out.storeRowF32(r, row);
    }
  });
  return Status::ok();
}

} // namespace txc::cpu
