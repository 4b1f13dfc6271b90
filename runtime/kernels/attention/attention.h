//===- attention.h - Host entry points of the attention kernels -----------===//
//
// Launchers over the nvcc-built instantiations of decode.cuh and prefill.cuh
// (page size read at run time). The codegen library builds the same templates
// with the model's constants through NVRTC instead; both take the same
// Params structs. Every entry point returns a Status and never aborts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "attention/params.h"
#include "attention/split_heuristic.h"
#include "status.h"

namespace txc::kernels {

enum class ElementType { kBf16, kFp16 };

/// Which prefill kernel runs. kAuto is the library's verified default.
enum class PrefillKernel {
  kAuto,
  kWarpSpecialized,             // prefill_sm90.cuh: producer + consumer warpgroups, both GEMMs on wgmma,
                                // on FA3's tiles (d64 192 x 128, d128 128 x 128, d256 128 x 80),
                                // causal tiles in persistent mirrored pairs (one tile per CTA from
                                // 8192 queries on)
  kWarpSpecializedOneTileCausal, // the default, but causal masks one tile per CTA (not mirrored pairs)
  kWarpSpecializedPairPerCta,    // the default, but one causal pair per CTA (not persistent)
  kWarpSpecializedPhaseTrace,    // the default with PrefillParams::maybe_phase_trace stamped
                                 // (diagnostics; bf16 d128 without window or soft-cap only)
  kSingleWarpgroup,             // prefill.cuh: one warpgroup, QK^T on wgmma, PV on mma.sync
};

const char *elementTypeName(ElementType t);

/// Compile-time choices the launchers dispatch on. The sliding window and the
/// soft-cap are switched on by params (window_left >= 0, softcap > 0).
struct AttentionConfig {
  ElementType dtype = ElementType::kBf16;
  int head_dim = 128;
  bool causal = false;
  PrefillKernel prefill_kernel = PrefillKernel::kAuto;
  /// The warp-specialized prefill loads K/V with TMA (contiguous, or pages
  /// that hold a whole key block); off: its producer gathers rows with
  /// cp.async, as it does on smaller pages (comparison).
  bool prefill_kv_tma = true;
};

/// The kernel kAuto stands for.
PrefillKernel defaultPrefillKernel();

/// Byte layout of the split-KV workspace inside one allocation.
struct DecodeWorkspaceLayout {
  size_t partial_o_offset = 0, partial_lse_offset = 0, counters_offset = 0, total_bytes = 0;
};
DecodeWorkspaceLayout decodeWorkspaceLayout(int batch, int num_qo_heads, int num_kv_heads, int head_dim,
                                            int num_splits);

/// Resident decode CTAs per SM for this configuration (occupancy API).
Status decodeCtasPerSm(const AttentionConfig &config, int group_size, int *ctas_per_sm);

/// chooseDecodeSplits with the occupancy and SM count of the current device.
/// The chunk floor, split cap and split floor default to DecodeSplitInputs';
/// a caller that caps the splits lower (a fixed workspace) may lower the
/// chunk floor with it, so short contexts still spread over several CTAs per
/// head.
Status planDecodeSplits(const AttentionConfig &config, int batch, int num_qo_heads, int num_kv_heads,
                        int max_kv_len, int *num_splits,
                        int min_tokens_per_split = DecodeSplitInputs{}.min_tokens_per_split,
                        int max_splits = DecodeSplitInputs{}.max_splits,
                        int min_splits = DecodeSplitInputs{}.min_splits);

/// Paged decode. With num_splits > 1, params.maybe_partial_o/lse must be set;
/// the merge runs in the same launch when params.maybe_split_counters is set,
/// else as a second launch of the combine kernel.
Status launchPagedDecode(const AttentionConfig &config, const DecodeParams &params, cudaStream_t stream);

/// Whether the wide CTA (DecodeParams::wide_cta) is built for this shape:
/// the tensor-core kernel's groups, head_dim <= 128, no window or soft-cap.
/// (Host only: params.h is also compiled by NVRTC.)
inline bool decodeWideCtaBuilt(int head_dim, int group, const VariantParams &variant) {
  return head_dim <= 128 && group >= kMinGroupForMmaDecode && variant.window_left < 0 && variant.softcap <= 0.f;
}

/// Prefill over a ragged batch (contiguous or paged K/V).
Status launchPrefill(const AttentionConfig &config, const PrefillParams &params, cudaStream_t stream);

// Per-element-type launchers, one translation unit each (compile time).
Status launchPagedDecodeBf16(const AttentionConfig &, const DecodeParams &, cudaStream_t);
Status launchPagedDecodeFp16(const AttentionConfig &, const DecodeParams &, cudaStream_t);
Status launchPrefillBf16(const AttentionConfig &, const PrefillParams &, cudaStream_t);
Status launchPrefillFp16(const AttentionConfig &, const PrefillParams &, cudaStream_t);
Status decodeCtasPerSmBf16(const AttentionConfig &, int, int *);
Status decodeCtasPerSmFp16(const AttentionConfig &, int, int *);

} // namespace txc::kernels
