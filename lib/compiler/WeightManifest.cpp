//===- WeightManifest.cpp - resolve and materialise plan weights -------------===//

#include "lib/compiler/WeightManifest.h"

#include "dialects/tx/TxOps.h"
#include "runtime/safetensors/Checkpoint.h"
#include "txc/artifact/ArtifactWriter.h"
#include "txc/artifact/ColumnScale.h"
#include "txc/artifact/RandomWeights.h"

#include <cstring>

using namespace mlir;

namespace txc {

namespace {

StatusOr<DType> dtypeOf(Type element) {
  if (element.isBF16())
    return DType::kBF16;
  if (element.isF16())
    return DType::kF16;
  if (element.isF32())
    return DType::kF32;
  return unimplemented("weights must be bf16, f16 or f32");
}

/// The bytes of one slice, in `target` dtype.
StatusOr<std::vector<unsigned char>> sliceBytes(const Checkpoint &checkpoint,
                                                const artifact::pb::TensorSlice &slice,
                                                DType target) {
  const CheckpointTensor *tensor = checkpoint.find(slice.name());
  if (!tensor)
    return notFound(checkpoint.source() + ": tensor '" + slice.name() + "' is missing");
  const std::vector<int64_t> &shape = tensor->shape();
  if (shape.empty() || shape.size() > 2 || slice.axis() >= int64_t(shape.size()))
    return invalidArgument(checkpoint.source() + ": cannot slice tensor '" + slice.name() + "'");
  int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
  int64_t rowBegin = 0, rowCount = rows, colBegin = 0, colCount = cols;
  if (slice.length() != 0) {
    (slice.axis() == 0 ? rowBegin : colBegin) = slice.start();
    (slice.axis() == 0 ? rowCount : colCount) = slice.length();
  }
  if (rowBegin + rowCount > rows || colBegin + colCount > cols)
    return outOfRange(checkpoint.source() + ": slice of '" + slice.name() +
                         "' lies outside the tensor");
  size_t srcSize = dtypeSize(tensor->dtype()), dstSize = dtypeSize(target);
  std::vector<unsigned char> out(size_t(rowCount * colCount) * dstSize);
  const std::byte *base = tensor->data();
  unsigned char *dst = out.data();
  for (int64_t r = rowBegin; r < rowBegin + rowCount; ++r) {
    const std::byte *src = base + (size_t(r) * cols + colBegin) * srcSize;
    if (tensor->dtype() == target) {
      std::memcpy(dst, src, size_t(colCount) * srcSize);
      dst += colCount * dstSize;
      continue;
    }
    for (int64_t c = 0; c < colCount; ++c, dst += dstSize)
      artifact::floatToElement(
          artifact::elementToFloat(reinterpret_cast<const unsigned char *>(src) + c * srcSize,
                                   tensor->dtype()),
          dst, target);
  }
  return out;
}

std::string sliceName(const artifact::pb::TensorSlice &slice) {
  if (slice.length() == 0)
    return slice.name();
  return slice.name() + "@axis" + std::to_string(slice.axis()) + "[" +
         std::to_string(slice.start()) + ":" + std::to_string(slice.start() + slice.length()) +
         "]";
}

} // namespace

StatusOr<WeightDescriptor> WeightManifest::describe(Value v, int64_t rank, int64_t tp) const {
  auto type = cast<RankedTensorType>(v.getType());
  WeightDescriptor desc;
  TXC_ASSIGN_OR_RETURN(desc.dtype, dtypeOf(type.getElementType()));
  desc.shape.assign(type.getShape().begin(), type.getShape().end());

  if (auto weight = v.getDefiningOp<tx::WeightOp>()) {
    artifact::pb::TensorSlice slice;
    slice.set_name(weight.getName().str());
    if (weight.getShardDim()) {
      int64_t dim = *weight.getShardDim(), parts = *weight.getShardParts();
      int64_t part = rank * parts / tp, size = type.getDimSize(dim);
      slice.set_axis(dim);
      slice.set_start(part * size);
      slice.set_length(size);
    }
    desc.name = sliceName(slice);
    desc.sources.push_back(slice);
    return desc;
  }
  if (auto concat = v.getDefiningOp<tx::ConcatOp>()) {
    if (concat.getDim() != 0)
      return unimplemented("only row-wise weight concatenations can be stored");
    for (Value input : concat.getInputs()) {
      TXC_ASSIGN_OR_RETURN(WeightDescriptor part, describe(input, rank, tp));
      desc.name += (desc.name.empty() ? "" : " + ") + part.name;
      desc.sources.insert(desc.sources.end(), part.sources.begin(), part.sources.end());
    }
    return desc;
  }
  if (auto scaled = v.getDefiningOp<tx::ScaleColumnsOp>()) {
    TXC_ASSIGN_OR_RETURN(desc, describe(scaled.getInput(), rank, tp));
    TXC_ASSIGN_OR_RETURN(WeightDescriptor scale, describe(scaled.getScale(), rank, tp));
    if (desc.column_scale || scale.column_scale || scale.sources.size() != 1)
      return unimplemented("a weight's columns can be scaled once, by one checkpoint tensor");
    desc.column_scale = scale.sources.front();
    desc.name += " * " + scale.name;
    return desc;
  }
  return internalError(
      "a weight operand is neither tx.weight nor a tx.concat or tx.scale_columns of weights");
}

StatusOr<uint32_t> WeightManifest::indexOf(Value v, int64_t rank, int64_t tp) {
  TXC_ASSIGN_OR_RETURN(WeightDescriptor desc, describe(v, rank, tp));
  auto [it, inserted] = byName_.try_emplace(desc.name, uint32_t(entries_.size()));
  if (inserted)
    entries_.push_back(std::move(desc));
  return it->second;
}

uint64_t WeightManifest::totalBytes() const {
  uint64_t total = 0;
  for (const WeightDescriptor &entry : entries_) {
    uint64_t elements = 1;
    for (int64_t d : entry.shape)
      elements *= uint64_t(d);
    total += elements * dtypeSize(entry.dtype);
  }
  return total;
}

Status WeightManifest::addTo(artifact::ArtifactWriter &writer, const Checkpoint *checkpoint) const {
  for (const WeightDescriptor &entry : entries_) {
    bool whole = entry.sources.size() == 1 && entry.sources[0].length() == 0 &&
                 !entry.column_scale;
    if (!checkpoint) {
      std::vector<artifact::pb::TensorSlice> sources;
      if (!whole)
        sources = entry.sources;
      TXC_RETURN_IF_ERROR(writer
                              .addExternalWeight(entry.name, entry.dtype, entry.shape, sources, 0,
                                                 entry.column_scale ? &*entry.column_scale : nullptr)
                              .status());
      continue;
    }
    const CheckpointTensor *tensor = whole ? checkpoint->find(entry.name) : nullptr;
    if (tensor && tensor->dtype() == entry.dtype) {
      // The common case: the mmapped checkpoint bytes go in as they are.
      TXC_RETURN_IF_ERROR(writer
                              .addWeight(entry.name, entry.dtype, entry.shape, tensor->data(),
                                         tensor->byteSize())
                              .status());
      continue;
    }
    std::vector<unsigned char> bytes;
    for (const artifact::pb::TensorSlice &slice : entry.sources) {
      TXC_ASSIGN_OR_RETURN(std::vector<unsigned char> part,
                           sliceBytes(*checkpoint, slice, entry.dtype));
      bytes.insert(bytes.end(), part.begin(), part.end());
    }
    if (entry.column_scale) {
      // The scale in the weight's dtype, as the loader reads it from a
      // checkpoint for a stripped artifact: both give the same bytes.
      TXC_ASSIGN_OR_RETURN(std::vector<unsigned char> scale,
                           sliceBytes(*checkpoint, *entry.column_scale, entry.dtype));
      if (entry.shape.size() != 2 ||
          scale.size() != size_t(entry.shape[1]) * dtypeSize(entry.dtype))
        return invalidArgument("weight '" + entry.name + "': its column scale '" +
                               entry.column_scale->name() + "' does not match its columns");
      TXC_RETURN_IF_ERROR(artifact::scaleColumns(bytes.data(), entry.dtype, entry.shape[0],
                                                 entry.shape[1], scale.data()));
    }
    TXC_RETURN_IF_ERROR(
        writer.addWeightCopy(entry.name, entry.dtype, entry.shape, std::move(bytes)).status());
  }
  return Status::ok();
}

} // namespace txc
