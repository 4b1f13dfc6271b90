//===- ColumnScale.h - A weight matrix's columns scaled by a vector -*- C++ -*-===//
//
// tx-fold-norm-weight moves an RMSNorm's weight into the projections that
// read the norm (W'[o, i] = W[o, i] * gamma[i]); the manifest records it as
// WeightEntry::column_scale. The compiler applies it to embedded weights and
// the loader to weights it binds from a checkpoint, both through this one
// function, so an embedded and a stripped artifact hold the same bytes.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_COLUMNSCALE_H
#define TXC_ARTIFACT_COLUMNSCALE_H

#include "txc/DType.h"
#include "txc/Status.h"

#include <cstdint>

namespace txc::artifact {

/// weight[r, c] *= scale[c] for a row-major [rows, cols] matrix; `scale`
/// has cols elements of the same dtype (BF16, F16 or F32). Each product is
/// taken in fp32 and rounded once to nearest even.
Status scaleColumns(unsigned char *weight, DType dtype, int64_t rows, int64_t cols,
                    const unsigned char *scale);

} // namespace txc::artifact

#endif // TXC_ARTIFACT_COLUMNSCALE_H
