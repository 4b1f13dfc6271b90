//===- SafetensorsFile.h - One validated, mmapped .safetensors -*- C++ -*-===//
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// mapping tensor names to {dtype, shape, data_offsets: [begin, end)} (plus an
// optional "__metadata__" of strings), then the data section. Offsets are
// relative to the data section.
//
// Everything in the header is checked before any tensor is handed out, the
// same rules as the reference implementation (huggingface/safetensors):
// the tensors cover the data section exactly, without overlaps or holes,
// and each one's byte size is product(shape) x dtype size. txc accepts BF16,
// F16 and F32 tensors and names any other dtype in its error.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_SAFETENSORS_SAFETENSORSFILE_H
#define TXC_RUNTIME_SAFETENSORS_SAFETENSORSFILE_H

#include "runtime/safetensors/MappedFile.h"
#include "txc/DType.h"
#include "txc/Status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace txc {

/// The reference implementation's bound; real headers are well under 10 MB.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
/// Far above any weight's rank; bounds work on hostile shapes.
inline constexpr size_t kMaxTensorRank = 8;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
  /// [dataBegin, dataEnd) within the data section.
  uint64_t dataBegin = 0;
  uint64_t dataEnd = 0;

  uint64_t byteSize() const { return dataEnd - dataBegin; }
  uint64_t numElements() const { return byteSize() / dtypeSize(dtype); }
};

/// What a header says, validated against the buffer it came from.
struct SafetensorsHeader {
  /// 8 + N: where the data section starts in the file.
  uint64_t dataSectionOffset = 0;
  uint64_t dataSectionBytes = 0;
  /// Sorted by name.
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

/// Validates the whole buffer of a .safetensors file. `sourceName` starts
/// every message. Pure: the fuzzer drives this directly.
StatusOr<SafetensorsHeader> parseSafetensors(const std::byte *bytes, uint64_t size,
                                             const std::string &sourceName);

/// "[4096, 128]": shapes in messages.
std::string formatShape(const std::vector<int64_t> &shape);

class SafetensorsFile {
public:
  /// Maps `path` and validates its header.
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string &path);

  const std::string &path() const { return file_->path(); }
  const SafetensorsHeader &header() const { return header_; }
  const std::vector<TensorInfo> &tensors() const { return header_.tensors; }
  /// nullptr when absent.
  const TensorInfo *find(std::string_view name) const;
  /// The tensor's bytes inside the mapping, valid while this file lives.
  /// Not aligned: the format does not promise alignment.
  const std::byte *data(const TensorInfo &tensor) const {
    return file_->data() + header_.dataSectionOffset + tensor.dataBegin;
  }

private:
  SafetensorsFile(std::unique_ptr<MappedFile> file, SafetensorsHeader header)
      : file_(std::move(file)), header_(std::move(header)) {}

  std::unique_ptr<MappedFile> file_;
  SafetensorsHeader header_;
};

} // namespace txc

#endif // TXC_RUNTIME_SAFETENSORS_SAFETENSORSFILE_H
