//===- RmsNormKernels.cpp - txk.rms_norm and txk.add_rms_norm -------------===//
//
// y = x / sqrt(mean(x^2) + eps) * weight over each group of dim(weight)
// elements (a whole row, or each head when a norm is applied per head);
// without a weight (folded into the next GEMM's by tx-fold-norm-weight) one
// group a row and no scale. Statistics in fp32 as HF does (it upcasts to
// fp32 before the mean).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/Kernels.h"

#include <cmath>
#include <vector>

namespace txc::cpu {

namespace {

void normalizeGroups(float *row, int64_t cols, const float *weight,
                     int64_t group, double eps) {
  for (int64_t g = 0; g < cols; g += group) {
    float sum_squares = 0.0f;
    for (int64_t i = 0; i < group; ++i)
      sum_squares += row[g + i] * row[g + i];
    float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(group) +
                                     static_cast<float>(eps));
    for (int64_t i = 0; i < group; ++i)
      row[g + i] = weight ? row[g + i] * inv_rms * weight[i] : row[g + i] * inv_rms;
  }
}

/// The group size: the weight's, or the whole row without one.
int64_t groupOf(const ConstMatrix &input, const ConstMatrix &weight) {
  return weight.present() ? weight.cols : input.cols;
}

/// The weight in fp32, empty when the norm has none.
std::vector<float> weightF32(const ConstMatrix &weight) {
  std::vector<float> values(weight.present() ? static_cast<size_t>(weight.cols) : 0);
  if (weight.present())
    weight.loadRowF32(0, values.data());
  return values;
}

Status checkNormShapes(const ConstMatrix &input, const ConstMatrix &weight,
                       const Matrix &out) {
  if (weight.present() && (weight.cols <= 0 || input.cols % weight.cols != 0))
    return invalidArgument("rms_norm weight of " + std::to_string(weight.cols) +
                           " elements does not divide rows of " +
                           std::to_string(input.cols));
  if (out.rows != input.rows || out.cols != input.cols)
    return invalidArgument("rms_norm result " + shapeString(out.rows, out.cols) +
                           " differs from its input " +
                           shapeString(input.rows, input.cols));
  return Status::ok();
}

} // namespace

Status rmsNormKernel(const ConstMatrix &input, const ConstMatrix &weight,
                     double eps, const Matrix &out, ThreadPool &pool) {
  TXC_RETURN_IF_ERROR(checkNormShapes(input, weight, out));
  const std::vector<float> weight_f32 = weightF32(weight);
  const float *scale = weight_f32.empty() ? nullptr : weight_f32.data();
  pool.parallelFor(input.rows, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(input.cols));
    for (int64_t r = begin; r < end; ++r) {
      input.loadRowF32(r, row.data());
      normalizeGroups(row.data(), input.cols, scale, groupOf(input, weight), eps);
      out.storeRowF32(r, row.data());
    }
  });
  return Status::ok();
}

Status addRmsNormKernel(const ConstMatrix &input, const ConstMatrix &residual,
                        const ConstMatrix &weight, double eps,
                        const Matrix &sum, const Matrix &normed,
                        ThreadPool &pool) {
  TXC_RETURN_IF_ERROR(checkNormShapes(input, weight, normed));
  if (residual.rows != input.rows || residual.cols != input.cols ||
      sum.rows != input.rows || sum.cols != input.cols)
    return invalidArgument("add_rms_norm residual " +
                           shapeString(residual.rows, residual.cols) +
                           " and sum " + shapeString(sum.rows, sum.cols) +
                           " must match the input " +
                           shapeString(input.rows, input.cols));
  const std::vector<float> weight_f32 = weightF32(weight);
  const float *scale = weight_f32.empty() ? nullptr : weight_f32.data();
  pool.parallelFor(input.rows, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(input.cols));
    std::vector<float> other(static_cast<size_t>(input.cols));
    for (int64_t r = begin; r < end; ++r) {
      input.loadRowF32(r, row.data());
      residual.loadRowF32(r, other.data());
      for (int64_t i = 0; i < input.cols; ++i)
        row[i] += other[i];
      sum.storeRowF32(r, row.data());
      // Normalise the sum as stored, so `normed` is exactly rms_norm(sum)
      // in the storage dtype (what an unfused pair would compute).
      sum.view().loadRowF32(r, row.data());
      normalizeGroups(row.data(), input.cols, scale, groupOf(input, weight), eps);
      normed.storeRowF32(r, row.data());
    }
  });
  return Status::ok();
}

} // namespace txc::cpu
