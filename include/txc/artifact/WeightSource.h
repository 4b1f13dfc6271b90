//===- WeightSource.h - Where a loaded artifact gets its weights -*- C++ -*-===//
//
// A loaded artifact binds every manifest entry to bytes from one source: its
// own mmapped blob, a safetensors directory (weight-stripped artifacts), or
// a seeded generator. The binding code checks names, dtypes and shapes
// against the manifest once, whatever the source, so a new checkpoint
// reader only implements this small interface.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_WEIGHTSOURCE_H
#define TXC_ARTIFACT_WEIGHTSOURCE_H

#include "txc/DType.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace txc::artifact {

/// A tensor's metadata and its bytes, borrowed from the source that owns
/// them (row-major, contiguous).
struct TensorView {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> shape;
  const unsigned char *data = nullptr;
  size_t bytes = 0;
};

class WeightSource {
public:
  virtual ~WeightSource() = default;
  /// Names the source in error messages, e.g.
  /// "safetensors directory /models/qwen3".
  virtual std::string description() const = 0;
  /// The tensor called `name`, or nullopt when the source has none. The
  /// bytes stay valid for as long as the source lives.
  virtual std::optional<TensorView> findTensor(std::string_view name) const = 0;
};

/// Tensors held in memory: tests, and compilers that synthesise weights.
class InMemoryWeightSource : public WeightSource {
public:
  explicit InMemoryWeightSource(std::string description = "in-memory weights")
      : description_(std::move(description)) {}

  void addTensor(std::string name, DType dtype, std::vector<int64_t> shape,
                 std::vector<unsigned char> bytes);

  std::string description() const override { return description_; }
  std::optional<TensorView> findTensor(std::string_view name) const override;

private:
  struct Stored {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<unsigned char> bytes;
  };
  std::string description_;
  std::map<std::string, Stored, std::less<>> tensors_;
};

} // namespace txc::artifact

#endif // TXC_ARTIFACT_WEIGHTSOURCE_H
