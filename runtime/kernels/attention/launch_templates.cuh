//===- launch_templates.cuh - Dispatch from run-time values to templates --===//
//
// Included by the per-element-type launcher files only. Every switch ends in
// an error branch naming the unsupported value.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include <string>

#include "attention/attention.h"
#include "attention/decode.cuh"
#include "attention/decode_mma.cuh"
#include "attention/pdl_launch.h"
#include "attention/prefill.cuh"
#include "attention/tma_descriptor.h"

namespace txc::kernels::detail {

/// kCanBeCausal = false (decode) keeps the causal kernels from being built.
template <bool kCanBeCausal = true, typename Fn> Status withVariant(bool causal, bool window, bool softcap, Fn &&fn) {
  // Eight combinations; each is a distinct kernel so that the common path
  // carries no dead mask arithmetic.
  if constexpr (kCanBeCausal) {
    if (causal) {
      if (window)
        return softcap ? fn(AttentionVariant<true, true, true>{}) : fn(AttentionVariant<true, true, false>{});
      return softcap ? fn(AttentionVariant<true, false, true>{}) : fn(AttentionVariant<true, false, false>{});
    }
  } else if (causal) {
    return Status::invalidArgument("decode: the causal variant is implied; build it without the flag");
  }
  if (window)
    return softcap ? fn(AttentionVariant<false, true, true>{}) : fn(AttentionVariant<false, true, false>{});
  return softcap ? fn(AttentionVariant<false, false, true>{}) : fn(AttentionVariant<false, false, false>{});
}

template <typename Fn> Status withHeadDim(int head_dim, Fn &&fn) {
  switch (head_dim) {
  case 64: return fn(std::integral_constant<int, 64>{});
  case 128: return fn(std::integral_constant<int, 128>{});
  case 256: return fn(std::integral_constant<int, 256>{});
  default: return Status::unsupported("attention: unsupported head_dim " + std::to_string(head_dim) +
                                      " (built: 64, 128, 256)");
  }
}

template <typename Fn> Status withGroupSize(int group, Fn &&fn) {
  switch (group) {
  case 1: return fn(std::integral_constant<int, 1>{});
  case 2: return fn(std::integral_constant<int, 2>{});
  case 4: return fn(std::integral_constant<int, 4>{});
  case 8: return fn(std::integral_constant<int, 8>{});
  default: return Status::unsupported("decode: unsupported GQA group size " + std::to_string(group) +
                                      " (built: 1, 2, 4, 8)");
  }
}

inline Status checkDecodeParams(const DecodeParams &p) {
  if (p.batch <= 0 || p.num_kv_heads <= 0 || p.num_qo_heads % p.num_kv_heads != 0)
    return Status::invalidArgument("decode: bad head counts " + std::to_string(p.num_qo_heads) + "/" +
                                   std::to_string(p.num_kv_heads));
  if (p.kv.page_table == nullptr)
    return Status::invalidArgument("decode: the KV cache must be paged (page_table is null)");
  if (p.kv.page_size <= 0 || (p.kv.page_size & (p.kv.page_size - 1)) != 0 ||
      (1 << p.kv.page_size_log2) != p.kv.page_size)
    return Status::invalidArgument("decode: page size " + std::to_string(p.kv.page_size) +
                                   " is not a power of two matching page_size_log2");
  const unsigned long long addresses = (unsigned long long)p.q | (unsigned long long)p.o |
                                       (unsigned long long)p.kv.k | (unsigned long long)p.kv.v;
  if (addresses % 16 != 0 || (p.q_batch_stride | p.q_head_stride | p.o_batch_stride | p.o_head_stride |
                              p.kv.page_stride | p.kv.head_stride | p.kv.token_stride) % 8 != 0)
    return Status::invalidArgument("decode: q, o, k, v and their strides must be 16-byte aligned (16-byte loads)");
  if (p.num_splits < 1 || p.num_splits > kMaxMergedSplits)
    return Status::invalidArgument("decode: num_splits " + std::to_string(p.num_splits) +
                                   " out of range [1, " + std::to_string(kMaxMergedSplits) +
                                   "] (the most the split merge takes)");
  if (p.num_splits > 1 && (p.maybe_partial_o == nullptr || p.maybe_partial_lse == nullptr))
    return Status::invalidArgument("decode: num_splits > 1 needs the partial-output workspace");
  if (p.wide_cta && p.cluster_combine && p.num_splits >= 2)
    return Status::invalidArgument("decode: the wide CTA merges splits through global memory, not a cluster");
  return Status::ok();
}

/// The dynamic shared memory and carveout (< 0: the driver's) of a
/// tensor-core decode launch: with one K/V stage, the carveout one CTA
/// needs unless carveout_percent says otherwise, not the driver's choice
/// (which maximizes occupancy and so takes nearly all of the L1).
template <class Traits, class Variant>
std::pair<int, int> decodeMmaSmemAndCarveout(const DecodeParams &p) {
  const bool single = Traits::kWide || p.single_kv_stage;
  const int smem = single ? Traits::kSmemBytesSingleStage : Traits::kSmemBytes;
  int carveout = p.carveout_percent;
  if (carveout < 0 && single) {
    static const int static_bytes = [] {
      cudaFuncAttributes attributes{};
      return cudaFuncGetAttributes(&attributes, pagedDecodeMmaKernel<Traits, Variant>) ==
                     cudaSuccess
                 ? static_cast<int>(attributes.sharedSizeBytes)
                 : 0;
    }();
    carveout = carveoutPercentFor(smem + static_bytes);
  }
  return {smem, carveout};
}

/// One launch of the tensor-core decode kernel.
template <class Traits, class Variant>
Status launchDecodeMma(const DecodeParams &p, dim3 grid, unsigned cluster_x, bool non_portable,
                       cudaStream_t stream) {
  auto kernel = pagedDecodeMmaKernel<Traits, Variant>;
  TXC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Traits::kSmemBytes));
  if (non_portable)
    TXC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const auto [smem, carveout] = decodeMmaSmemAndCarveout<Traits, Variant>(p);
  TXC_CUDA_CHECK(launchKernelWithCarveout(kernel, grid, dim3(Traits::kThreads), smem, stream, p.programmatic_launch,
                                          cluster_x, carveout, p));
  return Status::ok();
}

/// Whether the grid's clusters (one a sequence and KV head, `cluster_x`
/// splits each) are resident at once: a cluster needs its CTAs in one GPC, so
/// 8-CTA clusters of two-an-SM CTAs can leave slots no cluster fits, and a
/// grid past them runs a second wave of whole chunks (as a split grid past
/// the resident CTAs does: split_heuristic.h). Qwen3-0.6B at batch 4, 4000
/// tokens: 8 splits in clusters 2.213 ms a step, merged through global
/// memory 1.740 (device run 252). `smem` is the launch's dynamic shared
/// memory, `max_smem` what the kernel's attribute allows (its launcher sets
/// the same; 0: none), `carveout` the launch's (< 0: the driver's). Asked of
/// the driver once a launch shape.
template <typename... Params>
bool decodeClustersFitOneWave(void (*kernel)(Params...), int threads, int smem, int max_smem,
                              int carveout, dim3 grid, unsigned cluster_x, bool non_portable) {
  using Key = std::tuple<const void *, unsigned, int, int>;
  static std::map<Key, int> most_clusters;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const Key key{reinterpret_cast<const void *>(kernel), cluster_x, smem, carveout};
  auto it = most_clusters.find(key);
  if (it == most_clusters.end()) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    cudaLaunchAttribute attributes[2];
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = cluster_x;
    attributes[0].val.clusterDim.y = 1;
    attributes[0].val.clusterDim.z = 1;
    attributes[1].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attributes[1].val.sharedMemCarveout = static_cast<unsigned>(std::max(carveout, 0));
    config.attrs = attributes;
    config.numAttrs = carveout >= 0 ? 2 : 1;
    int clusters = 0;
    if ((max_smem > 0 && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              max_smem) != cudaSuccess) ||
        (non_portable &&
         cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
             cudaSuccess) ||
        cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();
      return true; // unknown: as asked (a launch error reports itself)
    }
    it = most_clusters.emplace(key, clusters).first;
  }
  return (long long)grid.y * grid.z <= it->second;
}

template <typename T> Status launchPagedDecodeTyped(const AttentionConfig &config, const DecodeParams &params,
                                                    cudaStream_t stream) {
  TXC_RETURN_IF_ERROR(checkDecodeParams(params));
  // The cluster merge where the split count allows it; the fused or kernel
  // combine elsewhere.
  DecodeParams p = params;
  p.cluster_combine = params.cluster_combine && params.num_splits >= 2 &&
                     params.num_splits <= std::min(params.cluster_max_splits, kMaxClusterSplits);
  unsigned cluster_x = p.cluster_combine ? static_cast<unsigned>(p.num_splits) : 1u;
  bool non_portable = cluster_x > static_cast<unsigned>(kPortableClusterSplits);
  // Clusters that do not fit one wave merge through global memory instead
  // (the fused merge, or the combine kernel without counters).
  auto mergeWithoutCluster = [&] {
    p.cluster_combine = false;
    cluster_x = 1;
    non_portable = false;
  };
  const int group = p.num_qo_heads / p.num_kv_heads;
  if (p.maybe_rope_qkv != nullptr &&
      (group < kMinGroupForMmaDecode || p.rope_factors == nullptr || p.rope_slot_mapping == nullptr ||
       p.rope_half < 0 || 2 * p.rope_half > config.head_dim))
    return Status::unsupported("decode: the folded rope needs the tensor-core kernel (GQA group >= " +
                               std::to_string(kMinGroupForMmaDecode) +
                               "), the step's rotary factors, slot mapping and 2 * rope_half <= head_dim");
  if (p.wide_cta && !decodeWideCtaBuilt(config.head_dim, group, p.variant))
    return Status::unsupported("decode: the wide CTA is built for GQA groups >= " +
                               std::to_string(kMinGroupForMmaDecode) +
                               ", head_dim <= 128, without window or soft-cap");
  return withHeadDim(config.head_dim, [&](auto dim) {
    return withGroupSize(group, [&](auto g) {
      return withVariant<false>(false, p.variant.window_left >= 0, p.variant.softcap > 0.f, [&](auto variant) {
        constexpr int kDim = decltype(dim)::value, kGroup = decltype(g)::value;
        dim3 grid(p.num_splits, p.num_kv_heads, p.batch);
        if constexpr (kGroup >= kMinGroupForMmaDecode) {
          // The wide CTA is instantiated where decodeWideCtaBuilt says so
          // (checked above; the last branch only keeps the others unbuilt).
          using Variant = decltype(variant);
          constexpr bool kWideBuilt = kDim <= 128 && std::is_same_v<Variant, AttentionVariant<false, false, false>>;
          if (!p.wide_cta && cluster_x > 1) {
            using Traits = DecodeMmaTraits<T, kDim, kGroup>;
            const auto [smem, carveout] = decodeMmaSmemAndCarveout<Traits, Variant>(p);
            if (!decodeClustersFitOneWave(pagedDecodeMmaKernel<Traits, Variant>, Traits::kThreads,
                                          smem, Traits::kSmemBytes, carveout, grid, cluster_x,
                                          non_portable))
              mergeWithoutCluster();
          }
          if (!p.wide_cta) {
            TXC_RETURN_IF_ERROR((launchDecodeMma<DecodeMmaTraits<T, kDim, kGroup>, Variant>(p, grid, cluster_x,
                                                                                             non_portable, stream)));
          } else if constexpr (kWideBuilt) {
            TXC_RETURN_IF_ERROR((launchDecodeMma<DecodeMmaTraits<T, kDim, kGroup, 0, kDecodeWideWarps>, Variant>(
                p, grid, cluster_x, non_portable, stream)));
          } else {
            return Status::unsupported("decode: the wide CTA is not built for this head_dim or variant");
          }
        } else {
          using Traits = DecodeTraits<T, kDim, kGroup>;
          auto kernel = pagedDecodeKernel<Traits, decltype(variant)>;
          if (cluster_x > 1 &&
              !decodeClustersFitOneWave(kernel, Traits::kThreads, 0, 0, p.carveout_percent, grid,
                                        cluster_x, non_portable))
            mergeWithoutCluster();
          if (non_portable)
            TXC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
          TXC_CUDA_CHECK(launchKernelWithCarveout(kernel, grid, dim3(Traits::kThreads), 0, stream,
                                                  p.programmatic_launch, cluster_x, p.carveout_percent, p));
        }
        TXC_CUDA_CHECK(cudaGetLastError());
        if (p.num_splits > 1 && p.maybe_split_counters == nullptr && !p.cluster_combine &&
            !p.diagnostic_skip_combine) {
          TXC_CUDA_CHECK(launchKernel(combineSplitsKernel<T, kDim>, dim3(p.num_qo_heads, p.batch),
                                      dim3(kCombineSplitsThreads<kDim>), 0, stream,
                                      p.programmatic_launch, p));
        }
        return Status::ok();
      });
    });
  });
}

template <typename T> Status decodeCtasPerSmTyped(const AttentionConfig &config, int group, int *out) {
  return withHeadDim(config.head_dim, [&](auto dim) {
    return withGroupSize(group, [&](auto g) {
      constexpr int kDim = decltype(dim)::value, kGroup = decltype(g)::value;
      if constexpr (kGroup >= kMinGroupForMmaDecode) {
        using Traits = DecodeMmaTraits<T, kDim, kGroup>;
        auto kernel = pagedDecodeMmaKernel<Traits, AttentionVariant<false, false, false>>;
        TXC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            Traits::kSmemBytes));
        TXC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, kernel, Traits::kThreads,
                                                                     Traits::kSmemBytes));
      } else {
        using Traits = DecodeTraits<T, kDim, kGroup>;
        TXC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            out, pagedDecodeKernel<Traits, AttentionVariant<false, false, false>>, Traits::kThreads, 0));
      }
      return Status::ok();
    });
  });
}

/// The query length from which causal prefill runs one tile per CTA
/// instead of persistent mirrored pairs.
constexpr int kOneTileCausalMinQueries = 8192;

template <typename T> Status launchPrefillTyped(const AttentionConfig &config, const PrefillParams &p,
                                                cudaStream_t stream) {
  if (p.batch <= 0 || p.num_kv_heads <= 0 || p.num_qo_heads % p.num_kv_heads != 0)
    return Status::invalidArgument("prefill: bad head counts " + std::to_string(p.num_qo_heads) + "/" +
                                   std::to_string(p.num_kv_heads));
  if (p.kv.page_table == nullptr && (p.kv.maybe_cu_seqlens_k == nullptr || p.kv.num_tokens <= 0))
    return Status::invalidArgument("prefill: contiguous K/V need cu_seqlens_k and num_tokens (their rows)");
  if (p.kv.page_table != nullptr && (p.maybe_kv_lens == nullptr || p.kv.num_pages <= 0))
    return Status::invalidArgument("prefill: paged K/V need maybe_kv_lens and num_pages (the pool's pages)");
  if (p.kv.page_table != nullptr && (p.kv.page_size <= 0 || (1 << p.kv.page_size_log2) != p.kv.page_size))
    return Status::invalidArgument("prefill: page size " + std::to_string(p.kv.page_size) +
                                   " is not a power of two matching page_size_log2");
  const unsigned long long addresses = (unsigned long long)p.q | (unsigned long long)p.o;
  if (addresses % 16 != 0 || (p.q_token_stride | p.q_head_stride | p.o_token_stride | p.o_head_stride) % 8 != 0)
    return Status::invalidArgument("prefill: q, o and their strides must be 16-byte aligned (16-byte loads and stores)");
  if (p.max_seqlen_q <= 0)
    return Status::ok();
  const PrefillKernel kind =
      config.prefill_kernel == PrefillKernel::kAuto ? defaultPrefillKernel() : config.prefill_kernel;
  return withHeadDim(config.head_dim, [&](auto dim) {
    return withVariant(config.causal, p.variant.window_left >= 0, p.variant.softcap > 0.f, [&](auto variant) {
      // persistent_pairs: causal pairs walked by one CTA per SM, not one a CTA.
      auto launch = [&](auto traits, bool persistent_pairs = true) -> Status {
        using Traits = decltype(traits);
        using Variant = decltype(variant);
        auto kernel = prefillKernel<Traits, Variant>;
        PrefillParams kp = p;
        kp.kv_by_tma = false;
        kp.o_by_tma = false;
        kp.q_by_tma = false;
        if constexpr (Traits::kWarpSpecialized) {
          const bool paged = p.kv.page_table != nullptr;
          // A box is a key block's rows: TMA where a page holds whole blocks.
          // Boxes of a block's part in each 16-token page (16 of 2 KB a
          // block) lost to the cp.async gather, 527 against 546 TFLOP/s
          // (device run 47).
          if (config.prefill_kv_tma && (!paged || p.kv.page_size % Traits::kBlockN == 0)) {
            TileTensorShape shape;
            shape.head_dim = Traits::kHeadDim;
            shape.heads = p.num_kv_heads;
            shape.rows = paged ? p.kv.page_size : p.kv.num_tokens;
            shape.pages = paged ? p.kv.num_pages : 1;
            shape.row_stride = p.kv.token_stride;
            shape.head_stride = p.kv.head_stride;
            shape.page_stride = p.kv.page_stride;
            shape.base = p.kv.k;
            TXC_RETURN_IF_ERROR(encodeTileDescriptor(&kp.tma_k, shape, Traits::kBlockN, "K"));
            shape.base = p.kv.v;
            TXC_RETURN_IF_ERROR(encodeTileDescriptor(&kp.tma_v, shape, Traits::kBlockN, "V"));
            kp.kv_by_tma = true;
          }
          // O by TMA from the epilogue's shared memory (d64, d128): one
          // head's rows as the same rank-4 tensor, boxes of a warpgroup's 64
          // rows. Rows: batch x the longest sequence bounds the packed query
          // rows; the kernel stores only boxes inside one sequence.
          const long long o_rows = (long long)p.batch * p.max_seqlen_q;
          if (Traits::kStageO && o_rows >= Traits::kWarpgroupRows) {
            TileTensorShape o;
            o.base = p.o;
            o.head_dim = Traits::kHeadDim;
            o.heads = p.num_qo_heads;
            o.rows = o_rows;
            o.row_stride = p.o_token_stride;
            o.head_stride = p.o_head_stride;
            TXC_RETURN_IF_ERROR(encodeTileDescriptor(&kp.tma_o, o, Traits::kWarpgroupRows, "O"));
            kp.o_by_tma = true;
          }
          // Q likewise, over its real rows: the kernels that overlap their
          // tiles load Q with it (their producer), the others' producer asks
          // the L2 for each tile's Q ahead of the consumers' copy. A box may
          // run past its sequence (rows of the next one, whose outputs are
          // never written) or past the tensor (zeros). Both uses are the
          // TMA producer's, so only with K/V by TMA, and encoded only for a
          // kernel that will use it (a host-side encode each launch).
          constexpr bool kLoadsQ = prefillOverlapsTiles<Traits, Variant>();
          const bool uses_q = kLoadsQ || (prefillPrefetchesQ<Traits, Variant>() && p.q_l2_prefetch);
          if (kp.kv_by_tma && uses_q && p.num_q_tokens >= Traits::kWarpgroupRows) {
            TileTensorShape q;
            q.base = p.q;
            q.head_dim = Traits::kHeadDim;
            q.heads = p.num_qo_heads;
            q.rows = p.num_q_tokens;
            q.row_stride = p.q_token_stride;
            q.head_stride = p.q_head_stride;
            const Status encoded = encodeTileDescriptor(&kp.tma_q, q, Traits::kWarpgroupRows, "Q");
            // Only the overlapping kernels load Q through it; for the others
            // a Q it cannot describe just goes without the L2 prefetch.
            if (kLoadsQ)
              TXC_RETURN_IF_ERROR(encoded);
            kp.q_by_tma = encoded.isOk();
          }
        }
        TXC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            Traits::kSmemBytes));
        dim3 grid(ceilDiv(p.max_seqlen_q, Traits::kBlockM), p.num_qo_heads, p.batch);
        if constexpr (Traits::kWarpSpecialized) {
          const long long tiles = (long long)grid.x * grid.y * grid.z;
          constexpr PrefillWalk kWalk = prefillWalk<Traits, Variant>();
          if constexpr (kWalk != PrefillWalk::kOneTile) {
            // Persistent: one CTA per SM (the kernel fills an SM's registers)
            // walks the tiles or pairs, so a tile's K/V loads overlap the
            // previous tile's last P V and epilogue.
            const long long ctas = prefillCtasFor(kWalk, (int)tiles);
            grid = dim3((unsigned)ctas);
            if (kWalk == PrefillWalk::kPersistent || persistent_pairs) {
              int device = 0, sms = 0;
              TXC_CUDA_CHECK(cudaGetDevice(&device));
              TXC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
              grid = dim3((unsigned)std::min<long long>(ctas, sms));
            }
            // Stream-K tail: a last partial round of 1/4 to 3/4 of the CTAs
            // (a fuller one gains little against the merge, a thinner one
            // splits a tile more than four ways; 16 x 1k at d128 leaves 68
            // tiles on 132), with the caller's buffers sized for `sms`.
            kp.tail_tiles = 0;
            if constexpr (prefillHasStreamKTail<Traits, Variant>()) {
              const long long rest = tiles % grid.x;
              if (p.maybe_tail_workspace != nullptr && p.maybe_tail_counters != nullptr && 4 * rest >= grid.x &&
                  4 * rest <= 3 * (long long)grid.x)
                kp.tail_tiles = (int)rest;
            }
          }
        }
        kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(kp);
        TXC_CUDA_CHECK(cudaGetLastError());
        return Status::ok();
      };
      constexpr int kDim = decltype(dim)::value;
      switch (kind) {
      case PrefillKernel::kWarpSpecialized:
        // Long causal queries: one tile per CTA, longest first. A tile then
        // averages 32+ key blocks, so a CTA's start costs little, and the
        // hardware's longest-first order ends on short tiles where equal
        // pairs leave a half-empty last round: L16384 668-686 against
        // 627-660 TFLOP/s in device runs 45, 47, 48 and 49 (pairs win at
        // L4096 by 3-6% and at L1024 by 7-18%; 8192 is not measured). With
        // the pair tail (PrefillPairTail) pairs still lose at L16384 by
        // 1.5-2.5% (run 279).
        if (config.causal && p.variant.window_left < 0 && p.max_seqlen_q >= kOneTileCausalMinQueries)
          return launch(PrefillOneTileCausalTraits<T, kDim>{});
        return launch(PrefillTraits<T, kDim>{});
      case PrefillKernel::kWarpSpecializedOneTileCausal: return launch(PrefillOneTileCausalTraits<T, kDim>{});
      case PrefillKernel::kWarpSpecializedPairPerCta: return launch(PrefillTraits<T, kDim>{}, false);
      case PrefillKernel::kWarpSpecializedPhaseTrace:
        if constexpr (std::is_same_v<T, __nv_bfloat16> && kDim == 128 && !decltype(variant)::kWindow &&
                      !decltype(variant)::kSoftCap)
          return launch(PrefillPhaseTraceTraits<T, kDim>{});
        return Status::unsupported("prefill: the phase trace is built for bf16, head_dim 128, no window or soft-cap");
      case PrefillKernel::kSingleWarpgroup: return launch(PrefillSingleWgTraits<T, kDim>{});
      case PrefillKernel::kAuto: break;
      }
      return Status::invalidArgument("prefill: unknown prefill kernel " + std::to_string((int)kind));
    });
  });
}

} // namespace txc::kernels::detail
