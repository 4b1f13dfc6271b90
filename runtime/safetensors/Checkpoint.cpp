//===- Checkpoint.cpp - All tensors of a model, one file or sharded -------===//

#include "runtime/safetensors/Checkpoint.h"

#include "runtime/safetensors/StrictJson.h"

#include <algorithm>
#include <set>
#include <sys/stat.h>

namespace txc {

namespace {

bool isDirectory(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool exists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Shards live beside the index; a name with a slash or a dot-dot could
/// point anywhere on the machine.
bool isPlainFileName(const std::string &name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

} // namespace

StatusOr<ShardIndex> parseShardIndex(std::string_view text, const std::string &sourceName) {
  TXC_ASSIGN_OR_RETURN(nlohmann::json index, parseStrictJson(text, sourceName));
  if (!index.is_object())
    return invalidArgument(sourceName + ": index is JSON but not an object");
  auto weightMap = index.find("weight_map");
  if (weightMap == index.end() || !weightMap->is_object())
    return invalidArgument(sourceName + ": missing or non-object \"weight_map\"");
  if (weightMap->empty())
    return invalidArgument(sourceName + ": \"weight_map\" lists no tensors");
  ShardIndex result;
  for (const auto &[tensorName, shard] : weightMap->items()) {
    if (!shard.is_string())
      return invalidArgument(sourceName + ": tensor " + quoteForMessage(tensorName) +
                             ": shard is not a string");
    const std::string &shardName = shard.get_ref<const std::string &>();
    if (!isPlainFileName(shardName))
      return invalidArgument(sourceName + ": tensor " + quoteForMessage(tensorName) + ": shard " +
                             quoteForMessage(shardName) +
                             " is not a file name in the index's directory");
    result.weightMap.emplace(tensorName, shardName);
  }
  return result;
}

StatusOr<Checkpoint> Checkpoint::open(const std::string &path) {
  if (isDirectory(path)) {
    std::string directory = endsWith(path, "/") ? path : path + "/";
    if (exists(directory + kSafetensorsIndexName))
      return openSharded(directory + kSafetensorsIndexName);
    if (exists(directory + kSingleSafetensorsName))
      return openSingle(directory + kSingleSafetensorsName);
    return notFound(path + ": neither " + kSingleSafetensorsName + " nor " + kSafetensorsIndexName +
                    " is there");
  }
  if (endsWith(path, ".json"))
    return openSharded(path);
  return openSingle(path);
}

StatusOr<Checkpoint> Checkpoint::openSingle(const std::string &path) {
  TXC_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
  Checkpoint checkpoint;
  checkpoint.source_ = path;
  checkpoint.files_.push_back(std::move(file));
  checkpoint.indexTensors();
  return checkpoint;
}

StatusOr<Checkpoint> Checkpoint::openSharded(const std::string &indexPath) {
  TXC_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> indexFile, MappedFile::open(indexPath));
  if (indexFile->size() > kMaxSafetensorsHeaderBytes)
    return invalidArgument(indexPath + ": " + std::to_string(indexFile->size()) +
                           " bytes, more than any index needs");
  std::string_view text(reinterpret_cast<const char *>(indexFile->data()), indexFile->size());
  TXC_ASSIGN_OR_RETURN(ShardIndex index, parseShardIndex(text, indexPath));

  // The first tensor mapped to each shard names it in a "missing" message.
  std::map<std::string, std::string> firstTensorOfShard;
  for (const auto &[tensorName, shardName] : index.weightMap)
    firstTensorOfShard.emplace(shardName, tensorName);

  Checkpoint checkpoint;
  checkpoint.source_ = indexPath;
  std::string directory = directoryOf(indexPath);
  std::map<std::string, const SafetensorsFile *> shardByName;
  for (const auto &[shardName, tensorName] : firstTensorOfShard) {
    std::string shardPath = directory + "/" + shardName;
    StatusOr<std::unique_ptr<SafetensorsFile>> shard = SafetensorsFile::open(shardPath);
    if (!shard.isOk() && shard.status().code() == StatusCode::kNotFound)
      return notFound(indexPath + ": tensor " + quoteForMessage(tensorName) + ": its shard " +
                      quoteForMessage(shardName) + " does not exist");
    if (!shard.isOk())
      return shard.status();
    const SafetensorsFile &file = *shard.value();
    for (const TensorInfo &tensor : file.tensors()) {
      auto mapped = index.weightMap.find(tensor.name);
      if (mapped == index.weightMap.end())
        return failedPrecondition(shardPath + ": tensor " + quoteForMessage(tensor.name) +
                                  " is not listed in " + indexPath);
      if (mapped->second != shardName)
        return failedPrecondition(shardPath + ": tensor " + quoteForMessage(tensor.name) +
                                  " is here but the index puts it in " +
                                  quoteForMessage(mapped->second));
    }
    shardByName[shardName] = shard.value().get();
    checkpoint.files_.push_back(std::move(shard.value()));
  }
  for (const auto &[tensorName, shardName] : index.weightMap) {
    if (!shardByName.at(shardName)->find(tensorName))
      return failedPrecondition(indexPath + ": tensor " + quoteForMessage(tensorName) +
                                ": the index puts it in " + quoteForMessage(shardName) +
                                ", which does not hold it");
  }
  checkpoint.indexTensors();
  return checkpoint;
}

void Checkpoint::indexTensors() {
  tensors_.clear();
  for (const auto &file : files_)
    for (const TensorInfo &tensor : file->tensors())
      tensors_.push_back(CheckpointTensor{&tensor, file.get()});
  std::sort(
      tensors_.begin(), tensors_.end(),
      [](const CheckpointTensor &a, const CheckpointTensor &b) { return a.name() < b.name(); });
}

const CheckpointTensor *Checkpoint::find(std::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const CheckpointTensor &tensor, std::string_view key) { return tensor.name() < key; });
  if (it == tensors_.end() || it->name() != name)
    return nullptr;
  return &*it;
}

} // namespace txc
