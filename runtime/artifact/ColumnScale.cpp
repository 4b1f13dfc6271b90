//===- ColumnScale.cpp - A weight matrix's columns scaled by a vector ------===//
#include "txc/artifact/ColumnScale.h"

#include "txc/artifact/RandomWeights.h"

#include <vector>

namespace txc::artifact {

Status scaleColumns(unsigned char *weight, DType dtype, int64_t rows, int64_t cols,
                    const unsigned char *scale) {
  if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32)
    return unimplemented("column scaling takes BF16, F16 or F32 weights, not " +
                         std::string(dtypeName(dtype)));
  if (rows < 0 || cols < 0)
    return invalidArgument("column scaling of a matrix with a negative extent");
  const size_t element = dtypeSize(dtype);
  std::vector<float> factors(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c)
    factors[c] = elementToFloat(scale + c * element, dtype);
  for (int64_t r = 0; r < rows; ++r) {
    unsigned char *row = weight + static_cast<size_t>(r * cols) * element;
    for (int64_t c = 0; c < cols; ++c)
      floatToElement(elementToFloat(row + c * element, dtype) * factors[c], row + c * element, dtype);
  }
  return Status::ok();
}

} // namespace txc::artifact
