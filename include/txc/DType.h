//===- DType.h - Element types shared by artifact and runtime --*- C++ -*-===//
//
// The names are safetensors' dtype strings ("BF16", "F32", ...), so a tensor
// read from a checkpoint and an entry of the artifact's weight manifest can
// be compared by name without a translation table per reader.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_DTYPE_H
#define TXC_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace txc {

enum class DType : uint8_t {
  kInvalid = 0,
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
  kF8E4M3,
  kF8E5M2,
};

/// Bytes per element; 0 for kInvalid.
inline size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::kBool:
  case DType::kU8:
  case DType::kI8:
  case DType::kF8E4M3:
  case DType::kF8E5M2:
    return 1;
  case DType::kI16:
  case DType::kU16:
  case DType::kF16:
  case DType::kBF16:
    return 2;
  case DType::kI32:
  case DType::kU32:
  case DType::kF32:
    return 4;
  case DType::kF64:
  case DType::kI64:
  case DType::kU64:
    return 8;
  case DType::kInvalid:
    return 0;
  }
  return 0;
}

/// The safetensors spelling: "BF16", "F8_E4M3", ...
inline std::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::kBool: return "BOOL";
  case DType::kU8: return "U8";
  case DType::kI8: return "I8";
  case DType::kI16: return "I16";
  case DType::kU16: return "U16";
  case DType::kF16: return "F16";
  case DType::kBF16: return "BF16";
  case DType::kI32: return "I32";
  case DType::kU32: return "U32";
  case DType::kF32: return "F32";
  case DType::kF64: return "F64";
  case DType::kI64: return "I64";
  case DType::kU64: return "U64";
  case DType::kF8E4M3: return "F8_E4M3";
  case DType::kF8E5M2: return "F8_E5M2";
  case DType::kInvalid: return "INVALID";
  }
  return "INVALID";
}

/// Inverse of dtypeName; nullopt for names txc does not know.
inline std::optional<DType> parseDType(std::string_view name) {
  for (uint8_t i = 1; i <= static_cast<uint8_t>(DType::kF8E5M2); ++i) {
    DType dtype = static_cast<DType>(i);
    if (dtypeName(dtype) == name)
      return dtype;
  }
  return std::nullopt;
}

inline bool isFloatingPoint(DType dtype) {
  switch (dtype) {
  case DType::kF16:
  case DType::kBF16:
  case DType::kF32:
  case DType::kF64:
  case DType::kF8E4M3:
  case DType::kF8E5M2:
    return true;
  default:
    return false;
  }
}

} // namespace txc

#endif // TXC_DTYPE_H
