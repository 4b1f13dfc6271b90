//===- tma_descriptor.cpp - TMA descriptors for the prefill's tiles -------===//
#include "attention/tma_descriptor.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace txc::kernels {

// TMA needs 64-byte aligned descriptors; cuda.h aligns CUtensorMap to 128,
// more than a kernel parameter needs, so the bytes are copied over.
static_assert(sizeof(TmaDescriptor) == sizeof(CUtensorMap), "TmaDescriptor must hold a CUtensorMap's bytes");

namespace {

using EncodeTiled = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                 const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

Status encoder(EncodeTiled *fn) {
  // Looked up once (a thread-safe static); nullptr if the driver lacks it.
  static const EncodeTiled cached = [] {
    void *entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t error =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found);
    return error == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<EncodeTiled>(entry)
                                                                        : nullptr;
  }();
  if (cached == nullptr)
    return Status::unsupported("prefill: the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12+)");
  *fn = cached;
  return Status::ok();
}

} // namespace

Status encodeTileDescriptor(TmaDescriptor *desc, const TileTensorShape &t, int box_rows, const char *what) {
  const std::string name = std::string("prefill: TMA descriptor of ") + what;
  if (reinterpret_cast<std::uintptr_t>(t.base) % 16 != 0 || t.row_stride % 8 != 0 || t.head_stride % 8 != 0 ||
      t.page_stride % 8 != 0)
    return Status::invalidArgument(name + ": the base and strides must be 16-byte aligned");
  if (t.rows <= 0 || t.pages <= 0 || t.heads <= 0 || t.head_dim % 64 != 0 || box_rows <= 0 || box_rows > 256 ||
      box_rows > t.rows)
    return Status::invalidArgument(name + ": " + std::to_string(t.pages) + " x " + std::to_string(t.rows) +
                                   " rows of " + std::to_string(t.heads) + " heads, head_dim " +
                                   std::to_string(t.head_dim) + ", boxes of " + std::to_string(box_rows) +
                                   " rows (needs head_dim a multiple of 64, boxes of 1-256 rows within a page)");
  EncodeTiled encode = nullptr;
  TXC_RETURN_IF_ERROR(encoder(&encode));
  // Innermost first: columns, rows, heads, pages; strides in bytes (dim 0 is dense).
  const cuuint64_t dims[4] = {(cuuint64_t)t.head_dim, (cuuint64_t)t.rows, (cuuint64_t)t.heads,
                              (cuuint64_t)t.pages};
  const cuuint64_t strides[3] = {(cuuint64_t)t.row_stride * 2, (cuuint64_t)t.head_stride * 2,
                                 (cuuint64_t)(t.pages > 1 ? t.page_stride : t.rows * t.row_stride) * 2};
  const cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult result = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void *>(t.base), dims, strides,
                                 box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    return Status::invalidArgument(name + ": cuTensorMapEncodeTiled failed with CUresult " + std::to_string(result));
  std::memcpy(desc, &map, sizeof(map));
  return Status::ok();
}

} // namespace txc::kernels
