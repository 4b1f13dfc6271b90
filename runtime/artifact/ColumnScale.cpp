//===- ColumnScale.cpp - A weight matrix's columns scaled by a vector ------===//
#include "txc/artifact/ColumnScale.h"

#include "txc/artifact/RandomWeights.h"

#include <cstring>
#include <vector>

namespace txc::artifact {
namespace {

float loadFloat(const unsigned char *p, DType dtype) {
  if (dtype == DType::kF32) {
    float value;
    std::memcpy(&value, p, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == DType::kBF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
}

void storeFloat(float value, unsigned char *p, DType dtype) {
  if (dtype == DType::kF32) {
    std::memcpy(p, &value, 4);
    return;
  }
  uint16_t bits = dtype == DType::kBF16 ? floatToBF16(value) : floatToF16(value);
  std::memcpy(p, &bits, 2);
}

} // namespace

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
    factors[c] = loadFloat(scale + c * element, dtype);
  for (int64_t r = 0; r < rows; ++r) {
    unsigned char *row = weight + static_cast<size_t>(r * cols) * element;
    for (int64_t c = 0; c < cols; ++c)
      storeFloat(loadFloat(row + c * element, dtype) * factors[c], row + c * element, dtype);
  }
  return Status::ok();
}

} // namespace txc::artifact
