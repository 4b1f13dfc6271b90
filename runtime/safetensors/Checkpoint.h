//===- Checkpoint.h - All tensors of a model, one file or sharded -*- C++ -*-===//
//
// A Hugging Face model directory holds either model.safetensors or a sharded
// set: model.safetensors.index.json ({"weight_map": {tensor: shard file}})
// beside model-0000K-of-0000N.safetensors. Checkpoint opens either, validates
// every file, and checks that each tensor sits in the shard the index names
// (and nowhere else), so callers see one flat, name-sorted tensor list.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_SAFETENSORS_CHECKPOINT_H
#define TXC_RUNTIME_SAFETENSORS_CHECKPOINT_H

#include "runtime/safetensors/SafetensorsFile.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace txc {

inline constexpr const char *kSafetensorsIndexName = "model.safetensors.index.json";
inline constexpr const char *kSingleSafetensorsName = "model.safetensors";

/// One tensor of a checkpoint and the file that holds it.
struct CheckpointTensor {
  const TensorInfo *info;
  const SafetensorsFile *file;

  const std::string &name() const { return info->name; }
  DType dtype() const { return info->dtype; }
  const std::vector<int64_t> &shape() const { return info->shape; }
  uint64_t byteSize() const { return info->byteSize(); }
  /// Unaligned bytes in the file's mapping; see SafetensorsFile::data.
  const std::byte *data() const { return file->data(*info); }
  const std::string &filePath() const { return file->path(); }
};

/// The parsed index: tensor name -> shard file name (a bare name in the
/// index's directory).
struct ShardIndex {
  std::map<std::string, std::string> weightMap;
};

/// Validates an index file's text. Pure: the fuzzer drives it directly.
StatusOr<ShardIndex> parseShardIndex(std::string_view text, const std::string &sourceName);

class Checkpoint {
public:
  /// `path` is a model directory (the index wins over model.safetensors when
  /// both exist), a .safetensors file, or a *.index.json file.
  static StatusOr<Checkpoint> open(const std::string &path);

  /// The path messages name for the checkpoint as a whole.
  const std::string &source() const { return source_; }
  /// Every tensor, sorted by name.
  const std::vector<CheckpointTensor> &tensors() const { return tensors_; }
  /// nullptr when absent.
  const CheckpointTensor *find(std::string_view name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>> &files() const { return files_; }

private:
  static StatusOr<Checkpoint> openSingle(const std::string &path);
  static StatusOr<Checkpoint> openSharded(const std::string &indexPath);
  void indexTensors();

  std::string source_;
  /// unique_ptr: CheckpointTensor points into these, and must survive moves.
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<CheckpointTensor> tensors_;
};

} // namespace txc

#endif // TXC_RUNTIME_SAFETENSORS_CHECKPOINT_H
