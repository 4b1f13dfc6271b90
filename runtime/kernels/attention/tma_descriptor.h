//===- tma_descriptor.h - TMA descriptors for the prefill's K/V tiles -----===//
//
// Host only. Encodes the tensor map a warp-specialized prefill kernel loads
// contiguous K or V tiles through (cuTensorMapEncodeTiled, reached through
// the runtime's driver entry point, so nothing links libcuda directly).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/params.h"
#include "status.h"

namespace txc::kernels {

/// K or V of `kv_heads` heads of `head_dim` 16-bit elements per token,
/// `num_tokens` tokens at `token_stride` elements, heads `head_stride`
/// elements apart: boxes of 64 columns by `block_rows` tokens of one head,
/// 128-byte swizzled (the wgmma tile layout); rows past num_tokens read as
/// zeros. `what` names the tensor in errors.
Status encodeKVTileDescriptor(TmaDescriptor *desc, const void *base, int head_dim, int kv_heads,
                              long long head_stride, long long token_stride, long long num_tokens,
                              int block_rows, const char *what);

} // namespace txc::kernels
