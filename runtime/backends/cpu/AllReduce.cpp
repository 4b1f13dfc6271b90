//===- AllReduce.cpp - txk.all_reduce between in-process ranks ------------===//
#include "runtime/backends/cpu/Kernels.h"

#include <vector>

namespace txc::cpu {

Status allReduceSum(const std::vector<Matrix> &per_rank, ThreadPool &pool) {
  if (per_rank.empty())
    return Status::ok();
  const Matrix &first = per_rank.front();
  for (const Matrix &m : per_rank)
    if (m.rows != first.rows || m.cols != first.cols)
      return invalidArgument("all_reduce: rank tensors " +
                             shapeString(first.rows, first.cols) + " and " +
                             shapeString(m.rows, m.cols) + " differ");
  pool.parallelFor(first.rows, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> total(static_cast<size_t>(first.cols));
    std::vector<float> part(static_cast<size_t>(first.cols));
    for (int64_t r = begin; r < end; ++r) {
      // Fixed rank order: the sum is the same whichever thread computes it.
      per_rank[0].view().loadRowF32(r, total.data());
      for (size_t k = 1; k < per_rank.size(); ++k) {
        per_rank[k].view().loadRowF32(r, part.data());
        for (int64_t i = 0; i < first.cols; ++i)
          total[i] += part[i];
      }
      for (const Matrix &m : per_rank)
        m.storeRowF32(r, total.data());
    }
  });
  return Status::ok();
}

} // namespace txc::cpu
