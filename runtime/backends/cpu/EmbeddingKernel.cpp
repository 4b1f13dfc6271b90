//===- EmbeddingKernel.cpp - txk.embedding --------------------------------===//
#include "runtime/backends/cpu/Kernels.h"

#include <vector>

namespace txc::cpu {

Status embeddingKernel(const int32_t *tokens, int64_t num_tokens,
                       const ConstMatrix &table, int64_t vocab_start,
                       const Matrix &out, ThreadPool &pool) {
  if (out.cols != table.cols || out.rows != num_tokens)
    return invalidArgument("embedding result " + shapeString(out.rows, out.cols) +
                           " does not match " + std::to_string(num_tokens) +
                           " tokens of a table " +
                           shapeString(table.rows, table.cols));
  pool.parallelFor(num_tokens, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(table.cols));
    for (int64_t t = begin; t < end; ++t) {
      int64_t local = static_cast<int64_t>(tokens[t]) - vocab_start;
      // Tokens outside this vocab shard contribute zero; the all_reduce
      // after a vocab-parallel embedding adds the owning rank's row.
      if (local < 0 || local >= table.rows)
        std::fill(row.begin(), row.end(), 0.0f);
      else
        table.loadRowF32(local, row.data());
      out.storeRowF32(t, row.data());
    }
  });
  return Status::ok();
}

} // namespace txc::cpu
