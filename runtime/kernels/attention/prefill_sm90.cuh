//===- prefill_sm90.cuh - Warp-specialized prefill attention for Hopper ---===//
//
// FlashAttention-3-style forward kernel over a ragged, paged batch (same
// PrefillParams, Variant and results as prefill.cuh).
//
// CTA = 1 + kConsumerWarpgroups warpgroups. Warpgroup 0 is the producer: it drops to
// kProducerRegisters with setmaxnreg and fills a kStages-deep ring of
// 128B-swizzled shared-memory K and V tiles with TMA: one thread, boxes of
// 64 columns by a key block's rows (packed ragged K/V, or pages that hold a
// whole block); the full mbarrier counts the bytes. Without TMA descriptors (smaller pages, NVRTC-launched
// kernels) all 128 producer threads gather rows with cp.async, looking up
// the page table per row, and the full mbarrier counts their arrivals. Each tile also has an "empty"
// mbarrier (one arrival per consumer warp once its wgmmas have read the
// tile). K and V have separate rings, and V trails K by one key block,
// because the consumers read V of block i-1 in the same step as K of block i.
//
// Warpgroups 1..kConsumerWarpgroups are consumers with kConsumerRegisters,
// 64 query rows each (CTA tile kBlockM = 128 or, with three consumers for
// d64 as FA3 does, 192 x kBlockN keys). Both GEMMs are wgmma:
// S = Q K^T with both operands in shared memory (K-major), O += P V with P
// from registers (the fp32 S accumulator re-packed to 16 bits is exactly the
// A fragment) and V read MN-major from the same tile layout (no transpose).
// Per step i (key blocks run from the highest down, so causal diagonal blocks
// come first):
//   issue S_i = Q K_i^T; issue O += P_{i-1} V_{i-1}; wait for S_i only;
//   mask + online softmax of S_i while the P V wgmma runs; wait for it;
//   rescale O, pack P_i.
// (FA3's intra-warpgroup overlap.) The consumers also take turns issuing
// their GEMMs, round robin through one named barrier each (FA3's ping-pong
// for two), so one warpgroup's softmax runs under the others' GEMMs.
// The epilogue (d64, d128) writes O to shared memory with stmatrix and one
// thread stores it with TMA, so the warpgroup's next tile does not wait for
// the global stores (device run 67: direct stores held it ~3K cycles a tile).
// With two Q buffers (d128) consecutive tiles of a full-mask walk overlap:
// the next tile's Q loads under this tile's last step, and its first Q K^T
// goes out right after this tile's last P V, under this tile's epilogue.
//
// Tiles: (query block, query head, sequence), each head's longest blocks
// first. Full masks run persistent (prefillWalk): one CTA per SM
// walks the tiles on a fixed stride, the producer's ring running on into the
// next tile. Causal masks walk
// pairs of a query block and its mirror, persistent too (queries of 8192 and
// more: one tile per CTA, launch_templates.cuh); windowed masks run one CTA
// per tile. Either way a grid with more CTAs than tiles
// is harmless (the extra CTAs exit).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/sm90_pipeline.cuh"
#include "attention/tile_order.h"
#include "attention/variant.cuh"
#include "attention/wgmma.cuh"

namespace txc::kernels {

/// kConsumerWarpgroups_ and kBlockN_ (0: the default for the head dim) give
/// other tile shapes: PrefillFa3TileTraits below. kPairCausalTiles_: a CTA
/// runs two causal tiles of mirrored lengths (prefillWalk); device run 44
/// measured it +3..+13% over one tile per CTA (d128 L1024 325 -> 342,
/// L4096 505 -> 534 TFLOP/s, d256 482 -> 544, d64 383 -> 394; L16384 even).
/// kPhaseTrace_: the consumers stamp PrefillParams::maybe_phase_trace
/// (diagnostics; PrefillKernel::kWarpSpecializedPhaseTrace). Compiled out
/// otherwise: the stamps alone doubled d256's spills.
template <typename DType_, int kHeadDim_, int kPageSize_ = 0, int kConsumerWarpgroups_ = 2, int kBlockN_ = 0,
          bool kPairCausalTiles_ = true, bool kPhaseTrace_ = false>
struct PrefillSm90Traits {
  using DType = DType_;
  static constexpr bool kWarpSpecialized = true;
  static constexpr bool kPairCausalTiles = kPairCausalTiles_;
  static constexpr bool kPhaseTrace = kPhaseTrace_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kPageSize = kPageSize_;
  static constexpr int kConsumerWarpgroups = kConsumerWarpgroups_;
  static constexpr int kWarpgroupRows = 64; // the M of one wgmma
  static constexpr int kBlockM = kWarpgroupRows * kConsumerWarpgroups;
  // d256: the O accumulator alone is 128 registers per thread, so S stays at
  // 64 keys (32 registers) to keep S, P and O under kConsumerRegisters.
  static constexpr int kBlockN = kBlockN_ != 0 ? kBlockN_ : kHeadDim <= 128 ? 128 : 64;
  static constexpr int kStages = 2;
  static constexpr int kProducerThreads = 128;
  static constexpr int kThreads = kProducerThreads + 128 * kConsumerWarpgroups;
  static constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
  // Two consumers: 128 x 40 + 256 x 232 = 64512 of the 65536 registers of
  // an SM. Three (d64: O is 32 registers, S 64, P 32): 128 x 32 + 384 x 160
  // = 65536, FA3's split; ptxas fits it without spills except with the
  // soft-cap (~100 bytes).
  static constexpr int kProducerRegisters = kConsumerWarpgroups == 2 ? 40 : 32;
  static constexpr int kConsumerRegisters = kConsumerWarpgroups == 2 ? 232 : 160;
  static constexpr int kChunksPerRow = kHeadDim / 8; // 16-byte chunks
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kKVElems = kBlockN * kHeadDim;
  static constexpr int kBarriers = 4 * kStages; // full K, full V, empty K, empty V
  // Row offsets of three key blocks (the one whose K and the one whose V is
  // being issued, and the next one being resolved): one page-table lookup per
  // key per block, shared by the producer threads.
  static constexpr int kOffsetSlots = 3;
  // The persistent walk's stream-K tail (PrefillParams::tail_tiles): this
  // CTA's two parts (PrefillTailPart), computed once at the start; the
  // mirrored pairs' tail (PrefillPairTail) keeps its two tiles there. (Looked
  // up through the walk instead, they made ptxas spill in the step loop:
  // device run 148.)
  static constexpr int kTailPlanBytes = 2 * sizeof(PrefillTailPart);
  // Two barriers (a Q buffer each) on which the consumers free a buffer
  // for the producer's next Q (PrefillParams::q_by_tma).
  static constexpr int kQEmptyBarriers = 2;
  // Two slots (a Q buffer each) where the producer publishes the consumers'
  // next tile: its 10 fields and walk index.
  static constexpr int kNextTileBytes = 2 * 12 * 4;
  static constexpr int kBookkeepingBytes = kBarriers * 8 + kOffsetSlots * kBlockN * 8 + kTailPlanBytes +
                                           kQEmptyBarriers * 8 + kNextTileBytes;
  // Two Q tiles where they fit beside the K/V stages (d64, d128; not
  // d256's 224 KB of stages and one Q). At d128 a CTA that walks several
  // tiles of a full mask loads the next tile's Q into the other one during
  // this tile and issues the next tile's first Q K^T before this tile's
  // epilogue, so the tensor cores work under it (device run 134's phase
  // trace: at d128
  // L1024 the ~5.7K cycles from a tile's last P V to the next tile's second
  // step kept them idle, both consumers there at once; ~4.0K since, run
  // 141). O leaves through shared memory, the finished tile's Q buffer
  // (d64: the second buffer): the warpgroup writes its 64 rows there with
  // stmatrix in the TMA's 128-byte-swizzled layout and one thread stores
  // them with TMA, so the warpgroup goes on to its next tile while O drains
  // to global memory (PrefillParams::o_by_tma; rows past a sequence, which
  // TMA cannot skip, take the direct stores).
  static constexpr int kQBuffers =
      (2 * kQElems + 2 * kStages * kKVElems) * (int)sizeof(DType) + kBookkeepingBytes <= 227 * 1024 ? 2 : 1;
  static constexpr bool kStageO = kQBuffers == 2;
  static constexpr int kTileBytes = (kQBuffers * kQElems + 2 * kStages * kKVElems) * (int)sizeof(DType);
  static constexpr int kBookkeepingOffset = kTileBytes;
  static constexpr int kSmemBytes = kBookkeepingOffset + kBookkeepingBytes;

  static_assert(sizeof(DType) == 2, "prefill supports 16-bit element types");
  static_assert(kConsumerWarpgroups == 2 || (kConsumerWarpgroups == 3 && kHeadDim == 64),
                "three consumer warpgroups fit the register file at head_dim 64 only");
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head_dim must be 64, 128 or 256");
  static_assert(kBlockN == 64 || kBlockN == 80 || kBlockN == 128, "S is m64n64, m64n80 or m64n128");
  static_assert(kBlockN <= 2 * kProducerThreads, "a producer thread resolves at most two key rows");
  static_assert(kProducerThreads % kChunksPerRow == 0 && kBlockN % (kProducerThreads / kChunksPerRow) == 0,
                "the producer covers a K/V tile in whole passes");
  static_assert((kWarpgroupRows * kHeadDim * sizeof(DType)) % 1024 == 0 &&
                    (kKVElems * sizeof(DType)) % 1024 == 0,
                "every swizzled tile starts 1024-byte aligned");
  static_assert(kProducerRegisters * kProducerThreads + kConsumerRegisters * 128 * kConsumerWarpgroups <= 65536,
                "register split over the SM's register file");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the sm_90 limit");
};

/// The tile FlashAttention-3 uses for each head dim: d64 192 x 128 (three
/// consumer warpgroups), d256 128 x 80 (a longer key step than 64, so the
/// per-step synchronization weighs less per FLOP); d128 128 x 128. The
/// default (PrefillTraits): device run 37 measured d64 L4096 full 414 -> 475
/// TFLOP/s and causal 361 -> 393, d256 full 562 -> 585 and causal 477 -> 492
/// against the two-consumer 128 x 128 / 128 x 64 tiles, which stayed behind
/// in every call since (runs 44-49) and were removed after commit c4cb505.
template <typename DType, int kHeadDim, int kPageSize = 0>
using PrefillFa3TileTraits =
    PrefillSm90Traits<DType, kHeadDim, kPageSize, kHeadDim == 64 ? 3 : 2, kHeadDim == 256 ? 80 : 0>;

/// FA3's tiles with causal masks one tile per CTA, as before device run 44
/// (for comparison). Selected by PrefillKernel::kWarpSpecializedOneTileCausal.
template <typename DType, int kHeadDim, int kPageSize = 0>
using PrefillOneTileCausalTraits =
    PrefillSm90Traits<DType, kHeadDim, kPageSize, kHeadDim == 64 ? 3 : 2, kHeadDim == 256 ? 80 : 0, false>;

/// The default tiles and walk with the phase trace compiled in.
template <typename DType, int kHeadDim, int kPageSize = 0>
using PrefillPhaseTraceTraits =
    PrefillSm90Traits<DType, kHeadDim, kPageSize, kHeadDim == 64 ? 3 : 2, kHeadDim == 256 ? 80 : 0, true, true>;

/// How the warp-specialized kernel's CTAs walk the tiles (tile_order.h); the
/// launcher sizes the grid by it.
template <class Variant> constexpr bool kPrefillFullMask = !Variant::kCausal && !Variant::kWindow;
template <class Traits, class Variant> __host__ __device__ constexpr PrefillWalk prefillWalk() {
  if constexpr (kPrefillFullMask<Variant>)
    return PrefillWalk::kPersistent;
  else if constexpr (Variant::kCausal && !Variant::kWindow && Traits::kPairCausalTiles)
    return PrefillWalk::kMirroredPair;
  else
    return PrefillWalk::kOneTile;
}

/// Whether the kernel shares out the persistent walk's last partial round
/// (stream-K, PrefillParams::tail_tiles). Not at d256 (one Q buffer): its
/// merge code made ptxas spill more in the step loop (52 -> 64 bytes) and
/// its tail gained nothing (device run 148).
template <class Traits, class Variant> __host__ __device__ constexpr bool prefillHasStreamKTail() {
  return prefillWalk<Traits, Variant>() == PrefillWalk::kPersistent && Traits::kQBuffers == 2;
}

/// Whether a CTA overlaps its tiles (the next tile's Q in the other buffer,
/// its first Q K^T under this tile's epilogue): the persistent walk with two
/// Q buffers and two consumers (prefillSm90Body says why).
template <class Traits, class Variant> __host__ __device__ constexpr bool prefillOverlapsTiles() {
  return prefillWalk<Traits, Variant>() == PrefillWalk::kPersistent && Traits::kQBuffers == 2 &&
         Traits::kConsumerWarpgroups == 2;
}

/// Whether the producer asks the L2 for each tile's Q ahead of the
/// consumers' own copy (PrefillParams::q_l2_prefetch): the kernels without
/// the overlap (whose producer loads Q itself), at d64 and d128 (d256's
/// 40-register producer spilled 16 bytes with it, and its longer tiles hide
/// the wait already).
template <class Traits, class Variant> __host__ __device__ constexpr bool prefillPrefetchesQ() {
  return !prefillOverlapsTiles<Traits, Variant>() && Traits::kHeadDim <= 128;
}

namespace sm90 {

/// Named barrier ids (0 is __syncthreads): each of the `consumers` consumer
/// warpgroups' turn to issue GEMMs, each consumer's own Q-tile barrier, and
/// the producer's.
constexpr int kTurnBarrier0 = 1;
__host__ __device__ constexpr int qBarrier(int consumers, int consumer) { return kTurnBarrier0 + consumers + consumer; }
__host__ __device__ constexpr int producerBarrier(int consumers) { return kTurnBarrier0 + 2 * consumers; }

/// S (+)= Q K^T for one k16 step, both operands K-major in shared memory.
template <typename T, int kN>
__device__ __forceinline__ void wgmmaQK(float (&s)[kN / 8][4], unsigned long long desc_q, unsigned long long desc_k,
                                        int accumulate) {
  if constexpr (kN == 128) {
    if constexpr (ElementOps<T>::kIsBf16)
      wgmmaSS_m64n128k16_bf16(s, desc_q, desc_k, accumulate);
    else
      wgmmaSS_m64n128k16_f16(s, desc_q, desc_k, accumulate);
  } else if constexpr (kN == 80) {
    if constexpr (ElementOps<T>::kIsBf16)
      wgmmaSS_m64n80k16_bf16(s, desc_q, desc_k, accumulate);
    else
      wgmmaSS_m64n80k16_f16(s, desc_q, desc_k, accumulate);
  } else {
    static_assert(kN == 64, "key block of 64, 80 or 128");
    if constexpr (ElementOps<T>::kIsBf16)
      wgmmaSS_m64n64k16_bf16(s, desc_q, desc_k, accumulate);
    else
      wgmmaSS_m64n64k16_f16(s, desc_q, desc_k, accumulate);
  }
}

/// O += P V for one k16 step: P from registers, V MN-major in shared memory.
template <typename T, int kD>
__device__ __forceinline__ void wgmmaPV(float (&o)[kD / 8][4], const unsigned (&p)[4], unsigned long long desc_v) {
  constexpr bool kBf16 = ElementOps<T>::kIsBf16;
  if constexpr (kD == 64) {
    if constexpr (kBf16)
      wgmmaRS_m64n64k16_bf16_transB(o, p, desc_v, 1);
    else
      wgmmaRS_m64n64k16_f16_transB(o, p, desc_v, 1);
  } else if constexpr (kD == 128) {
    if constexpr (kBf16)
      wgmmaRS_m64n128k16_bf16_transB(o, p, desc_v, 1);
    else
      wgmmaRS_m64n128k16_f16_transB(o, p, desc_v, 1);
  } else {
    static_assert(kD == 256, "head_dim 64, 128 or 256");
    if constexpr (kBf16)
      wgmmaRS_m64n256k16_bf16_transB(o, p, desc_v, 1);
    else
      wgmmaRS_m64n256k16_f16_transB(o, p, desc_v, 1);
  }
}

/// The producer's walk of the K/V ring, shared by its TMA and cp.async
/// loaders. onTile for every tile; per tile with keys (beginTile first), per
/// step: K of the step's key block into its stage once the consumers
/// released it, then V of the block before (the consumers read V one step
/// behind K), then afterStep; the tile's last V after its last step. beforeK runs before the wait for
/// the K stage, so what it reads hides behind the wait. g counts ring
/// positions over all of the CTA's tiles, so the ring runs on across tiles:
/// the next tile's K/V stream in while the consumers finish the current one.
/// (A function template, not a generic lambda: NVRTC takes those for host
/// code.)
template <int kStages, class TileAt, class TileAfter, class OnTile, class BeginTile, class BeforeK, class LoadK,
          class LoadV, class AfterStep>
__device__ __forceinline__ void walkKVRing(int first_tile, int num_tiles, TileAt tileAt, TileAfter tileAfter,
                                           unsigned long long *empty_k, unsigned long long *empty_v, OnTile onTile,
                                           BeginTile beginTile, BeforeK beforeK, LoadK loadK, LoadV loadV,
                                           AfterStep afterStep) {
  int g0 = 0; // ring position of this tile's step 0
  for (int t = first_tile; t < num_tiles; t = tileAfter(t)) {
    const auto tile = tileAt(t);
    onTile(tile, t); // every tile, with keys or not
    if (tile.n_count == 0)
      continue;
    beginTile(tile, g0);
    for (int step = 0; step < tile.n_count; ++step) {
      const int g = g0 + step, stage = g % kStages;
      beforeK(tile, step);
      mbarrierWait(&empty_k[stage], ((g / kStages) & 1) ^ 1);
      loadK(tile, step, stage, g);
      if (step > 0) {
        const int before = (g - 1) % kStages;
        mbarrierWait(&empty_v[before], (((g - 1) / kStages) & 1) ^ 1);
        loadV(tile, before, g - 1);
      }
      afterStep(tile, g);
    }
    const int g_last = g0 + tile.n_count - 1, last = g_last % kStages;
    mbarrierWait(&empty_v[last], ((g_last / kStages) & 1) ^ 1);
    loadV(tile, last, g_last);
    g0 += tile.n_count;
  }
}

} // namespace sm90

/// Kernel body; launched as prefillKernel<PrefillSm90Traits<...>, Variant>
/// (prefill.cuh) with kThreads threads and kSmemBytes of dynamic shared memory.
template <class Traits, class Variant> __device__ __forceinline__ void prefillSm90Body(const PrefillParams &params) {
  using T = typename Traits::DType;
  using Ops = ElementOps<T>;
  constexpr int D = Traits::kHeadDim, BM = Traits::kBlockM, BN = Traits::kBlockN;
  constexpr int WM = Traits::kWarpgroupRows;
  constexpr int CPR = Traits::kChunksPerRow;
  constexpr int kStages = Traits::kStages;
  constexpr int kSTiles = BN / 8; // n8 tiles of S per warp
  constexpr int kOTiles = D / 8;  // n8 tiles of O per warp

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  T *smem_q = reinterpret_cast<T *>(smem_raw);                     // [buffer][warpgroup][64][D]
  T *smem_k = smem_q + Traits::kQBuffers * Traits::kQElems;        // [stage][BN][D]
  T *smem_v = smem_k + kStages * Traits::kKVElems;                 // [stage][BN][D]
  unsigned long long *full_k = reinterpret_cast<unsigned long long *>(smem_raw + Traits::kBookkeepingOffset);
  unsigned long long *full_v = full_k + kStages;
  unsigned long long *empty_k = full_v + kStages;
  unsigned long long *empty_v = empty_k + kStages;
  long long *row_offsets = reinterpret_cast<long long *>(empty_v + kStages); // [kOffsetSlots][BN]
  // This CTA's two stream-K tail parts (attention/tile_order.h).
  PrefillTailPart *tail_plan = reinterpret_cast<PrefillTailPart *>(row_offsets + Traits::kOffsetSlots * BN);
  unsigned long long *q_empty = reinterpret_cast<unsigned long long *>(tail_plan + 2); // [Q buffer]

  // The tiles this CTA runs and their order: attention/tile_order.h.
  const int m_blocks = ceilDiv(params.max_seqlen_q, BM);
  const int grid_tiles = m_blocks * params.num_qo_heads * params.batch;
  const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int ctas = gridDim.x * gridDim.y * gridDim.z;
  constexpr PrefillWalk kWalk = prefillWalk<Traits, Variant>();
  constexpr bool kSeveralTiles = kWalk != PrefillWalk::kOneTile;
  // Stream-K tail (PrefillParams::tail_tiles, the persistent walk only): the
  // whole rounds walk as usual; the last partial round's key-block steps
  // are shared out evenly, in contiguous ranges, so a CTA runs at most two
  // parts of tiles. They sit at walk indices whole_tiles + cta and
  // whole_tiles + ctas + cta (whole_tiles is a multiple of ctas), so the
  // walk's stride is unchanged and only tileAt and the epilogue look at them.
  constexpr bool kTail = prefillHasStreamKTail<Traits, Variant>();
  const int tail_tiles = kTail ? params.tail_tiles : 0;
  const int whole_tiles = grid_tiles - tail_tiles;
  // The persistent pairs' last partial round as single tiles, longest
  // first (PrefillPairTail): this CTA's two walk indices past the whole
  // rounds (whole_tiles + 2 cta and + 1; whole_tiles is even) map to the
  // grid tiles in tail_plan[0] and [1]'s `tile`, looked up once below (the
  // mapping inline in the walk made every causal tile's epilogue ~300
  // cycles slower: device run 277).
  constexpr bool kPairTail = kWalk == PrefillWalk::kMirroredPair;
  static_assert(!(kTail && kPairTail), "the tail plan holds one tail's parts");
  const PrefillPairTail pair_tail =
      kPairTail ? prefillPairTail(grid_tiles, m_blocks, ctas) : PrefillPairTail{grid_tiles, 0};
  const int num_tiles = tail_tiles > 0             ? whole_tiles + 2 * ctas
                        : pair_tail.tail_tiles > 0 ? pair_tail.whole_tiles + 2 * ctas
                                                   : grid_tiles; // the walk's index space
  const int first_tile = prefillFirstTile(kWalk, cta);
  auto tileAfter = [&](int t) { return prefillTileAfter(kWalk, t, ctas, num_tiles); };
  const KVCacheView &kv = params.kv;
  const int group_size = params.num_qo_heads / params.num_kv_heads;
  struct Tile {
    int head, seq, q_start, q_len, m0, kv_len, pos_offset, kv_head, n_end, n_count;
  };
  // The consumers' next tile as the producer publishes it (q_by_producer):
  // slot b holds the tile after the one on Q buffer b ^ 1.
  struct NextTile {
    Tile tile;
    int index, pad;
  };
  static_assert(2 * sizeof(NextTile) == Traits::kNextTileBytes, "the next-tile slots' bookkeeping size");
  NextTile *next_tiles = reinterpret_cast<NextTile *>(q_empty + Traits::kQEmptyBarriers); // [2]
  // n_count = 0 both for tiles past their sequence's queries (skipped) and
  // for rows that see no key (which still write zeros).
  auto gridTileAt = [&](int t) {
    Tile tile;
    const int m_block = prefillQueryBlock(kWalk, t, m_blocks);
    const int rest = t / m_blocks;
    tile.head = rest % params.num_qo_heads;
    tile.seq = rest / params.num_qo_heads;
    tile.q_start = params.cu_seqlens_q[tile.seq];
    tile.q_len = params.cu_seqlens_q[tile.seq + 1] - tile.q_start;
    tile.m0 = m_block * BM;
    tile.kv_len = kv.page_table != nullptr ? params.maybe_kv_lens[tile.seq]
                                           : kv.maybe_cu_seqlens_k[tile.seq + 1] - kv.maybe_cu_seqlens_k[tile.seq];
    tile.pos_offset = tile.kv_len - tile.q_len; // query row i sits at key position i + pos_offset
    tile.kv_head = tile.head / group_size;
    const int m_last = min(tile.m0 + BM, tile.q_len) - 1;
    const int key_lo = Variant::keyBegin(tile.m0 + tile.pos_offset, params.variant);
    const int key_hi = max(0, Variant::keyEnd(m_last + tile.pos_offset, tile.kv_len));
    const int n_first = key_lo / BN;
    tile.n_end = key_hi > key_lo ? ceilDiv(key_hi, BN) : n_first;
    tile.n_count = tile.m0 < tile.q_len ? tile.n_end - n_first : 0; // step i: key block n_end - 1 - i
    return tile;
  };
  // A tail part is its tile with fewer steps, starting s_begin steps below
  // the top; one without a tile has no query rows (skipped).
  auto tileAt = [&](int t) {
    PrefillTailPart part{0, 0, -1, 0};
    if (kTail && t >= whole_tiles) {
      part = tail_plan[t >= whole_tiles + ctas ? 1 : 0];
      t = whole_tiles + max(part.tile, 0);
    }
    int pair_tail_tile = 0;
    if (kPairTail && t >= pair_tail.whole_tiles) {
      pair_tail_tile = tail_plan[t & 1].tile;
      t = max(pair_tail_tile, 0);
    }
    Tile tile = gridTileAt(t);
    if (kPairTail && pair_tail_tile < 0) {
      // A tail position past the tail: no query rows and no keys (the
      // producer's ring walks every tile and skips those without keys).
      tile.m0 = tile.q_len;
      tile.n_count = 0;
    }
    if (kTail && part.count >= 0) {
      tile.n_end -= part.s_begin;
      tile.n_count = part.count;
      if (part.tile < 0)
        tile.m0 = tile.q_len;
    }
    return tile;
  };
  // This CTA's tiles that have query rows (the producer's walk skips the
  // others too, and those without keys): the first from `from` on, and its fields
  // into `found` (looked up once: its index arithmetic and loads are on a
  // consumer's path between its GEMMs).
  auto nextTile = [&](int from, Tile &found) {
    for (int t_next = from; t_next < num_tiles; t_next = tileAfter(t_next)) {
      found = tileAt(t_next);
      if (found.m0 < found.q_len)
        return t_next;
    }
    return num_tiles;
  };
  // Tiles overlapped (below, at the consumers); with them and Q's rows
  // known the producer loads each tile's Q (q_by_producer, below).
  constexpr bool kOverlapTiles = prefillOverlapsTiles<Traits, Variant>();
  // Each tile's Q by TMA from the producer, on the barrier of its first K
  // block, which the consumers wait for anyway (their own Q copy held the
  // warpgroup ~1K cycles in a tile's last step, device run 154; a wait of
  // their own for a TMA Q, inside the tile boundary's branch, put the step
  // loop's wgmma descriptors in general registers, run 156). The consumers
  // free a buffer on q_empty once its O's TMA store has read it.
  const bool q_by_producer = kOverlapTiles && params.q_by_tma && params.kv_by_tma;
  const int tid = threadIdx.x;
  const int warpgroup = tid / 128;
  // With PrefillParams::first_tile_l2_prefetch (off until measured), the
  // first tile's Q and first K block, asked of the L2 as the CTA
  // starts by a warp the set-up below does not hold (the producer's
  // second): the TMA loads of them go out only after that set-up, the
  // __syncthreads and the producer's tile lookup, and a CTA's first step
  // waited ~7.8K cycles for them where later tiles' wait ~0.2K (run 296,
  // d128 full 1k and 16k alike: a launch's fixed cost). Contiguous K/V
  // only (a paged block's page is one more lookup); the kernels that use Q's
  // descriptor (d64, d128: at d256 the code made ptxas spill 16 bytes more).
  constexpr bool kPrefetchFirstTile =
      prefillOverlapsTiles<Traits, Variant>() || prefillPrefetchesQ<Traits, Variant>();
  if (kPrefetchFirstTile && tid == 32 && params.first_tile_l2_prefetch && params.kv_by_tma &&
      kv.page_table == nullptr && first_tile < whole_tiles &&
      (!kPairTail || first_tile < pair_tail.whole_tiles)) {
    const Tile first = gridTileAt(first_tile);
    if (first.m0 < first.q_len && first.n_count > 0) {
      if (params.q_by_tma) {
        tmaPrefetchDescriptor(&params.tma_q);
#pragma unroll
        for (int c = 0; c < Traits::kConsumerWarpgroups; ++c)
#pragma unroll
          for (int blk = 0; blk < D / 64; ++blk)
            tmaPrefetchL2_4d(&params.tma_q, blk * 64, first.q_start + first.m0 + c * WM, first.head,
                             0);
      }
      tmaPrefetchDescriptor(&params.tma_k);
      const int k_row = kv.maybe_cu_seqlens_k[first.seq] + (first.n_end - 1) * BN;
#pragma unroll
      for (int blk = 0; blk < D / 64; ++blk)
        tmaPrefetchL2_4d(&params.tma_k, blk * 64, k_row, first.kv_head, 0);
    }
  }
  if (tid == 0) {
    // A stage fills with one expect-tx arrival (TMA) or one cp.async arrival
    // per producer thread.
    const unsigned fill_arrivals = params.kv_by_tma ? 1 : Traits::kProducerThreads;
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbarrierInit(&full_k[s], fill_arrivals);
      mbarrierInit(&full_v[s], fill_arrivals);
      mbarrierInit(&empty_k[s], Traits::kConsumerWarps);
      mbarrierInit(&empty_v[s], Traits::kConsumerWarps);
    }
    mbarrierInit(&q_empty[0], Traits::kConsumerWarpgroups);
    mbarrierInit(&q_empty[1], Traits::kConsumerWarpgroups);
    mbarrierInitFence();
    if (tail_tiles > 0) {
      const int steps = gridTileAt(whole_tiles).n_count; // every tail tile's
      tail_plan[0] = prefillTailPart(cta, 0, ctas, tail_tiles, steps);
      tail_plan[1] = prefillTailPart(cta, 1, ctas, tail_tiles, steps);
    }
    if (kPairTail && pair_tail.tail_tiles > 0)
      for (int i = 0; i < 2; ++i)
        tail_plan[i].tile = prefillPairWalkTile(pair_tail.whole_tiles + 2 * cta + i, pair_tail, ctas, m_blocks);
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---------------------------------------------------------------- producer
    warpgroupRegistersDown<Traits::kProducerRegisters>();
    if (params.kv_by_tma) {
      // TMA: one thread loads a key block of K or V as one box per 64
      // columns (the descriptor's 128-byte swizzle is the wgmma layout); the
      // stage's full barrier counts the bytes. Contiguous K/V: rows past the
      // sequence are the next sequence's keys, or zeros past the tensor.
      // Paged (a page holds whole key blocks): a block past the sequence
      // reads zeros (its in-page row is out of range). The consumers mask
      // every key past the sequence. (Boxes of a page's part of a block,
      // one a lane, lost to cp.async on 16-token pages: device run 47.)
      if (tid != 0)
        return;
      const bool paged = kv.page_table != nullptr;
      tmaPrefetchDescriptor(&params.tma_k);
      tmaPrefetchDescriptor(&params.tma_v);
      struct Box {
        int row, page; // (token, 0) contiguous; (in-page row, page) paged
      };
      // Resolved before the wait for the stage, so a page-table read hides
      // behind it.
      auto boxOf = [&](const Tile &tile, int step) -> Box {
        const int key = (tile.n_end - 1 - step) * BN;
        if (!paged)
          return {kv.maybe_cu_seqlens_k[tile.seq] + key, 0};
        if (key >= tile.kv_len)
          return {kv.page_size, 0};
        return {key & (kv.page_size - 1),
                __ldg(kv.page_table + tile.seq * kv.page_table_stride + (key >> kv.page_size_log2))};
      };
      auto loadBlock = [&](const TmaDescriptor &desc, T *tile_smem, unsigned long long *full, Box box, int kv_head) {
        mbarrierArriveExpectTx(full, Traits::kKVElems * sizeof(T));
#pragma unroll
        for (int blk = 0; blk < D / 64; ++blk)
          tmaLoad4d(tile_smem + blk * BN * 64, &desc, blk * 64, box.row, kv_head, box.page, full);
      };
      Box box{}, box_before{}; // this step's K block, and the block whose V follows it
      // Q (q_by_producer): the consumers' k-th tile with query rows runs on
      // Q buffer k % 2, which they free in tile k - 1's last step (the
      // first two are free). Its first K block goes out before the wait
      // (ahead, as every K block), its Q after it, on the same barrier. A
      // tile without keys waits at once, so the producer is never more
      // than a tile ahead of the consumers. The consumers' tile k + 1 is
      // published in slot (k + 1) % 2 by the producer's tile k - 1 (its
      // first, tile 1, by tile 0 first of all), after that tile's Q: the
      // consumers read it in tile k after the barrier of its first K block,
      // and their own lookup (global loads and divisions) took ~520 cycles
      // of a 1k tile (run 159); done before tile k's K and Q, it held them
      // back ~500 cycles (run 160). `ahead`: the walk index published last.
      int q_tiles = 0, ahead = num_tiles;
      auto publishAfter = [&](int from, int slot) {
        NextTile next{};
        next.index = nextTile(tileAfter(from), next.tile);
        next_tiles[slot] = next;
        ahead = next.index;
      };
      auto waitForQBuffer = [&](int k) { // the consumers' tile k's buffer, freed in tile k - 1
        if (k >= 1)
          mbarrierWait(&q_empty[k & 1], ((k - 1) >> 1) & 1);
      };
      auto publishNext = [&](int k) { // tile k + 2, once the slot's tile k was read
        if (ahead < num_tiles)
          publishAfter(ahead, k & 1);
      };
      // Without the overlap the consumers copy each tile's Q themselves at
      // the tile before's end; the producer, a ring ahead, asks the L2 for
      // it as it reaches the tile, so their copy does not wait on DRAM (the
      // first tile's gains nothing). Run 174's causal 1k tiles waited
      // 1.1-1.3K cycles for Q after the epilogue on an H100, 0.4-0.8K on
      // an H200 (run 166), of ~18K a tile.
      const bool q_to_l2 = prefillPrefetchesQ<Traits, Variant>() && params.q_by_tma && params.q_l2_prefetch;
      if (q_by_producer || q_to_l2)
        tmaPrefetchDescriptor(&params.tma_q);
      sm90::walkKVRing<kStages>(
          first_tile, num_tiles, tileAt, tileAfter, empty_k, empty_v,
          [&](const Tile &tile, int t) {
            if (q_to_l2 && tile.m0 < tile.q_len) {
#pragma unroll
              for (int c = 0; c < Traits::kConsumerWarpgroups; ++c)
#pragma unroll
                for (int blk = 0; blk < D / 64; ++blk)
                  tmaPrefetchL2_4d(&params.tma_q, blk * 64, tile.q_start + tile.m0 + c * WM, tile.head, 0);
            }
            if (!q_by_producer || tile.m0 >= tile.q_len)
              return;
            const int k = q_tiles++;
            if (k == 0)
              publishAfter(t, 1);
            if (tile.n_count == 0) {
              waitForQBuffer(k);
              publishNext(k);
            }
          },
          [](const Tile &, int) {}, [&](const Tile &tile, int step) { box = boxOf(tile, step); },
          [&](const Tile &tile, int step, int stage, int) {
            if (q_by_producer && step == 0) {
              const int k = q_tiles - 1, b = k & 1;
              mbarrierArriveExpectTx(&full_k[stage], (Traits::kKVElems + Traits::kQElems) * sizeof(T));
#pragma unroll
              for (int blk = 0; blk < D / 64; ++blk)
                tmaLoad4d(smem_k + stage * Traits::kKVElems + blk * BN * 64, &params.tma_k, blk * 64, box.row,
                          tile.kv_head, box.page, &full_k[stage]);
              waitForQBuffer(k);
#pragma unroll
              for (int c = 0; c < Traits::kConsumerWarpgroups; ++c)
#pragma unroll
                for (int blk = 0; blk < D / 64; ++blk)
                  tmaLoad4d(smem_q + (b * BM + c * WM) * D + blk * WM * 64, &params.tma_q, blk * 64,
                            tile.q_start + tile.m0 + c * WM, tile.head, 0, &full_k[stage]);
              publishNext(k);
              return;
            }
            loadBlock(params.tma_k, smem_k + stage * Traits::kKVElems, &full_k[stage], box, tile.kv_head);
          },
          [&](const Tile &tile, int stage, int) {
            loadBlock(params.tma_v, smem_v + stage * Traits::kKVElems, &full_v[stage], box_before, tile.kv_head);
          },
          [&](const Tile &, int) { box_before = box; });
      return;
    }
    // Without TMA descriptors (pages smaller than a key block, kernels from
    // NVRTC modules, prefill_kv_tma off): the producer warpgroup gathers rows
    // with cp.async.
    constexpr int kRowsPerPass = Traits::kProducerThreads / CPR;
    const int c = tid % CPR, r0 = tid / CPR;
    // This thread's 16-byte chunk of any row: byte pointers, so a copy costs
    // one 64-bit add on top of the row's byte offset.
    const char *k_base = static_cast<const char *>(kv.k) + c * 16;
    const char *v_base = static_cast<const char *>(kv.v) + c * 16;
    // Thread tid resolves key rows tid (and tid + 128 where BN > 128) of a
    // block (page-table read included) to a byte offset shared by K and V;
    // -1 marks keys past the sequence. Issued a step ahead of its use, so
    // the lookup latency hides behind the waits for free stages.
    constexpr int kResolves = (BN + Traits::kProducerThreads - 1) / Traits::kProducerThreads;
    auto resolveRow = [&](const Tile &tile, int step, int row) -> long long {
      const int key = (tile.n_end - 1 - step) * BN + row;
      return row < BN && key < tile.kv_len
                 ? (kvRowOffset<Traits::kPageSize>(kv, tile.seq, key) + (long long)tile.kv_head * kv.head_stride) *
                       (long long)sizeof(T)
                 : -1;
    };
    const int first_row_offset = wgmmaTileOffset(BN, r0, c);
    // g: the ring position, counted over all of this CTA's tiles.
    auto loadTile = [&](const char *base, T *tile_smem, int g) {
      const long long *offsets = row_offsets + (g % Traits::kOffsetSlots) * BN;
      // The offset reads are batched ahead of the copies: a cp.async writes
      // shared memory, so no read after it may be hoisted above it.
      constexpr int kRowsPerThread = BN / kRowsPerPass;
      // Offsets batched within the producer's registers (8 at 40, 4 at 32).
      constexpr int kBatch = kRowsPerPass % 8 != 0 || Traits::kProducerRegisters < 40 ? 4
                             : kRowsPerThread < 8                                    ? kRowsPerThread
                                                                                     : 8;
#pragma unroll
      for (int i0 = 0; i0 < kRowsPerThread; i0 += kBatch) {
        long long rows[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
          if (i0 + j < kRowsPerThread)
            rows[j] = offsets[r0 + (i0 + j) * kRowsPerPass];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          if (i0 + j >= kRowsPerThread)
            continue;
          const int r = r0 + (i0 + j) * kRowsPerPass;
          // Passes of a multiple of 8 rows keep (r % 8), so the swizzled
          // offset only moves by whole rows.
          T *dst = kRowsPerPass % 8 == 0 ? tile_smem + first_row_offset + (i0 + j) * kRowsPerPass * 64
                                         : tile_smem + wgmmaTileOffset(BN, r, c);
          if (rows[j] >= 0)
            cpAsync16(dst, base + rows[j]);
          else
            cpAsync16(dst, base, false); // past the sequence: zero-fill, nothing read
        }
      }
    };
    long long next[kResolves]; // the next step's rows, resolved between its K and V copies
    sm90::walkKVRing<kStages>(
        first_tile, num_tiles, tileAt, tileAfter, empty_k, empty_v, [](const Tile &, int) {},
        [&](const Tile &tile, int g0) {
          // Slot g0 was last read for V of step g0 - 3, which every thread is past.
#pragma unroll
          for (int i = 0; i < kResolves; ++i) {
            const int row = tid + i * Traits::kProducerThreads;
            if (row < BN)
              row_offsets[(g0 % Traits::kOffsetSlots) * BN + row] = resolveRow(tile, 0, row);
          }
        },
        // Offsets of this step visible to all; every thread is past step - 1,
        // so the slot afterStep writes (last read for V of step - 2) is free.
        [&](const Tile &, int) {
          namedBarrierSync(sm90::producerBarrier(Traits::kConsumerWarpgroups), Traits::kProducerThreads);
        },
        [&](const Tile &tile, int step, int stage, int g) {
          loadTile(k_base, smem_k + stage * Traits::kKVElems, g);
          cpAsyncMbarrierArrive(&full_k[stage]);
#pragma unroll
          for (int i = 0; i < kResolves; ++i)
            next[i] = step + 1 < tile.n_count ? resolveRow(tile, step + 1, tid + i * Traits::kProducerThreads) : -1;
        },
        [&](const Tile &, int stage, int g) {
          loadTile(v_base, smem_v + stage * Traits::kKVElems, g);
          cpAsyncMbarrierArrive(&full_v[stage]);
        },
        [&](const Tile &, int g) {
#pragma unroll
          for (int i = 0; i < kResolves; ++i) {
            const int row = tid + i * Traits::kProducerThreads;
            if (row < BN)
              row_offsets[((g + 1) % Traits::kOffsetSlots) * BN + row] = next[i];
          }
        });
    cpAsyncWaitAll(); // no copy outlives its issuing thread
    return;
  }

  // ---------------------------------------------------------------- consumers
  warpgroupRegistersUp<Traits::kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  const int t = tid % 128, warp = t / 32, lane = t % 32;
  const int group = lane / 4, quad = lane % 4;

  // This warpgroup's rows of Q buffer b (Traits::kQBuffers).
  auto qBuffer = [&](int b) { return smem_q + (b * BM + consumer * WM) * D; };
  // Q tile of this warpgroup into `dst`: rows past the sequence are
  // zero-filled. With the tiles overlapped, issued for the next tile under
  // this one's last step; otherwise before this one's epilogue.
  auto loadQ = [&](const Tile &tile, T *dst) {
    const int wm0 = tile.m0 + consumer * WM;
    const T *q_base = static_cast<const T *>(params.q) + tile.head * params.q_head_stride;
    for (int idx = t; idx < WM * CPR; idx += 128) {
      const int r = idx / CPR, c = idx % CPR;
      const bool valid = wm0 + r < tile.q_len;
      const T *src = q_base + (valid ? (long long)(tile.q_start + wm0 + r) * params.q_token_stride + c * 8 : 0);
      cpAsync16(dst + wgmmaTileOffset(WM, r, c), src, valid);
    }
    cpAsyncCommit();
  };
  const unsigned q_addr = smemAddress(qBuffer(0));
  // Round robin: each consumer issues after the one before it, consumer 0
  // first. A barrier counts its waiter and the one arriver, 256 threads.
  constexpr int kConsumers = Traits::kConsumerWarpgroups;
  const int my_turn = sm90::kTurnBarrier0 + consumer;
  const int next_turn = sm90::kTurnBarrier0 + (consumer + 1) % kConsumers;
  if (consumer == kConsumers - 1)
    namedBarrierArrive(sm90::kTurnBarrier0, 256); // consumer 0 issues first

  float o_acc[kOTiles][4];
  float s_acc[kSTiles][4];
  unsigned p_frag[BN / 16][4];
  float row_max[2], row_sum[2], rescale[2];
  // Without a soft-cap the logit is score * scale with scale > 0, so the max
  // is taken on raw scores and the scale folds into exp2's argument (FFMA).
  const float score_scale = Variant::kSoftCap ? 1.f : params.variant.sm_scale_log2;

  // Descriptors are built once; a k16 step or a stage only moves the start
  // address, which is the low field (address / 16) of the descriptor.
  const unsigned long long q_desc = wgmmaDescriptorK128(q_addr);
  const unsigned long long k_desc = wgmmaDescriptorK128(smemAddress(smem_k));
  const unsigned long long v_desc = wgmmaDescriptorMN128(smemAddress(smem_v), BN * 128);
  constexpr unsigned kStageStep = Traits::kKVElems * sizeof(T) / 16;
  constexpr unsigned kQBufferStep = Traits::kQElems * sizeof(T) / 16;
  auto issueQK = [&](int stage, int q_buffer) {
    const unsigned long long q_desc_b = q_desc + q_buffer * kQBufferStep;
    const unsigned long long k_stage = k_desc + stage * kStageStep;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      // 64-column block kk / 4 (rows x 128 bytes each), then 32 bytes per k16.
      const unsigned q_byte = (kk / 4) * WM * 128 + (kk % 4) * 32;
      const unsigned k_byte = (kk / 4) * BN * 128 + (kk % 4) * 32;
      sm90::wgmmaQK<T, BN>(s_acc, q_desc_b + (q_byte >> 4), k_stage + (k_byte >> 4), kk > 0);
    }
    wgmmaCommit();
  };
  auto issuePV = [&](int stage) {
    const unsigned long long v_stage = v_desc + stage * kStageStep;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) // 16 keys = two 8-row groups, 2048 bytes
      sm90::wgmmaPV<T, D>(o_acc, p_frag[kk], v_stage + kk * (2048 >> 4));
    wgmmaCommit();
  };
  auto releaseStage = [&](unsigned long long *bar) {
    __syncwarp();
    if (lane == 0)
      mbarrierArrive(bar);
  };

  // Logits, masks and the online softmax of S for key block n_block: leaves
  // exp2 values in s_acc and the O rescale factor per row in rescale[].
  auto softmax = [&](const Tile &tile, int n_block) {
    const int wm0 = tile.m0 + consumer * WM, kv_len = tile.kv_len, pos_offset = tile.pos_offset;
    const int key0 = n_block * BN;
    const bool needs_mask =
        key0 + BN > kv_len || (Variant::kCausal && key0 + BN - 1 > wm0 + pos_offset) ||
        (Variant::kWindow && key0 < wm0 + WM - 1 + pos_offset - params.variant.window_left);
    if constexpr (Variant::kSoftCap) {
#pragma unroll
      for (int j = 0; j < kSTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s_acc[j][e] = Variant::logit(s_acc[j][e], params.variant);
    }
    // A branch of its own: folded into the loop above, the compiler
    // predicates the per-element test into every block, masked or not.
    if (needs_mask) {
      const int query_pos0 = wm0 + warp * 16 + group + pos_offset;
#pragma unroll
      for (int j = 0; j < kSTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + j * 8 + quad * 2 + (e & 1);
          if (!Variant::visible(query_pos0 + (e >> 1) * 8, key, kv_len, params.variant))
            s_acc[j][e] = -INFINITY;
        }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float block_max = row_max[r];
#pragma unroll
      for (int j = 0; j < kSTiles; ++j)
        block_max = fmaxf(block_max, fmaxf(s_acc[j][2 * r], s_acc[j][2 * r + 1]));
      block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
      block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 2));
      // Rows that have seen only masked keys keep max -inf and p = 0.
      const float safe_max = block_max == -INFINITY ? 0.f : block_max;
      const float neg_scaled_max = -safe_max * score_scale;
      rescale[r] = exp2Approx(row_max[r] * score_scale + neg_scaled_max);
      row_max[r] = block_max;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kSTiles; ++j) {
        s_acc[j][2 * r] = exp2Approx(fmaf(s_acc[j][2 * r], score_scale, neg_scaled_max));
        s_acc[j][2 * r + 1] = exp2Approx(fmaf(s_acc[j][2 * r + 1], score_scale, neg_scaled_max));
        sum += s_acc[j][2 * r] + s_acc[j][2 * r + 1];
      }
      row_sum[r] = row_sum[r] * rescale[r] + sum;
    }
  };
  auto rescaleOAndPackP = [&]() {
#pragma unroll
    for (int j = 0; j < kOTiles; ++j) {
      o_acc[j][0] *= rescale[0];
      o_acc[j][1] *= rescale[0];
      o_acc[j][2] *= rescale[1];
      o_acc[j][3] *= rescale[1];
    }
    // Two n8 tiles of S form one k16 A fragment of the P V wgmma.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      p_frag[kk][0] = Ops::fromFloat2(s_acc[2 * kk][0], s_acc[2 * kk][1]);
      p_frag[kk][1] = Ops::fromFloat2(s_acc[2 * kk][2], s_acc[2 * kk][3]);
      p_frag[kk][2] = Ops::fromFloat2(s_acc[2 * kk + 1][0], s_acc[2 * kk + 1][1]);
      p_frag[kk][3] = Ops::fromFloat2(s_acc[2 * kk + 1][2], s_acc[2 * kk + 1][3]);
    }
  };

  // Diagnostics (Traits::kPhaseTrace): params.maybe_phase_trace (params.h,
  // PrefillPhase), stamped by thread 0 of each consumer warpgroup.
  int traced_tiles = 0;
  long long *trace_row = nullptr;
  auto stamp = [&](int slot) {
    if constexpr (Traits::kPhaseTrace)
      if (trace_row != nullptr)
        trace_row[slot] = clock64();
  };

  // With two Q buffers a CTA that walks several tiles overlaps them
  // (kOverlapTiles): the next tile's Q loads into the other buffer during
  // this tile (by the producer with the tile's first K block where
  // q_by_producer, else by the consumers under this tile's last step), and
  // its step 0 (Q K^T, then the softmax) runs at this tile's end: the Q K^T
  // goes out before this tile's epilogue, which runs under it and stages O
  // in this tile's Q buffer (read by then). Each wgmma is waited for in the
  // branch that issued it (one left in flight across the loop's branches
  // made ptxas serialize every wgmma of the kernel, C7518), and each
  // consumer's turn order is unchanged. Two consumers only: d64's three at
  // 160 registers spilled in the step loop with it (ptxas), so they keep Q
  // in buffer 0 and stage O in buffer 1. Full masks only (the
  // persistent walk): the overlap's code (65 -> 91 KB at d128) runs cold in
  // a CTA of one causal pair, as in the decode step's prefill of a 2048-token
  // prompt, whose attention it made 10% slower (device run 144).
  int g0 = 0; // ring position of this tile's step 0 (the producer's count)
  bool step0_done = false; // this tile's step 0 ran at the end of the tile before
  Tile tile{};
  int t_cur = nextTile(first_tile, tile);
  if (t_cur < num_tiles && !q_by_producer)
    loadQ(tile, qBuffer(0));
  auto waitForQ = [&]() {
    cpAsyncWait<0>();
    fenceProxyAsyncShared(); // wgmma reads what cp.async wrote
    namedBarrierSync(sm90::qBarrier(Traits::kConsumerWarpgroups, consumer), 128);
  };
  auto resetState = [&]() {
#pragma unroll
    for (int j = 0; j < kOTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o_acc[j][e] = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = -INFINITY; // in raw-score units when !kSoftCap
      row_sum[r] = 0.f;       // per-thread partial; quad-reduced at the end
      rescale[r] = 1.f;
    }
  };
  // Step 0's Q K^T (key block n_end - 1, ring position g0) of a tile whose
  // Q is in buffer qb. `real` false: issued and discarded, with no K stage
  // waited for or released (the overlapped tiles' boundary, below).
  auto issueFirstQK = [&](int qb, bool real = true) {
    const int stage0 = g0 % kStages;
    if (real)
      mbarrierWait(&full_k[stage0], (g0 / kStages) & 1);
    fenceProxyAsyncShared();
    namedBarrierSync(my_turn, 256);
    pinRegisters(s_acc);
    wgmmaFence();
    issueQK(stage0, qb);
    namedBarrierArrive(next_turn, 256);
  };
  // Step 0 after its Q K^T was issued: S of the highest key block alone.
  auto finishFirstStep = [&](const Tile &of, bool real = true) {
    wgmmaWait<0>();
    pinRegisters(s_acc);
    if (real) {
      releaseStage(&empty_k[g0 % kStages]);
      softmax(of, of.n_end - 1);
      rescaleOAndPackP();
    }
  };
  // A stream-K tail part at its end: a part without its tile's first step
  // stores its state (O unnormalized, row maxima and sums; thread-major, so
  // the stores coalesce) in its CTA's slot and counts itself done (returns
  // false: nothing to write). The part with the first step waits for the
  // others (first parts of the CTAs after it, which wait for nothing, so no
  // wait is circular; every CTA is resident, one an SM), merges them into
  // its own state and zeroes the counter for the next launch.
  constexpr int kTailFloats = kOTiles * 4 + 4;
  static_assert(!kTail || Traits::kConsumerWarpgroups * kTailFloats <= kPrefillTailFloatsPerThread,
                "the stream-K tail's slot outgrows prefillTailWorkspaceFloats");
  auto tailSlot = [&](int c) {
    return params.maybe_tail_workspace + (long long)(c * Traits::kConsumerWarpgroups + consumer) * kTailFloats * 128 + t;
  };
  auto finishTailPart = [&](const PrefillTailPart part) -> bool {
    unsigned *counter = params.maybe_tail_counters + part.tile * Traits::kConsumerWarpgroups + consumer;
    if (part.s_begin > 0) {
      float *slot = tailSlot(cta);
#pragma unroll
      for (int i = 0; i < kOTiles; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          __stcg(slot + (i * 4 + e) * 128, o_acc[i][e]);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        __stcg(slot + (kOTiles * 4 + r) * 128, row_max[r]);
        __stcg(slot + (kOTiles * 4 + 2 + r) * 128, row_sum[r]);
      }
      // The barrier puts the warpgroup's stores before thread 0's release
      // (cumulative), as the decode merge's count does: no fence a thread.
      namedBarrierSync(sm90::qBarrier(Traits::kConsumerWarpgroups, consumer), 128);
      if (t == 0)
        redAddReleaseGpu(counter, 1u);
      return false;
    }
    if (part.merges == 0)
      return true;
    // Thread 0's acquire, then the barrier: the parts' slots are visible to
    // the whole warpgroup.
    if (t == 0) {
      while (loadAcquireGpu(counter) < (unsigned)part.merges)
        __nanosleep(64);
      *counter = 0;
    }
    namedBarrierSync(sm90::qBarrier(Traits::kConsumerWarpgroups, consumer), 128);
    for (int k = 1; k <= part.merges; ++k) {
      const float *slot = tailSlot(cta + k);
      float scale_mine[2], scale_theirs[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float their_max = __ldcg(slot + (kOTiles * 4 + r) * 128);
        const float their_sum = __ldcg(slot + (kOTiles * 4 + 2 + r) * 128);
        const float m = fmaxf(row_max[r], their_max);
        const float safe_max = m == -INFINITY ? 0.f : m;
        scale_mine[r] = exp2Approx((row_max[r] - safe_max) * score_scale);
        scale_theirs[r] = exp2Approx((their_max - safe_max) * score_scale);
        row_max[r] = m;
        row_sum[r] = row_sum[r] * scale_mine[r] + their_sum * scale_theirs[r];
      }
#pragma unroll
      for (int i = 0; i < kOTiles; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o_acc[i][e] = o_acc[i][e] * scale_mine[e / 2] + __ldcg(slot + (i * 4 + e) * 128) * scale_theirs[e / 2];
    }
    return true;
  };
  // Normalize, write O (and the natural-log LSE) of `done`, staged (kStageO)
  // in Q buffer qb. The tile's fields stay in registers through the main loop:
  // looked up again, its loads (L2 round trips beside ~200 KB of shared
  // memory) were the epilogue's critical path.
  auto epilogue = [&](const Tile &done, int qb) {
    if constexpr (kTail)
      if (t_cur >= whole_tiles) { // (t_cur is still done's walk index)
        const PrefillTailPart part = tail_plan[t_cur >= whole_tiles + ctas ? 1 : 0];
        if constexpr (Traits::kPhaseTrace)
          if (trace_row != nullptr)
            trace_row[kPhaseTailRole] = part.s_begin > 0 ? 1 : 2 + part.merges;
        const bool owner = finishTailPart(part);
        stamp(kPhaseTailMerged);
        if (!owner)
          return;
      }
    const int wm0 = done.m0 + consumer * WM; // this warpgroup's first query row
    T *o_base = static_cast<T *>(params.o) + done.head * params.o_head_stride;
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      inv[r] = sum > 0.f ? 1.f / sum : 0.f;
      const int row = wm0 + warp * 16 + group + r * 8;
      if (params.maybe_lse != nullptr && quad == 0 && row < done.q_len)
        params.maybe_lse[(long long)(done.q_start + row) * params.num_qo_heads + done.head] =
            sum > 0.f ? (row_max[r] * score_scale + log2f(sum)) * kLn2 : -INFINITY;
    }
    // Uniform over the warpgroup: TMA stores whole boxes, so a tile with
    // rows past its sequence (another sequence's rows) stores directly.
    if (Traits::kStageO && params.o_by_tma && wm0 + WM <= done.q_len) {
      // With the tiles overlapped, into the tile's own Q buffer: every warp
      // of the warpgroup is past its last Q K^T (its last P V waited for),
      // and the buffer's next Q loads only after the store has read it.
      T *smem_wo = qBuffer(qb);
      const unsigned wo_addr = smemAddress(smem_wo);
#pragma unroll
      for (int j = 0; j < kOTiles; j += 2) {
        const unsigned frag[4] = {Ops::fromFloat2(o_acc[j][0] * inv[0], o_acc[j][1] * inv[0]),
                                  Ops::fromFloat2(o_acc[j][2] * inv[1], o_acc[j][3] * inv[1]),
                                  Ops::fromFloat2(o_acc[j + 1][0] * inv[0], o_acc[j + 1][1] * inv[0]),
                                  Ops::fromFloat2(o_acc[j + 1][2] * inv[1], o_acc[j + 1][3] * inv[1])};
        // Matrix lane / 8: n8 tile j + lane / 16, rows 8 ((lane / 8) % 2) on.
        const int row = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8;
        stmatrixX4(wo_addr + 2 * wgmmaTileOffset(WM, row, j + lane / 16), frag);
      }
      fenceProxyAsyncShared(); // TMA (the async proxy) reads what stmatrix wrote
      namedBarrierSync(sm90::qBarrier(Traits::kConsumerWarpgroups, consumer), 128);
      if (t == 0) {
#pragma unroll
        for (int blk = 0; blk < D / 64; ++blk)
          tmaStore4d(&params.tma_o, smem_wo + blk * WM * 64, blk * 64, done.q_start + wm0, done.head, 0);
        bulkCommit();
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = wm0 + warp * 16 + group + r * 8;
        if (row >= done.q_len)
          continue;
        T *o_row = o_base + (long long)(done.q_start + row) * params.o_token_stride;
        // (Transposing four n8 tiles across the quad for 16-byte stores
        // measured even, device run 63.)
#pragma unroll
        for (int j = 0; j < kOTiles; ++j)
          *reinterpret_cast<unsigned *>(o_row + j * 8 + quad * 2) =
              Ops::fromFloat2(o_acc[j][2 * r] * inv[r], o_acc[j][2 * r + 1] * inv[r]);
      }
    }
  };

  // One tile whose Q is in buffer q_buffer. One call site: a copy of the
  // body for each buffer (run 142) made the kernel 65 → 152 KB of code, and
  // a CTA of the decode step's prefill (2048 tokens, one causal pair a
  // CTA) runs its code once, cold: its attention took 41.0 → 47.7 us.
  // With the boundary's Q K^T outside any branch the step loop's wgmma
  // descriptors stay uniform with a run-time buffer index too.
  auto runTile = [&](const int q_buffer) {
    const int n_count = tile.n_count, n_end = tile.n_end;
    if constexpr (Traits::kPhaseTrace) {
      trace_row = params.maybe_phase_trace != nullptr && t == 0 && traced_tiles < params.phase_trace_tiles
                      ? params.maybe_phase_trace +
                            ((cta * params.phase_trace_tiles + traced_tiles) * kMaxPrefillConsumers + consumer) *
                                kPrefillTraceSlots
                      : nullptr;
      if (trace_row != nullptr)
        trace_row[kPhaseKeyBlocks] = n_count;
      ++traced_tiles;
    }
    stamp(kPhaseTileStart);
    if (!step0_done) {
      resetState();
#pragma unroll
      for (int j = 0; j < kSTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s_acc[j][e] = 0.f;
      if (!q_by_producer) // (else it came with the first K block)
        waitForQ();
    }
    stamp(kPhaseQReady);
    if (!step0_done && n_count > 0) {
      issueFirstQK(q_buffer);
      finishFirstStep(tile);
    }
    stamp(kPhaseFirstStep);
    // The next tile: here with the overlap (its Q loads during this tile),
    // at this tile's end otherwise (held through the step loop, d64's three
    // consumers spilled more).
    int t_next = num_tiles;
    Tile next{};
    // (Published by the producer where this tile has keys: q_by_producer.)
    auto lookUpNext = [&]() {
      if (q_by_producer && n_count > 0) {
        const NextTile &published = next_tiles[q_buffer ^ 1];
        next = published.tile;
        t_next = published.index;
      } else {
        t_next = nextTile(tileAfter(t_cur), next);
      }
    };
    if constexpr (kOverlapTiles) {
      lookUpNext();
      stamp(kPhaseNextFound);
    }

    // With the overlap, the other buffer, whose last use (the tile before's
    // O) the TMA store has read by now, takes the next tile's Q. With
    // q_by_producer the thread that issued the buffer's TMA store frees it
    // for the producer here, at the tile's start, once the store has read
    // it (the warpgroup's O stores and older Q reads came before that
    // store), so the next Q lands long before the boundary (freed in the
    // last step, it still loaded there: run 165). The consumers' own copy
    // goes out under the GEMMs of this tile's last step, a copy of the
    // step peeled off the loop (after the first step, with the lookup, it
    // took ~1.2K cycles of the consumer's turn, run 140; inside the loop it
    // put the loop's wgmma descriptors in general registers, as did the
    // lookup moved there), or here in a tile of one step.
    auto loadNextQ = [&]() {
      if (t_next < num_tiles) {
        if (t == 0)
          bulkWaitRead();
        if (q_by_producer) {
          if (t == 0)
            mbarrierArrive(&q_empty[q_buffer ^ 1]);
        } else {
          namedBarrierSync(sm90::qBarrier(Traits::kConsumerWarpgroups, consumer), 128);
          loadQ(next, qBuffer(q_buffer ^ 1));
        }
      }
    };
    if constexpr (kOverlapTiles)
      if (q_by_producer || n_count < 2)
        loadNextQ();

    // Step `step` (Q K^T of its key block, P V of the one before); with
    // loads_next_q (a constant at each call), the consumers' own copy of
    // the next tile's Q goes out under its GEMMs.
    auto runStep = [&](int step, const bool loads_next_q) {
      const int g = g0 + step;
      const int stage = g % kStages, prev = (g - 1) % kStages;
      mbarrierWait(&full_k[stage], (g / kStages) & 1);
      mbarrierWait(&full_v[prev], ((g - 1) / kStages) & 1);
      fenceProxyAsyncShared();
      namedBarrierSync(my_turn, 256);
      pinRegisters(s_acc);
      pinRegisters(o_acc);
      pinRegisters(p_frag);
      wgmmaFence();
      issueQK(stage, q_buffer);
      issuePV(prev);
      namedBarrierArrive(next_turn, 256);
      if (loads_next_q && !q_by_producer)
        loadNextQ();
      wgmmaWait<1>(); // S_step is ready; P V of step - 1 still runs
      pinRegisters(s_acc);
      releaseStage(&empty_k[stage]);
      softmax(tile, n_end - 1 - step);
      pinRegisters(s_acc); // the softmax stays ahead of the wait for P V
      wgmmaWait<0>();
      pinRegisters(o_acc);
      pinRegisters(p_frag);
      releaseStage(&empty_v[prev]);
      rescaleOAndPackP();
    };

    if (n_count > 0) {
      const int loop_end = kOverlapTiles && n_count >= 2 ? n_count - 1 : n_count;
      for (int step = 1; step < loop_end; ++step)
        runStep(step, false);
      if (kOverlapTiles && n_count >= 2) {
        stamp(kPhaseLastStep);
        runStep(n_count - 1, true);
      }

      stamp(kPhaseMainLoop);
      const int g_last = g0 + n_count - 1;
      const int last = g_last % kStages;
      mbarrierWait(&full_v[last], (g_last / kStages) & 1);
      fenceProxyAsyncShared();
      namedBarrierSync(my_turn, 256);
      pinRegisters(o_acc);
      pinRegisters(p_frag);
      wgmmaFence();
      issuePV(last);
      namedBarrierArrive(next_turn, 256);
      wgmmaWait<0>();
      pinRegisters(o_acc);
      releaseStage(&empty_v[last]);
      stamp(kPhaseLastPV);
      g0 += n_count;
    }

    if constexpr (kOverlapTiles) {
      // The next tile's step 0: its Q K^T under this tile's epilogue. Issued
      // (its turn taken) even where no next tile has keys, on whatever the
      // other Q buffer and the K stage hold then, and discarded: issued and
      // waited for in a branch, it took every wgmma descriptor of the step
      // loop out of ptxas's uniform registers (~80 cycles a step, run 140).
      const bool next_has_keys = t_next < num_tiles && next.n_count > 0;
      if (next_has_keys && !q_by_producer)
        waitForQ();
      issueFirstQK(q_buffer ^ 1, next_has_keys);
      stamp(kPhaseNextQIssued);
      epilogue(tile, q_buffer);
      stamp(kPhaseOStored);
      resetState();
      finishFirstStep(next, next_has_keys);
      step0_done = next_has_keys;
    } else {
      lookUpNext();
      if constexpr (kSeveralTiles) {
        // (With O staged: the last tile's TMA store has read buffer 1, which
        // this tile's O overwrites.)
        if (Traits::kStageO && t == 0)
          bulkWaitRead();
        // Every warp of this warpgroup is past its last Q K^T: the next
        // tile's Q may overwrite the tile while this one's O is written.
        namedBarrierSync(sm90::qBarrier(Traits::kConsumerWarpgroups, consumer), 128);
        if (t_next < num_tiles)
          loadQ(next, qBuffer(0));
      }
      stamp(kPhaseNextQIssued);
      epilogue(tile, 1);
    }
    stamp(kPhaseEpilogue);
    tile = next;
    t_cur = t_next;
  };
  int q_buffer = 0;
  while (t_cur < num_tiles) {
    runTile(q_buffer);
    if constexpr (kOverlapTiles)
      q_buffer ^= 1;
  }
  if (Traits::kStageO && t == 0)
    bulkWaitAll(); // no TMA store outlives the shared memory it reads
  if (consumer == 0)
    namedBarrierSync(my_turn, 256); // consumes the last consumer's last hand-over
}

} // namespace txc::kernels
