//===- SafetensorsFile.cpp - One validated, mmapped .safetensors ----------===//

#include "runtime/safetensors/SafetensorsFile.h"

#include "runtime/safetensors/StrictJson.h"

#include <algorithm>
#include <limits>

namespace txc {

namespace {

constexpr const char *kSupportedDTypes = "BF16, F16, F32";

bool isSupportedDType(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32;
}

/// Reads a JSON integer in [0, max]; false for floats, negatives, strings.
bool readUnsigned(const nlohmann::json &value, uint64_t max, uint64_t &out) {
  if (value.is_number_unsigned()) {
    out = value.get<uint64_t>();
  } else if (value.is_number_integer()) {
    int64_t signedValue = value.get<int64_t>();
    if (signedValue < 0)
      return false;
    out = static_cast<uint64_t>(signedValue);
  } else {
    return false;
  }
  return out <= max;
}

/// Prefixes messages about one tensor: "FILE: tensor 'NAME': ".
struct TensorContext {
  const std::string &sourceName;
  const std::string &tensorName;
  Status error(std::string problem) const {
    return invalidArgument(sourceName + ": tensor " + quoteForMessage(tensorName) + ": " + problem);
  }
};

StatusOr<TensorInfo> parseTensorEntry(const std::string &name, const nlohmann::json &entry,
                                      uint64_t dataSectionBytes, const TensorContext &context) {
  if (!entry.is_object())
    return context.error("entry is not a JSON object");
  TensorInfo tensor;
  tensor.name = name;

  auto dtypeField = entry.find("dtype");
  if (dtypeField == entry.end() || !dtypeField->is_string())
    return context.error("missing or non-string \"dtype\"");
  const std::string &dtypeName = dtypeField->get_ref<const std::string &>();
  std::optional<DType> dtype = parseDType(dtypeName);
  if (!dtype)
    return context.error("unknown dtype " + quoteForMessage(dtypeName));
  if (!isSupportedDType(*dtype))
    return context.error("dtype " + dtypeName + " is not supported (txc reads " + kSupportedDTypes +
                         ")");
  tensor.dtype = *dtype;

  auto shapeField = entry.find("shape");
  if (shapeField == entry.end() || !shapeField->is_array())
    return context.error("missing or non-array \"shape\"");
  if (shapeField->size() > kMaxTensorRank)
    return context.error("rank " + std::to_string(shapeField->size()) + " exceeds " +
                         std::to_string(kMaxTensorRank));
  uint64_t numElements = 1;
  bool overflowed = false;
  for (const nlohmann::json &dim : *shapeField) {
    uint64_t extent;
    if (!readUnsigned(dim, std::numeric_limits<int64_t>::max(), extent))
      return context.error("shape holds " + quoteForMessage(dim.dump()) +
                           ", not a non-negative integer");
    tensor.shape.push_back(static_cast<int64_t>(extent));
    overflowed |= __builtin_mul_overflow(numElements, extent, &numElements);
  }

  auto offsetsField = entry.find("data_offsets");
  if (offsetsField == entry.end() || !offsetsField->is_array() || offsetsField->size() != 2 ||
      !readUnsigned((*offsetsField)[0], std::numeric_limits<uint64_t>::max(), tensor.dataBegin) ||
      !readUnsigned((*offsetsField)[1], std::numeric_limits<uint64_t>::max(), tensor.dataEnd))
    return context.error("\"data_offsets\" must be two non-negative integers [begin, end]");
  std::string range = "data_offsets [" + std::to_string(tensor.dataBegin) + ", " +
                      std::to_string(tensor.dataEnd) + ")";
  if (tensor.dataBegin > tensor.dataEnd)
    return context.error(range + " ends before it begins");
  if (tensor.dataEnd > dataSectionBytes)
    return context.error(range + " run past the data section (" + std::to_string(dataSectionBytes) +
                         " bytes)");

  uint64_t expectedBytes;
  if (overflowed || __builtin_mul_overflow(numElements, dtypeSize(tensor.dtype), &expectedBytes))
    return context.error("shape " + formatShape(tensor.shape) + " overflows 64-bit byte counts");
  if (expectedBytes != tensor.byteSize())
    return context.error(range + " hold " + std::to_string(tensor.byteSize()) +
                         " bytes but shape " + formatShape(tensor.shape) + " of " + dtypeName +
                         " needs " + std::to_string(expectedBytes));
  return tensor;
}

/// The data section must be covered exactly: no two tensors share a byte, no
/// byte belongs to none (the reference implementation rejects both).
Status checkCoverage(const std::vector<TensorInfo> &tensors, uint64_t dataSectionBytes,
                     const std::string &sourceName) {
  std::vector<const TensorInfo *> byOffset;
  byOffset.reserve(tensors.size());
  for (const TensorInfo &tensor : tensors)
    byOffset.push_back(&tensor);
  std::sort(byOffset.begin(), byOffset.end(), [](const TensorInfo *a, const TensorInfo *b) {
    return std::tie(a->dataBegin, a->dataEnd, a->name) <
           std::tie(b->dataBegin, b->dataEnd, b->name);
  });
  uint64_t coveredUpTo = 0;
  const TensorInfo *previous = nullptr;
  for (const TensorInfo *tensor : byOffset) {
    if (tensor->dataBegin < coveredUpTo)
      return invalidArgument(
          sourceName + ": tensor " + quoteForMessage(tensor->name) + ": data_offsets [" +
          std::to_string(tensor->dataBegin) + ", " + std::to_string(tensor->dataEnd) +
          ") overlap tensor " + quoteForMessage(previous->name) + " [" +
          std::to_string(previous->dataBegin) + ", " + std::to_string(previous->dataEnd) + ")");
    if (tensor->dataBegin > coveredUpTo)
      return invalidArgument(
          sourceName + ": tensor " + quoteForMessage(tensor->name) + ": data_offsets begin at " +
          std::to_string(tensor->dataBegin) + ", leaving bytes [" + std::to_string(coveredUpTo) +
          ", " + std::to_string(tensor->dataBegin) + ") of the data section to no tensor");
    coveredUpTo = tensor->dataEnd;
    previous = tensor;
  }
  if (coveredUpTo != dataSectionBytes)
    return invalidArgument(sourceName + ": the data section has " +
                           std::to_string(dataSectionBytes - coveredUpTo) +
                           " bytes after the last tensor ends at " + std::to_string(coveredUpTo) +
                           " (truncated header or trailing garbage)");
  return Status::ok();
}

} // namespace

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

StatusOr<SafetensorsHeader> parseSafetensors(const std::byte *bytes, uint64_t size,
                                             const std::string &sourceName) {
  if (size < 8)
    return dataLoss(sourceName + ": " + std::to_string(size) +
                    " bytes, too short for the 8-byte header length");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i) // little-endian, whatever the host
    headerBytes = (headerBytes << 8) | static_cast<uint8_t>(bytes[i]);
  if (headerBytes > kMaxSafetensorsHeaderBytes)
    return invalidArgument(sourceName + ": header length " + std::to_string(headerBytes) +
                           " exceeds the " + std::to_string(kMaxSafetensorsHeaderBytes) +
                           "-byte limit");
  if (headerBytes > size - 8)
    return dataLoss(sourceName + ": header length " + std::to_string(headerBytes) +
                    " runs past the end of the " + std::to_string(size) + "-byte file");

  std::string_view headerText(reinterpret_cast<const char *>(bytes + 8), headerBytes);
  TXC_ASSIGN_OR_RETURN(nlohmann::json header, parseStrictJson(headerText, sourceName));
  if (!header.is_object())
    return invalidArgument(sourceName + ": header is JSON but not an object");

  SafetensorsHeader result;
  result.dataSectionOffset = 8 + headerBytes;
  result.dataSectionBytes = size - result.dataSectionOffset;
  for (const auto &[key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        return invalidArgument(sourceName + ": \"__metadata__\" is not a JSON object");
      for (const auto &[metaKey, metaValue] : value.items()) {
        if (!metaValue.is_string())
          return invalidArgument(sourceName + ": \"__metadata__\" entry " +
                                 quoteForMessage(metaKey) + " is not a string");
        result.metadata[metaKey] = metaValue.get<std::string>();
      }
      continue;
    }
    if (key.empty())
      return invalidArgument(sourceName + ": a tensor has an empty name");
    TensorContext context{sourceName, key};
    TXC_ASSIGN_OR_RETURN(TensorInfo tensor,
                         parseTensorEntry(key, value, result.dataSectionBytes, context));
    result.tensors.push_back(std::move(tensor));
  }
  // nlohmann's objects iterate in key order already; sort anyway so lookup
  // does not depend on a library detail.
  std::sort(result.tensors.begin(), result.tensors.end(),
            [](const TensorInfo &a, const TensorInfo &b) { return a.name < b.name; });
  TXC_RETURN_IF_ERROR(checkCoverage(result.tensors, result.dataSectionBytes, sourceName));
  return result;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string &path) {
  TXC_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  TXC_ASSIGN_OR_RETURN(SafetensorsHeader header,
                       parseSafetensors(file->data(), file->size(), path));
  return std::unique_ptr<SafetensorsFile>(new SafetensorsFile(std::move(file), std::move(header)));
}

const TensorInfo *SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(
      header_.tensors.begin(), header_.tensors.end(), name,
      [](const TensorInfo &tensor, std::string_view key) { return tensor.name < key; });
  if (it == header_.tensors.end() || it->name != name)
    return nullptr;
  return &*it;
}

} // namespace txc
