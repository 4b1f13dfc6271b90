//===- ArtifactWriter.cpp - Lay out and write a .txm file -----------------===//
#include "txc/artifact/ArtifactWriter.h"
#include "txc/artifact/Hash.h"
#include "runtime/safetensors/SafetensorsFile.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TXC_VERSION
#error "TXC_VERSION must be defined by the build (CMake's PROJECT_VERSION)"
#endif

namespace txc::artifact {
namespace {

std::string serializeDeterministic(const pb::Artifact &message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    // Map fields (launch attributes) serialize in hash order otherwise, and
    // the content hash must not depend on it.
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

// Closes and removes the temporary file unless the write was committed.
class TemporaryFile {
public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "wb");
  }
  ~TemporaryFile() {
    if (file_ != nullptr)
      std::fclose(file_);
    if (!committed_)
      std::remove(path_.c_str());
  }
  std::FILE *get() { return file_; }
  const std::string &path() const { return path_; }
  Status commitAs(const std::string &final_path) {
    std::FILE *file = file_;
    file_ = nullptr;
    if (std::fflush(file) != 0 || ::fsync(::fileno(file)) != 0) {
      std::fclose(file);
      return ioError(final_path + ": cannot flush: " + std::strerror(errno));
    }
    if (std::fclose(file) != 0)
      return ioError(final_path + ": cannot close: " + std::strerror(errno));
    if (std::rename(path_.c_str(), final_path.c_str()) != 0)
      return ioError(final_path + ": cannot rename " + path_ + " into place: " +
                     std::strerror(errno));
    committed_ = true;
    return Status::ok();
  }

private:
  std::string path_;
  std::FILE *file_ = nullptr;
  bool committed_ = false;
};

Status writeAll(std::FILE *file, const void *data, size_t size,
                const std::string &path) {
  if (size > 0 && std::fwrite(data, 1, size, file) != size)
    return ioError(path + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

Status writeZeros(std::FILE *file, uint64_t count, const std::string &path) {
  static const unsigned char kZeros[kBlobAlignment] = {};
  while (count > 0) {
    size_t chunk = count < kBlobAlignment ? count : kBlobAlignment;
    TXC_RETURN_IF_ERROR(writeAll(file, kZeros, chunk, path));
    count -= chunk;
  }
  return Status::ok();
}

} // namespace

const char *txcVersionString() { return TXC_VERSION; }

uint64_t computeContentHash(const pb::Artifact &message) {
  pb::Artifact copy = message;
  copy.set_content_hash(0);
  std::string bytes = serializeDeterministic(copy);
  return xxh64(bytes.data(), bytes.size());
}

ArtifactWriter::ArtifactWriter(pb::Artifact message)
    : message_(std::move(message)) {
  // The manifest is the writer's: it must line up with weight_data_.
  message_.clear_weights();
}

StatusOr<uint32_t> ArtifactWriter::addEntry(std::string name, DType dtype,
                                            std::vector<int64_t> shape,
                                            size_t bytes) {
  if (index_by_name_.count(name) != 0)
    return invalidArgument("weight '" + name + "' added twice");
  if (dtypeSize(dtype) == 0)
    return invalidArgument("weight '" + name + "' has no valid dtype");
  std::optional<uint64_t> elements = numElements(shape);
  if (!elements)
    return invalidArgument("weight '" + name + "' has an invalid shape " +
                           formatShape(shape));
  uint64_t expected = *elements * dtypeSize(dtype);
  if (bytes != expected)
    return invalidArgument("weight '" + name + "': " + std::to_string(bytes) +
                           " bytes given, " + std::string(dtypeName(dtype)) +
                           " " + formatShape(shape) + " needs " +
                           std::to_string(expected));
  pb::WeightEntry *entry = message_.add_weights();
  entry->set_name(name);
  entry->set_dtype(toProtoDType(dtype));
  for (int64_t dim : shape)
    entry->add_shape(dim);
  entry->set_bytes(bytes);
  uint32_t index = static_cast<uint32_t>(message_.weights_size() - 1);
  index_by_name_.emplace(std::move(name), index);
  weight_data_.push_back(nullptr);
  return index;
}

StatusOr<uint32_t> ArtifactWriter::addWeight(std::string name, DType dtype,
                                             std::vector<int64_t> shape,
                                             const void *data, size_t bytes) {
  if (data == nullptr && bytes != 0)
    return invalidArgument("weight '" + name + "' has no data");
  TXC_ASSIGN_OR_RETURN(uint32_t index, addEntry(std::move(name), dtype,
                                                std::move(shape), bytes));
  // A zero-byte tensor still needs a non-null marker to count as embedded.
  static const unsigned char kEmpty = 0;
  weight_data_[index] =
      data ? static_cast<const unsigned char *>(data) : &kEmpty;
  return index;
}

StatusOr<uint32_t> ArtifactWriter::addWeightCopy(std::string name, DType dtype,
                                                 std::vector<int64_t> shape,
                                                 std::vector<unsigned char> bytes) {
  auto owned = std::make_unique<std::vector<unsigned char>>(std::move(bytes));
  TXC_ASSIGN_OR_RETURN(uint32_t index,
                       addWeight(std::move(name), dtype, std::move(shape),
                                 owned->data(), owned->size()));
  owned_.push_back(std::move(owned));
  return index;
}

StatusOr<uint32_t>
ArtifactWriter::addExternalWeight(std::string name, DType dtype,
                                  std::vector<int64_t> shape,
                                  std::vector<pb::TensorSlice> sources,
                                  int64_t concat_axis,
                                  const pb::TensorSlice *column_scale) {
  if (column_scale && sources.empty())
    return invalidArgument("weight '" + name +
                           "': a column scale needs the sources it scales");
  std::optional<uint64_t> elements = numElements(shape);
  size_t bytes = elements ? *elements * dtypeSize(dtype) : 0;
  TXC_ASSIGN_OR_RETURN(uint32_t index, addEntry(std::move(name), dtype,
                                                std::move(shape), bytes));
  pb::WeightEntry *entry = message_.mutable_weights(static_cast<int>(index));
  for (pb::TensorSlice &slice : sources)
    *entry->add_sources() = std::move(slice);
  entry->set_concat_axis(concat_axis);
  if (column_scale)
    *entry->mutable_column_scale() = *column_scale;
  return index;
}

void ArtifactWriter::setRandomWeights(uint64_t seed) {
  random_weights_ = true;
  message_.set_random_weights_seed(seed);
}

Status ArtifactWriter::write(const std::string &path) {
  // The artifact is written beside `path` and renamed over it, which would
  // replace a device or FIFO (as root, -o /dev/null would delete /dev/null)
  // and fails late and obscurely on a directory.
  struct stat existing;
  if (::stat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode))
    return invalidArgument(
        path + ": " +
        (S_ISDIR(existing.st_mode) ? "is a directory" : "exists and is not a regular file") +
        "; name a file for the artifact");
  size_t embedded = 0;
  for (const unsigned char *data : weight_data_)
    embedded += data != nullptr;
  if (embedded != 0 && embedded != weight_data_.size()) {
    for (size_t i = 0; i < weight_data_.size(); ++i)
      if (weight_data_[i] == nullptr)
        return invalidArgument(path + ": weight '" + message_.weights(i).name() +
                               "' has no bytes, but " +
                               std::to_string(embedded) +
                               " other weights are embedded; an artifact "
                               "embeds all weights or none");
  }
  bool has_blob = embedded != 0;
  if (has_blob && random_weights_)
    return invalidArgument(path + ": random weights requested, but weights "
                                  "are embedded");

  // Lay out the blob and checksum each weight. Checksums are computed here,
  // not at add time, so callers may fill mmapped buffers after adding.
  uint64_t blob_bytes = 0;
  for (int i = 0; i < message_.weights_size(); ++i) {
    pb::WeightEntry *entry = message_.mutable_weights(i);
    if (has_blob) {
      uint64_t offset = alignUp(blob_bytes, kBlobAlignment);
      entry->set_offset(offset);
      entry->set_checksum(xxh64(weight_data_[i], entry->bytes()));
      blob_bytes = offset + entry->bytes();
    } else {
      entry->set_offset(0);
      entry->set_checksum(0);
    }
  }
  message_.set_weight_storage(has_blob          ? pb::WEIGHTS_EMBEDDED
                              : random_weights_ ? pb::WEIGHTS_RANDOM
                                                : pb::WEIGHTS_EXTERNAL);
  if (!has_blob && !random_weights_)
    message_.set_random_weights_seed(0);
  // Refuse to write what the loader would refuse to read.
  TXC_RETURN_IF_ERROR(validateArtifactMessage(message_, blob_bytes, path));
  message_.set_format_version(kArtifactFormatVersion);
  if (message_.txc_version().empty())
    message_.set_txc_version(txcVersionString());
  message_.set_content_hash(computeContentHash(message_));

  std::string message_bytes = serializeDeterministic(message_);
  ArtifactHeader header;
  header.message_offset = kArtifactHeaderBytes;
  header.message_bytes = message_bytes.size();
  if (has_blob) {
    header.blob_offset =
        alignUp(kArtifactHeaderBytes + message_bytes.size(), kBlobAlignment);
    header.blob_bytes = blob_bytes;
  }
  unsigned char header_bytes[kArtifactHeaderBytes];
  encodeArtifactHeader(header, header_bytes);

  TemporaryFile temp(path + ".tmp." + std::to_string(::getpid()));
  if (temp.get() == nullptr)
    return ioError(path + ": cannot create " + temp.path() + ": " +
                   std::strerror(errno));
  TXC_RETURN_IF_ERROR(writeAll(temp.get(), header_bytes, sizeof(header_bytes), path));
  TXC_RETURN_IF_ERROR(
      writeAll(temp.get(), message_bytes.data(), message_bytes.size(), path));
  if (has_blob) {
    uint64_t written = kArtifactHeaderBytes + message_bytes.size();
    TXC_RETURN_IF_ERROR(writeZeros(temp.get(), header.blob_offset - written, path));
    uint64_t blob_written = 0;
    for (int i = 0; i < message_.weights_size(); ++i) {
      const pb::WeightEntry &entry = message_.weights(i);
      TXC_RETURN_IF_ERROR(
          writeZeros(temp.get(), entry.offset() - blob_written, path));
      TXC_RETURN_IF_ERROR(
          writeAll(temp.get(), weight_data_[i], entry.bytes(), path));
      blob_written = entry.offset() + entry.bytes();
    }
  }
  return temp.commitAs(path);
}

} // namespace txc::artifact
