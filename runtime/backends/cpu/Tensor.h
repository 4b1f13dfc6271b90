//===- Tensor.h - Row-major views and element conversion --------*- C++ -*-===//
//
// The CPU kernels read and write bf16, f16 or f32 storage but compute in
// fp32: every kernel loads a row into an fp32 buffer, works there, and
// rounds once when it stores (round to nearest even, as the GPU does). The
// views carry the dtype at run time so one kernel serves every storage type.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CPU_TENSOR_H
#define TXC_RUNTIME_BACKENDS_CPU_TENSOR_H

#include "txc/DType.h"
#include "txc/Status.h"
#include "txc/artifact/RandomWeights.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace txc::cpu {

/// Storage types the kernels accept for activations, weights and the cache.
inline bool isKernelFloatType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

inline float bf16BitsToFloat(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

inline uint16_t floatToBF16Bits(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  if ((word & 0x7f800000u) == 0x7f800000u && (word & 0x007fffffu) != 0)
    return static_cast<uint16_t>((word >> 16) | 0x0040u); // quiet NaN
  uint32_t rounding = 0x7fffu + ((word >> 16) & 1u);
  return static_cast<uint16_t>((word + rounding) >> 16);
}

inline float loadElement(const void *base, DType dtype, size_t index) {
  switch (dtype) {
  case DType::kF32:
    return static_cast<const float *>(base)[index];
  case DType::kBF16:
    return bf16BitsToFloat(static_cast<const uint16_t *>(base)[index]);
  case DType::kF16:
    return artifact::f16ToFloat(static_cast<const uint16_t *>(base)[index]);
  default:
    return 0.0f; // callers validate dtypes before running a kernel
  }
}

inline void storeElement(void *base, DType dtype, size_t index, float value) {
  switch (dtype) {
  case DType::kF32:
    static_cast<float *>(base)[index] = value;
    return;
  case DType::kBF16:
    static_cast<uint16_t *>(base)[index] = floatToBF16Bits(value);
    return;
  case DType::kF16:
    static_cast<uint16_t *>(base)[index] = artifact::floatToF16(value);
    return;
  default:
    return;
  }
}

/// Converts `count` elements starting at element `first` to fp32.
inline void loadRow(const void *base, DType dtype, size_t first, size_t count,
                    float *out) {
  if (dtype == DType::kF32) {
    std::memcpy(out, static_cast<const float *>(base) + first,
                count * sizeof(float));
    return;
  }
  for (size_t i = 0; i < count; ++i)
    out[i] = loadElement(base, dtype, first + i);
}

inline void storeRow(void *base, DType dtype, size_t first, size_t count,
                     const float *values) {
  if (dtype == DType::kF32) {
    std::memcpy(static_cast<float *>(base) + first, values,
                count * sizeof(float));
    return;
  }
  for (size_t i = 0; i < count; ++i)
    storeElement(base, dtype, first + i, values[i]);
}

/// A row-major 2-D tensor (a 1-D tensor is one row). `rows` is the dynamic
/// row count of this step (tokens or sequences), not the arena capacity.
struct ConstMatrix {
  const void *data = nullptr;
  DType dtype = DType::kInvalid;
  int64_t rows = 0;
  int64_t cols = 0;

  bool present() const { return data != nullptr; }
  size_t bytes() const {
    return static_cast<size_t>(rows * cols) * dtypeSize(dtype);
  }
  void loadRowF32(int64_t row, float *out) const {
    loadRow(data, dtype, static_cast<size_t>(row * cols),
            static_cast<size_t>(cols), out);
  }
};

struct Matrix {
  void *data = nullptr;
  DType dtype = DType::kInvalid;
  int64_t rows = 0;
  int64_t cols = 0;

  ConstMatrix view() const { return {data, dtype, rows, cols}; }
  size_t bytes() const {
    return static_cast<size_t>(rows * cols) * dtypeSize(dtype);
  }
  void storeRowF32(int64_t row, const float *values) const {
    storeRow(data, dtype, static_cast<size_t>(row * cols),
             static_cast<size_t>(cols), values);
  }
};

/// True when the byte ranges of two tensors intersect (in-place operands).
inline bool overlaps(const void *a, size_t a_bytes, const void *b,
                     size_t b_bytes) {
  auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

inline std::string shapeString(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_TENSOR_H
