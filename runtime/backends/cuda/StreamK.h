//===- StreamK.h - How DecodeGemm.cu shares tiles among CTAs ---*- C++ -*-===//
//
// Stream-K: the (tile, K chunk) steps of a GEMM, tile-major, cut into
// `ctas` contiguous ranges whose lengths differ by at most one. A tile may
// be shared by consecutive CTAs; each part of it goes to partial slot
// cta + tile, which is unique (the CTAs of a later tile are never before
// those of an earlier one) and below ctas + tiles. Needs 1 <= ctas <=
// total (no CTA with an empty range, which parts() would count). Host and
// device code,
// so the schedule is unit-tested on the host (StreamKTest).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_STREAMK_H
#define TXC_RUNTIME_BACKENDS_CUDA_STREAMK_H

#include <cstdint>

#ifdef __CUDACC__
#define TXC_HOST_DEVICE __host__ __device__
#else
#define TXC_HOST_DEVICE
#endif

namespace txc::cuda {

struct StreamK {
  int64_t total = 0; // tiles x chunks a tile
  int64_t ctas = 1;

  /// The first step of CTA `cta`'s range (rangeBegin(ctas) == total).
  TXC_HOST_DEVICE int64_t rangeBegin(int64_t cta) const { return cta * total / ctas; }
  /// The CTA whose range holds step u (the inverse of rangeBegin).
  TXC_HOST_DEVICE int64_t ctaOf(int64_t u) const { return ((u + 1) * ctas - 1) / total; }
  /// The CTAs that share tile `tile` of `chunks` steps: the first, and how many.
  TXC_HOST_DEVICE int64_t firstCta(int64_t tile, int64_t chunks) const {
    return ctaOf(tile * chunks);
  }
  TXC_HOST_DEVICE int64_t parts(int64_t tile, int64_t chunks) const {
    return ctaOf(tile * chunks + chunks - 1) - ctaOf(tile * chunks) + 1;
  }
  /// Where CTA `cta` leaves its part of tile `tile`.
  TXC_HOST_DEVICE static int64_t slot(int64_t cta, int64_t tile) { return cta + tile; }
};

} // namespace txc::cuda

#undef TXC_HOST_DEVICE

#endif // TXC_RUNTIME_BACKENDS_CUDA_STREAMK_H
