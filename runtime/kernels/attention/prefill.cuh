//===- prefill.cuh - Prefill attention over a ragged, paged batch ---------===//
//
// FlashAttention-2-style forward kernel: S = Q K^T on wgmma (m64nBNk16, both
// operands in swizzled shared memory), O += P V on mma.sync (m16n8k16) with P
// from registers, fp32 accumulation. Not yet the FA3 structure (no TMA, no
// producer/consumer warpgroups, no GEMM/softmax overlap).
//
// Grid: (query block, query head, sequence); query blocks run longest-first
// (reversed) so causal tails do not end the launch alone. Each of the four
// warps owns 16 query rows. Per key block: S = Q K^T from shared memory
// (ldmatrix), logits turned to base 2 by the Variant, online softmax in fp32
// on the accumulator registers, P re-packed in registers as the A operand
// of O += P V (V read with ldmatrix.trans). K/V blocks are gathered row by row
// from the paged cache (or a packed ragged tensor) with cp.async into
// XOR-swizzled shared memory, double-buffered: block n+1 is in flight while
// block n is computed. Key blocks outside the causal / window range are never
// loaded; only boundary blocks evaluate the per-element mask.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/prefill_sm90.cuh"
#include "attention/variant.cuh"
#include "attention/wgmma.cuh"

namespace txc::kernels {

template <typename DType_, int kHeadDim_, int kPageSize_ = 0> struct PrefillSingleWgTraits {
  using DType = DType_;
  static constexpr bool kWarpSpecialized = false;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kPageSize = kPageSize_;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBlockM = 16 * kWarps;
  // d256 halves the key block: its O accumulator already takes 128 registers.
  static constexpr int kBlockN = kHeadDim <= 128 ? 64 : 32;
  static constexpr int kStages = 2;
  static constexpr int kChunksPerRow = kHeadDim / 8; // 16-byte chunks
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kKVElems = kBlockN * kHeadDim;
  static constexpr int kSmemBytes = (kQElems + 2 * kStages * kKVElems) * (int)sizeof(DType);

  static_assert(sizeof(DType) == 2, "prefill supports 16-bit element types");
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "head_dim must be 64, 128 or 256");
  static_assert(kChunksPerRow >= 8, "the XOR swizzle needs at least 8 chunks per row");
  static_assert(kBlockN % 16 == 0, "key block is a multiple of the MMA k");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the sm_90 limit");
};

/// Element offset of 16-byte chunk `chunk` of row `row` in a swizzled tile.
/// XOR with (row % 8) puts the 8 rows an ldmatrix reads in 8 different banks.
template <int kHeadDim> __device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

/// S += A B^T for one k16 step, both operands K-major in shared memory.
template <typename T, int kN>
__device__ __forceinline__ void wgmmaQK(float (&s)[kN / 8][4], unsigned long long desc_a, unsigned long long desc_b) {
  static_assert(kN == 32 || kN == 64, "key block of 32 or 64");
  if constexpr (kN == 64) {
    if constexpr (ElementOps<T>::kIsBf16)
      wgmmaSS_m64n64k16_bf16(s, desc_a, desc_b, 1);
    else
      wgmmaSS_m64n64k16_f16(s, desc_a, desc_b, 1);
  } else {
    if constexpr (ElementOps<T>::kIsBf16)
      wgmmaSS_m64n32k16_bf16(s, desc_a, desc_b, 1);
    else
      wgmmaSS_m64n32k16_f16(s, desc_a, desc_b, 1);
  }
}

template <class Traits, class Variant> __device__ __forceinline__ void prefillSingleWgBody(const PrefillParams &params) {
  using T = typename Traits::DType;
  using Ops = ElementOps<T>;
  constexpr int D = Traits::kHeadDim, BM = Traits::kBlockM, BN = Traits::kBlockN;
  constexpr int CPR = Traits::kChunksPerRow;
  constexpr int kSTiles = BN / 8; // n8 tiles of S per warp
  constexpr int kOTiles = D / 8;  // n8 tiles of O per warp

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  T *smem_q = reinterpret_cast<T *>(smem_raw);
  T *smem_k = smem_q + Traits::kQElems;                      // [stage][BN][D]
  T *smem_v = smem_k + Traits::kStages * Traits::kKVElems;   // [stage][BN][D]

  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int head = blockIdx.y, seq = blockIdx.z;
  const int q_start = params.cu_seqlens_q[seq];
  const int q_len = params.cu_seqlens_q[seq + 1] - q_start;
  const int m0 = m_block * BM;
  if (m0 >= q_len)
    return;
  const KVCacheView &kv = params.kv;
  const int kv_len = kv.page_table != nullptr ? params.maybe_kv_lens[seq]
                                              : kv.maybe_cu_seqlens_k[seq + 1] - kv.maybe_cu_seqlens_k[seq];
  const int pos_offset = kv_len - q_len; // query row i sits at key position i + pos_offset
  const int kv_head = head / (params.num_qo_heads / params.num_kv_heads);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m_last = min(m0 + BM, q_len) - 1;
  const int key_lo = Variant::keyBegin(m0 + pos_offset, params.variant);
  const int key_hi = max(0, Variant::keyEnd(m_last + pos_offset, kv_len));
  const int n_first = key_lo / BN;
  const int n_end = key_hi > key_lo ? ceilDiv(key_hi, BN) : n_first;

  // Q tile: rows past the sequence are zero-filled.
  const T *q_base = static_cast<const T *>(params.q) + head * params.q_head_stride;
  for (int idx = tid; idx < BM * CPR; idx += Traits::kThreads) {
    const int r = idx / CPR, c = idx % CPR;
    const bool valid = m0 + r < q_len;
    const T *src = q_base + (valid ? (long long)(q_start + m0 + r) * params.q_token_stride + c * 8 : 0);
    cpAsync16(smem_q + wgmmaTileOffset(BM, r, c), src, valid);
  }

  const T *k_base = static_cast<const T *>(kv.k) + kv_head * kv.head_stride;
  const T *v_base = static_cast<const T *>(kv.v) + kv_head * kv.head_stride;
  auto loadKV = [&](int n_block, int stage) {
    T *sk = smem_k + stage * Traits::kKVElems;
    T *sv = smem_v + stage * Traits::kKVElems;
    constexpr int kRowsPerPass = Traits::kThreads / CPR;
    const int c = tid % CPR;
#pragma unroll
    for (int r = tid / CPR; r < BN; r += kRowsPerPass) {
      const int key = n_block * BN + r;
      const bool valid = key < kv_len;
      const long long row = valid ? kvRowOffset<Traits::kPageSize>(kv, seq, key) + c * 8 : 0;
      cpAsync16(sk + wgmmaTileOffset(BN, r, c), k_base + row, valid);
      cpAsync16(sv + swizzled<D>(r, c), v_base + row, valid);
    }
  };

  if (n_first < n_end)
    loadKV(n_first, 0);
  cpAsyncCommit();

  float o_acc[kOTiles][4];
#pragma unroll
  for (int j = 0; j < kOTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o_acc[j][e] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f}; // per-thread partial; quad-reduced at the end

  const int group = lane / 4, quad = lane % 4;
  const int warp_row0 = warp * 16;
  const unsigned smem_q_addr = smemAddress(smem_q);

  for (int n_block = n_first; n_block < n_end; ++n_block) {
    const int stage = (n_block - n_first) & 1;
    if (n_block + 1 < n_end)
      loadKV(n_block + 1, stage ^ 1);
    cpAsyncCommit();
    cpAsyncWait<1>();
    fenceProxyAsyncShared(); // wgmma reads what cp.async wrote
    __syncthreads();

    const unsigned sk_addr = smemAddress(smem_k + stage * Traits::kKVElems);
    const unsigned sv_addr = smemAddress(smem_v + stage * Traits::kKVElems);

    // S = Q K^T on the tensor cores' warpgroup path: the CTA is one
    // warpgroup, so one m64nBNk16 wgmma per 16 columns of d covers the block;
    // each warp receives its 16 rows in the mma.sync fragment order.
    float s[kSTiles][4];
#pragma unroll
    for (int j = 0; j < kSTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[j][e] = 0.f;
    pinRegisters(s);
    wgmmaFence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      // 64-column block kk / 4 (rows x 128 bytes each), then 32 bytes per k16.
      const unsigned q_byte = (kk / 4) * BM * 128 + (kk % 4) * 32;
      const unsigned k_byte = (kk / 4) * BN * 128 + (kk % 4) * 32;
      wgmmaQK<T, BN>(s, wgmmaDescriptorK128(smem_q_addr + q_byte), wgmmaDescriptorK128(sk_addr + k_byte));
    }
    wgmmaCommit();
    wgmmaWaitAll();
    pinRegisters(s);

    // Logits and masks. A block needs the element test only where it crosses
    // the end of the keys, the causal diagonal or the window's left edge.
    const int key0 = n_block * BN;
    const bool needs_mask = key0 + BN > kv_len ||
                            (Variant::kCausal && key0 + BN - 1 > m0 + pos_offset) ||
                            (Variant::kWindow && key0 < m_last + pos_offset - params.variant.window_left);
#pragma unroll
    for (int j = 0; j < kSTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float logit = Variant::logit(s[j][e], params.variant);
        if (needs_mask) {
          const int key = key0 + j * 8 + quad * 2 + (e & 1);
          const int query_pos = m0 + warp_row0 + group + (e >> 1) * 8 + pos_offset;
          if (!Variant::visible(query_pos, key, kv_len, params.variant))
            logit = -INFINITY;
        }
        s[j][e] = logit;
      }

    // Online softmax on the two rows this thread holds (group and group + 8).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float block_max = row_max[r];
#pragma unroll
      for (int j = 0; j < kSTiles; ++j)
        block_max = fmaxf(block_max, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
      block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 2));
      float safe_max;
      const float rescale = onlineSoftmaxStep(row_max[r], row_sum[r], block_max, safe_max);
#pragma unroll
      for (int j = 0; j < kOTiles; ++j) {
        o_acc[j][2 * r] *= rescale;
        o_acc[j][2 * r + 1] *= rescale;
      }
#pragma unroll
      for (int j = 0; j < kSTiles; ++j) {
        s[j][2 * r] = exp2f(s[j][2 * r] - safe_max);
        s[j][2 * r + 1] = exp2f(s[j][2 * r + 1] - safe_max);
        row_sum[r] += s[j][2 * r] + s[j][2 * r + 1];
      }
    }

    // O += P V; two S tiles form one k16 A fragment.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      unsigned a[4];
      a[0] = Ops::fromFloat2(s[2 * kk][0], s[2 * kk][1]);
      a[1] = Ops::fromFloat2(s[2 * kk][2], s[2 * kk][3]);
      a[2] = Ops::fromFloat2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = Ops::fromFloat2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        unsigned b[4];
        ldmatrixX4Trans(b, sv_addr + 2 * swizzled<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dd * 2 + lane / 16));
        mma16816<T>(o_acc[2 * dd], a, b[0], b[1]);
        mma16816<T>(o_acc[2 * dd + 1], a, b[2], b[3]);
      }
    }
    __syncthreads(); // this stage is overwritten by the load issued next iteration
  }

  // Epilogue: normalize, write O (and the natural-log LSE).
  T *o_base = static_cast<T *>(params.o) + head * params.o_head_stride;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int row = m0 + warp_row0 + group + r * 8;
    if (row >= q_len)
      continue;
    T *o_row = o_base + (long long)(q_start + row) * params.o_token_stride;
#pragma unroll
    for (int j = 0; j < kOTiles; ++j)
      *reinterpret_cast<unsigned *>(o_row + j * 8 + quad * 2) =
          Ops::fromFloat2(o_acc[j][2 * r] * inv, o_acc[j][2 * r + 1] * inv);
    if (params.maybe_lse != nullptr && quad == 0)
      params.maybe_lse[(long long)(q_start + row) * params.num_qo_heads + head] =
          sum > 0.f ? (row_max[r] + log2f(sum)) * kLn2 : -INFINITY;
  }
}

/// The prefill kernel the launchers and the NVRTC codegen instantiate; the
/// Traits type picks the body (warp-specialized or single warpgroup).
/// __grid_constant__: the TMA descriptors in params are read in place.
template <class Traits, class Variant>
__global__ void __launch_bounds__(Traits::kThreads, 1) prefillKernel(const __grid_constant__ PrefillParams params) {
  if constexpr (Traits::kWarpSpecialized)
    prefillSm90Body<Traits, Variant>(params);
  else
    prefillSingleWgBody<Traits, Variant>(params);
}

/// Default prefill configuration (the one codegen names): the warp-specialized
/// kernel on FA3's tiles. PrefillSingleWgTraits (PrefillKernel::kSingleWarpgroup)
/// stays selectable.
template <typename DType, int kHeadDim, int kPageSize = 0>
using PrefillTraits = PrefillFa3TileTraits<DType, kHeadDim, kPageSize>;

} // namespace txc::kernels
