//===- Artifact.cpp - Load and validate a .txm file, bind its weights -----===//
#include "txc/artifact/Artifact.h"
#include "txc/artifact/ArtifactWriter.h"
#include "txc/artifact/ColumnScale.h"
#include "txc/artifact/Hash.h"
#include "txc/artifact/RandomWeights.h"

#include "SafetensorsBinding.h"
#include "runtime/safetensors/MappedFile.h"
#include "runtime/safetensors/SafetensorsFile.h"

#include <climits>
#include <cstdio>
#include <cstring>

namespace txc::artifact {
namespace {

std::string hex64(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

std::vector<int64_t> shapeOf(const pb::WeightEntry &entry) {
  return {entry.shape().begin(), entry.shape().end()};
}

uint64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  uint64_t count = 1;
  for (size_t i = begin; i < end; ++i)
    count *= static_cast<uint64_t>(shape[i]);
  return count;
}

// Builds a manifest entry that is not a checkpoint tensor itself (fused
// QKV, a tensor-parallel shard) from slices of checkpoint tensors.
Status assembleFromSlices(const pb::WeightEntry &entry, DType dtype,
                          const WeightSource &source, const std::string &path,
                          unsigned char *out) {
  std::string where = path + ": weight '" + entry.name() + "'";
  std::vector<int64_t> shape = shapeOf(entry);
  int64_t concat_axis = entry.concat_axis();
  if (concat_axis < 0 || concat_axis >= static_cast<int64_t>(shape.size()))
    return dataLoss(where + ": concat axis " + std::to_string(concat_axis) +
                    " is outside its rank " + std::to_string(shape.size()));
  size_t element = dtypeSize(dtype);
  uint64_t outer = product(shape, 0, concat_axis);
  uint64_t inner = product(shape, concat_axis + 1, shape.size()) * element;
  int64_t filled = 0; // along concat_axis

  for (const pb::TensorSlice &slice : entry.sources()) {
    std::optional<TensorView> tensor = source.findTensor(slice.name());
    if (!tensor)
      return failedPrecondition(where + " needs tensor '" + slice.name() +
                                "', which is missing from " +
                                source.description());
    if (tensor->dtype != dtype)
      return failedPrecondition(
          where + " needs '" + slice.name() + "' as " +
          std::string(dtypeName(dtype)) + ", " + source.description() +
          " has " + std::string(dtypeName(tensor->dtype)));
    const std::vector<int64_t> &from = tensor->shape;
    int64_t axis = slice.axis();
    if (axis < 0 || axis >= static_cast<int64_t>(from.size()))
      return dataLoss(where + ": slice axis " + std::to_string(axis) +
                      " of '" + slice.name() + "' is outside its rank " +
                      std::to_string(from.size()));
    int64_t length = slice.length() == 0 ? from[axis] : slice.length();
    if (slice.start() < 0 || length < 0 || slice.start() + length > from[axis])
      return failedPrecondition(
          where + " needs rows [" + std::to_string(slice.start()) + ", " +
          std::to_string(slice.start() + length) + ") of '" + slice.name() +
          "' along axis " + std::to_string(axis) + ", but " +
          source.description() + " has shape " + formatShape(from));
    std::vector<int64_t> piece_shape = from;
    piece_shape[axis] = length;
    if (piece_shape.size() != shape.size())
      return failedPrecondition(where + " " + formatShape(shape) +
                                " cannot be built from '" + slice.name() +
                                "' " + formatShape(from) + ": ranks differ");
    for (size_t d = 0; d < shape.size(); ++d)
      if (static_cast<int64_t>(d) != concat_axis && piece_shape[d] != shape[d])
        return failedPrecondition(where + " " + formatShape(shape) +
                                  " cannot be built from '" + slice.name() +
                                  "' " + formatShape(from) +
                                  ": dimension " + std::to_string(d) + " differs");
    int64_t piece_rows = piece_shape[concat_axis];
    if (filled + piece_rows > shape[concat_axis])
      return failedPrecondition(where + " " + formatShape(shape) +
                                ": its slices overfill axis " +
                                std::to_string(concat_axis));
    uint64_t needed = *numElements(from) * element;
    if (tensor->bytes != needed)
      return dataLoss(source.description() + ": tensor '" + slice.name() +
                      "' has " + std::to_string(tensor->bytes) + " bytes, " +
                      formatShape(from) + " needs " + std::to_string(needed));

    // Element (o, r, i) of the piece is (o, start + r, i) of the source
    // along `axis`, and (o', filled + r', i') of the output along
    // concat_axis. Walk the piece in row-major order, one contiguous run of
    // its innermost block at a time.
    uint64_t src_outer = product(from, 0, axis);
    uint64_t src_inner = product(from, axis + 1, from.size()) * element;
    std::vector<unsigned char> piece(product(piece_shape, 0, piece_shape.size()) *
                                     element);
    for (uint64_t o = 0; o < src_outer; ++o)
      std::memcpy(piece.data() + o * length * src_inner,
                  tensor->data + (o * from[axis] + slice.start()) * src_inner,
                  length * src_inner);
    for (uint64_t o = 0; o < outer; ++o)
      std::memcpy(out + (o * shape[concat_axis] + filled) * inner,
                  piece.data() + o * piece_rows * inner, piece_rows * inner);
    filled += piece_rows;
  }
  if (filled != shape[concat_axis])
    return failedPrecondition(where + " " + formatShape(shape) +
                              ": its slices fill " + std::to_string(filled) +
                              " of " + std::to_string(shape[concat_axis]) +
                              " along axis " + std::to_string(concat_axis));
  return Status::ok();
}

// WeightEntry::column_scale: the assembled [rows, cols] matrix's columns
// scaled by a [cols] piece of a checkpoint tensor (a folded norm weight).
Status applyColumnScale(const pb::WeightEntry &entry, DType dtype,
                        const WeightSource &source, const std::string &path,
                        unsigned char *out) {
  std::string where = path + ": weight '" + entry.name() + "'";
  const pb::TensorSlice &slice = entry.column_scale();
  std::vector<int64_t> shape = shapeOf(entry);
  if (shape.size() != 2)
    return dataLoss(where + ": a column scale needs a matrix, not shape " +
                    formatShape(shape));
  std::optional<TensorView> tensor = source.findTensor(slice.name());
  if (!tensor)
    return failedPrecondition(where + " is scaled by tensor '" + slice.name() +
                              "', which is missing from " + source.description());
  if (tensor->dtype != dtype)
    return failedPrecondition(where + " needs its scale '" + slice.name() + "' as " +
                              std::string(dtypeName(dtype)) + ", " +
                              source.description() + " has " +
                              std::string(dtypeName(tensor->dtype)));
  const int64_t start = slice.start(),
                length = slice.length() == 0 && tensor->shape.size() == 1
                             ? tensor->shape[0]
                             : slice.length();
  if (tensor->shape.size() != 1 || start < 0 || length != shape[1] ||
      start + length > tensor->shape[0] ||
      tensor->bytes != static_cast<size_t>(tensor->shape[0]) * dtypeSize(dtype))
    return failedPrecondition(where + " " + formatShape(shape) + " needs " +
                              std::to_string(shape[1]) + " scale elements from [" +
                              std::to_string(start) + ", ...) of '" + slice.name() +
                              "', but " + source.description() + " has shape " +
                              formatShape(tensor->shape));
  return scaleColumns(out, dtype, shape[0], shape[1],
                      tensor->data + static_cast<size_t>(start) * dtypeSize(dtype));
}

} // namespace

LoadedArtifact::~LoadedArtifact() = default;

StatusOr<std::unique_ptr<LoadedArtifact>>
LoadedArtifact::load(const std::string &path, const LoadOptions &options) {
  std::unique_ptr<LoadedArtifact> artifact(new LoadedArtifact());
  artifact->path_ = path;
  TXC_ASSIGN_OR_RETURN(artifact->file_, MappedFile::open(path));
  const MappedFile &file = *artifact->file_;
  const auto *file_bytes = reinterpret_cast<const unsigned char *>(file.data());
  TXC_ASSIGN_OR_RETURN(artifact->header_,
                       decodeArtifactHeader(file_bytes, file.size(), path));
  const ArtifactHeader &header = artifact->header_;

  if (header.message_bytes > static_cast<uint64_t>(INT_MAX))
    return unimplemented(path + ": message of " +
                         std::to_string(header.message_bytes) +
                         " bytes exceeds protobuf's 2 GiB limit");
  pb::Artifact &message = artifact->message_;
  if (!message.ParseFromArray(file_bytes + header.message_offset,
                              static_cast<int>(header.message_bytes)))
    return dataLoss(path + ": corrupt: the artifact message (" +
                    std::to_string(header.message_bytes) +
                    " bytes) does not parse");
  if (message.format_version() != header.format_version)
    return dataLoss(path + ": corrupt: header says format version " +
                    std::to_string(header.format_version) +
                    ", message says " + std::to_string(message.format_version()));
  if (options.verify_content_hash) {
    uint64_t actual = computeContentHash(message);
    if (actual != message.content_hash())
      return dataLoss(path + ": content hash mismatch: recorded " +
                      hex64(message.content_hash()) + ", computed " +
                      hex64(actual) + " (the file was modified or corrupted)");
  }
  TXC_RETURN_IF_ERROR(validateArtifactMessage(message, header.blob_bytes, path));
  if (message.weight_storage() == pb::WEIGHTS_EMBEDDED &&
      message.weights_size() > 0 && header.blob_offset == 0)
    return dataLoss(path + ": corrupt: weights are embedded but the file has "
                           "no weight blob");

  if (options.bind_weights)
    TXC_RETURN_IF_ERROR(artifact->bindWeights(options));
  return artifact;
}

Status LoadedArtifact::bindWeights(const LoadOptions &options) {
  if (options.random_weights_seed)
    return bindRandom(*options.random_weights_seed);
  if (options.weight_source) {
    source_ = options.weight_source;
    weight_origin_ = source_->description();
    return bindFromSource(*source_, options.verify_weight_checksums);
  }
  if (!options.weights_dir.empty()) {
    TXC_ASSIGN_OR_RETURN(source_, openSafetensorsWeightSource(options.weights_dir));
    weight_origin_ = source_->description();
    return bindFromSource(*source_, options.verify_weight_checksums);
  }
  switch (message_.weight_storage()) {
  case pb::WEIGHTS_EMBEDDED:
    weight_origin_ = "embedded blob";
    return bindFromBlob(options.verify_weight_checksums);
  case pb::WEIGHTS_RANDOM:
    return bindRandom(message_.random_weights_seed());
  case pb::WEIGHTS_EXTERNAL:
    return failedPrecondition(
        path_ + " is weight-stripped: pass a safetensors directory with its " +
        std::to_string(message_.weights_size()) +
        " weights (--weights DIR) or --random-weights SEED");
  default:
    return unimplemented(path_ + ": unknown weight storage " +
                         std::to_string(message_.weight_storage()));
  }
}

Status LoadedArtifact::bindFromBlob(bool verify_checksums) {
  const unsigned char *blob =
      reinterpret_cast<const unsigned char *>(file_->data()) + header_.blob_offset;
  weights_.reserve(message_.weights_size());
  for (const pb::WeightEntry &entry : message_.weights()) {
    BoundWeight bound{&entry, fromProtoDType(entry.dtype()), shapeOf(entry),
                      blob + entry.offset(), entry.bytes()};
    if (verify_checksums && entry.checksum() != 0) {
      uint64_t actual = xxh64(bound.data, bound.bytes);
      if (actual != entry.checksum())
        return dataLoss(path_ + ": weight '" + entry.name() +
                        "' checksum mismatch: recorded " + hex64(entry.checksum()) +
                        ", computed " + hex64(actual) + " (the blob is corrupt)");
    }
    weights_.push_back(std::move(bound));
  }
  return Status::ok();
}

Status LoadedArtifact::bindFromSource(const WeightSource &source,
                                      bool verify_checksums) {
  weights_.reserve(message_.weights_size());
  for (const pb::WeightEntry &entry : message_.weights()) {
    DType dtype = fromProtoDType(entry.dtype());
    std::vector<int64_t> shape = shapeOf(entry);
    std::string where = "weight '" + entry.name() + "'";
    BoundWeight bound{&entry, dtype, shape, nullptr, entry.bytes()};
    if (entry.sources_size() > 0) {
      auto buffer = std::make_unique<unsigned char[]>(entry.bytes());
      TXC_RETURN_IF_ERROR(
          assembleFromSlices(entry, dtype, source, path_, buffer.get()));
      if (entry.has_column_scale())
        TXC_RETURN_IF_ERROR(
            applyColumnScale(entry, dtype, source, path_, buffer.get()));
      bound.data = buffer.get();
      owned_buffers_.push_back(std::move(buffer));
    } else if (entry.has_column_scale()) {
      return dataLoss(where + " in " + path_ +
                      " has a column scale but no sources to scale");
    } else {
      std::optional<TensorView> tensor = source.findTensor(entry.name());
      if (!tensor)
        return failedPrecondition(
            where + " (" + std::string(dtypeName(dtype)) + " " +
            formatShape(shape) + ") from the manifest of " + path_ +
            " is missing from " + source.description());
      if (tensor->dtype != dtype)
        return failedPrecondition(where + ": " + path_ + " expects " +
                                  std::string(dtypeName(dtype)) + ", " +
                                  source.description() + " has " +
                                  std::string(dtypeName(tensor->dtype)));
      if (tensor->shape != shape)
        return failedPrecondition(where + ": " + path_ + " expects shape " +
                                  formatShape(shape) + ", " +
                                  source.description() + " has " +
                                  formatShape(tensor->shape));
      if (tensor->bytes != entry.bytes())
        return dataLoss(where + ": " + source.description() + " holds " +
                        std::to_string(tensor->bytes) + " bytes, " +
                        formatShape(shape) + " needs " +
                        std::to_string(entry.bytes()));
      bound.data = tensor->data;
    }
    if (verify_checksums && entry.checksum() != 0) {
      uint64_t actual = xxh64(bound.data, bound.bytes);
      if (actual != entry.checksum())
        return failedPrecondition(where + " from " + source.description() +
                                  " differs from the one " + path_ +
                                  " was compiled with (checksum " +
                                  hex64(actual) + ", expected " +
                                  hex64(entry.checksum()) + ")");
    }
    weights_.push_back(std::move(bound));
  }
  return Status::ok();
}

Status LoadedArtifact::bindRandom(uint64_t seed) {
  weight_origin_ = "random weights (seed " + std::to_string(seed) + ")";
  weights_.reserve(message_.weights_size());
  for (const pb::WeightEntry &entry : message_.weights()) {
    DType dtype = fromProtoDType(entry.dtype());
    std::vector<int64_t> shape = shapeOf(entry);
    auto buffer = std::make_unique<unsigned char[]>(entry.bytes());
    TXC_RETURN_IF_ERROR(fillRandomWeights(seed, entry.name(), dtype, shape, 0,
                                          buffer.get(), entry.bytes()));
    weights_.push_back(
        BoundWeight{&entry, dtype, std::move(shape), buffer.get(), entry.bytes()});
    owned_buffers_.push_back(std::move(buffer));
  }
  return Status::ok();
}

const BoundWeight *LoadedArtifact::findWeight(std::string_view name) const {
  for (const BoundWeight &weight : weights_)
    if (weight.entry->name() == name)
      return &weight;
  return nullptr;
}

const pb::TargetKernels *LoadedArtifact::kernelsFor(std::string_view target) const {
  for (const pb::TargetKernels &kernels : message_.kernels())
    if (kernels.target() == target)
      return &kernels;
  return nullptr;
}

} // namespace txc::artifact
