//===- Fuzz_safetensors_header.cpp - Any bytes as a .safetensors file -----===//
//
// Beyond "no crash, no hang", an accepted file must keep the promises the
// runtime relies on: every tensor inside the data section, sizes that match
// shapes, tensors that tile the data section.
//
//===----------------------------------------------------------------------===//

#include "runtime/safetensors/SafetensorsFile.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto header = txc::parseSafetensors(reinterpret_cast<const std::byte *>(data), size, "fuzz");
  if (!header.isOk())
    return 0;
  uint64_t covered = 0;
  for (const txc::TensorInfo &tensor : header->tensors) {
    uint64_t elements = 1;
    for (int64_t extent : tensor.shape)
      elements *= static_cast<uint64_t>(extent);
    if (tensor.dataEnd > header->dataSectionBytes || tensor.dataBegin > tensor.dataEnd ||
        elements * txc::dtypeSize(tensor.dtype) != tensor.byteSize())
      std::abort();
    covered += tensor.byteSize();
  }
  if (covered != header->dataSectionBytes ||
      header->dataSectionOffset + header->dataSectionBytes != size)
    std::abort();
  return 0;
}
