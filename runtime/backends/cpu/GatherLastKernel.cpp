//===- GatherLastKernel.cpp - txk.gather_last -----------------------------===//
#include "runtime/backends/cpu/Kernels.h"

#include <vector>

namespace txc::cpu {

Status gatherLastKernel(const ConstMatrix &input, const BatchView &batch,
                        const Matrix &out) {
  if (out.rows != batch.num_seqs || out.cols != input.cols)
    return invalidArgument("gather_last result " +
                           shapeString(out.rows, out.cols) + " must be [" +
                           std::to_string(batch.num_seqs) + ", " +
                           std::to_string(input.cols) + "]");
  std::vector<float> row(static_cast<size_t>(input.cols));
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    int64_t last = static_cast<int64_t>(batch.query_start_offsets[s + 1]) - 1;
    if (last < 0 || last >= input.rows)
      return outOfRange("gather_last: sequence " + std::to_string(s) +
                        " ends at token " + std::to_string(last) +
                        " outside the " + std::to_string(input.rows) +
                        " input rows");
    input.loadRowF32(last, row.data());
    out.storeRowF32(s, row.data());
  }
  return Status::ok();
}

} // namespace txc::cpu
