//===- tma_descriptor.h - TMA descriptors for the prefill's tiles ---------===//
//
// Host only. Encodes the tensor map a warp-specialized prefill kernel loads
// K or V tiles through, or stores O tiles through (cuTensorMapEncodeTiled, reached through
// the runtime's driver entry point, so nothing links libcuda directly).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/params.h"
#include "status.h"

namespace txc::kernels {

/// K, V or O as a rank-4 tensor (columns, rows, heads, pages) of 16-bit
/// elements, strides in elements: contiguous K/V (and O) are one "page" of
/// num_tokens rows; a paged cache is `pages` pages of page_size rows. Boxes
/// are 64 columns (the 128-byte swizzle span; the wgmma tile layout) by
/// `box_rows` rows of one head and page; rows past the tensor read as
/// zeros (and are not written). `what` names the tensor in errors.
struct TileTensorShape {
  const void *base = nullptr;
  int head_dim = 0, heads = 0;
  long long rows = 0, pages = 1;
  long long row_stride = 0, head_stride = 0, page_stride = 0;
};
Status encodeTileDescriptor(TmaDescriptor *desc, const TileTensorShape &shape, int box_rows, const char *what);

} // namespace txc::kernels
