//===- QkvAttention.cu - A decode layer's QKV projection and attention, one launch -===//
//
// QkvAttention.h says why. The phases of one CTA (rank r of KV head h's
// cluster), with what each waits for:
//   before the PDL wait (nothing the previous kernel writes): kv_len, the
//     page entries of its keys and their K/V copies into shared memory, the
//     rotary factors and the q/k-norm weights into shared memory, its
//     weight rows' first chunks and biases into registers;
//   after it: its rows of h's QKV (one row pair a warp, K in passes of
//     kUnroll chunks a lane, the input's chunks of a pass asked for at
//     once), rounded to the storage type as the QKV GEMV stores them;
//   cluster barrier 1: every CTA gathers h's (G + 2) * D rows from the
//     cluster's shared memory, normalizes and rotates the query heads and
//     the key (attention/rope.cuh's arithmetic, rounded as the decode
//     attention's fold rounds them);
//   its keys' scores (a warp a key, G heads at once), the softmax state a
//     head and its unnormalized output;
//   cluster barrier 2: rank r merges outputs [r * G * D / C, (r + 1) *
//     G * D / C) over the cluster's states;
//   cluster barrier 3: no CTA leaves while another reads its shared memory;
//     then the merged outputs are stored and the CTA whose chunk holds the
//     newest key appends it and the value to the cache (global stores after
//     the last barrier: its release fences global memory, MEMBAR.ALL.GPU).
// With the push exchange (QkvAttentionExchange::kPush) the barriers go: a
// CTA stores its rows and then its states straight into its peers' shared
// memory, and each waits on its own mbarrier for the bytes it expects.
// Template parameters: the cluster size C (8 or 16), the exchange, the
// warps a CTA (8 or 16); every combination is in QkvAttentionTest and
// decode_ops_bench --steps (device run 203 and after).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/QkvAttention.h"

#include "attention/rope.cuh"
#include "runtime/backends/cuda/ElementAccess.cuh"
#include "runtime/backends/cuda/GemvMath.cuh"
#include "runtime/backends/cuda/Launch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {
namespace {

using kernels::clusterCtaRank;
using kernels::clusterSharedAddress;
using kernels::clusterSync;
using kernels::loadCluster;

constexpr int kUnroll = 4; // 16-byte chunks a lane a row per pass

template <typename T, int D, int G, int C> struct QkvAttentionShape {
  static constexpr int kRowsPerHead = (G + 2) * D;
  static constexpr int kRowsPerCta = kRowsPerHead / C;
  static constexpr int kPairsPerCta = kRowsPerCta / 2;
  static constexpr int kOutputsPerCta = G * D / C;
  static constexpr int kMaxKeys = kQkvAttentionMaxKvLen / C; // a CTA's share of the longest context
  static_assert(kRowsPerHead % (2 * C) == 0, "row pairs split evenly");
  static_assert(G * D % C == 0, "outputs split evenly");
  static_assert(D == 128, "a lane holds 4 elements of a head");
  // K then V of a CTA's keys: `keys` rows of D elements each.
  static constexpr int tileBytes(int keys) { return 2 * keys * D * static_cast<int>(sizeof(T)); }
};

/// Keys a CTA of a `cluster`-CTA cluster holds for contexts up to max_kv_len.
__host__ __device__ inline int tileKeys(int max_kv_len, int cluster) {
  return (max_kv_len + cluster - 1) / cluster;
}

/// Row j of KV head h's rows (its G query heads, then its key, then its
/// value) as a row of the QKV weight.
__device__ __forceinline__ int64_t qkvRow(int j, int h, int G, int D, int heads, int kv_heads) {
  if (j < G * D)
    return static_cast<int64_t>(h) * G * D + j;
  if (j < (G + 1) * D)
    return static_cast<int64_t>(heads) * D + static_cast<int64_t>(h) * D + (j - G * D);
  return static_cast<int64_t>(heads + kv_heads) * D + static_cast<int64_t>(h) * D +
         (j - (G + 1) * D);
}

/// The push exchange (QkvAttentionArgs::exchange == kPush): a sender stores
/// straight into the receiver's shared memory with st.async, whose bytes
/// complete a transaction count on the receiver's mbarrier, and the
/// receiver waits on that barrier alone. No cluster barrier's release, which
/// ptxas compiles to MEMBAR.ALL.GPU (run 203's suspect (2)).
__device__ __forceinline__ void mbarrierInit(unsigned long long *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(kernels::smemAddress(bar)),
               "r"(count)
               : "memory");
}
__device__ __forceinline__ void mbarrierExpectTx(unsigned long long *bar, unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(kernels::smemAddress(bar)),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void mbarrierWait(unsigned long long *bar, unsigned phase) {
  asm volatile("{\n\t.reg .pred done;\n\tWAIT_LOOP:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
               "@!done bra WAIT_LOOP;\n\t}" ::"r"(kernels::smemAddress(bar)),
               "r"(phase)
               : "memory");
}
/// Every CTA of the cluster past this point, without a release (no
/// memory ordering; before any push, so the peers' barriers exist).
__device__ __forceinline__ void clusterSyncRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::
                   : "memory");
}
/// `value` into CTA `rank`'s copy of `local`, counted on its copy of `bar`.
__device__ __forceinline__ void push(const float *local, unsigned rank, unsigned long long *bar,
                                     float value) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(
                   clusterSharedAddress(local, rank)),
               "r"(__float_as_uint(value)), "r"(clusterSharedAddress(bar, rank))
               : "memory");
}
__device__ __forceinline__ void push2(const float *local, unsigned rank, unsigned long long *bar,
                                      float v0, float v1) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(
          clusterSharedAddress(local, rank)),
      "r"(__float_as_uint(v0)), "r"(__float_as_uint(v1)), "r"(clusterSharedAddress(bar, rank))
      : "memory");
}

template <typename T> __device__ __forceinline__ float toFloat(T v) {
  return gemv::Pack<T>::toFloat(v);
}
template <typename T> __device__ __forceinline__ float rounded(float v) {
  return gemv::Pack<T>::toFloat(gemv::Pack<T>::fromFloat(v));
}

template <typename T, int D, int G, int C, bool kPush, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 1) qkvAttentionKernel(const QkvAttentionArgs a) {
  constexpr int kThreads = kWarps * 32;
  using Shape = QkvAttentionShape<T, D, G, C>;
  constexpr int R = Shape::kRowsPerCta;
  constexpr int kMaxKeys = Shape::kMaxKeys;
  const int tile_keys = tileKeys(a.max_kv_len, C);
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  T *k_tile = reinterpret_cast<T *>(dynamic_smem);  // [tile_keys][D]
  T *v_tile = k_tile + tile_keys * D;               // [tile_keys][D]
  __shared__ float rows[R];                         // this CTA's QKV rows
  __shared__ __align__(16) float head[(G + 2) * D]; // h's rows, roped
  __shared__ float rope_cs[D];                      // (cos, sin) pairs
  __shared__ float q_norm_w[D], k_norm_w[D];
  __shared__ float scores[G][kMaxKeys];
  __shared__ float state_m[G], state_l[G];
  __shared__ __align__(16) float state_acc[kPush ? 1 : G * D];
  // The push exchange's receive buffers: the states of every CTA for this
  // CTA's outputs, and its two barriers (the head's rows, the states).
  __shared__ float recv_acc[kPush ? C : 1][Shape::kOutputsPerCta];
  __shared__ float recv_m[kPush ? C : 1][G], recv_l[kPush ? C : 1][G];
  __shared__ unsigned long long exchange_bars[2];

  kernels::pdlLaunchDependents();
  const int rank = static_cast<int>(clusterCtaRank());
  const int h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // --- Before the wait: nothing here is written by the previous kernel.
  const int kv_len = a.kv_lens[0];
  const int chunk = (kv_len + C - 1) / C;
  if (chunk > tile_keys)
    __trap(); // past max_kv_len: the host routes longer contexts elsewhere
  const int key_begin = min(kv_len, rank * chunk), key_end = min(kv_len, key_begin + chunk);
  const int newest = kv_len - 1; // from the projection, not the cache
  {
    // 16-byte chunks of the old keys' K and V rows: D / 8 a row.
    constexpr int kChunksPerRow = D * static_cast<int>(sizeof(T)) / 16;
    const int old_end = min(key_end, newest);
    for (int i = threadIdx.x; i < (old_end - key_begin) * kChunksPerRow; i += kThreads) {
      const int key = key_begin + i / kChunksPerRow, c = i % kChunksPerRow;
      const int page = __ldg(a.kv.page_table + key / a.kv.page_size);
      const long long offset = static_cast<long long>(page) * a.kv.page_stride +
                               static_cast<long long>(h) * a.kv.head_stride +
                               static_cast<long long>(key % a.kv.page_size) * a.kv.token_stride +
                               c * 8;
      const int local = (key - key_begin) * D + c * 8;
      kernels::cpAsync16(k_tile + local, static_cast<const T *>(a.kv.k) + offset);
      kernels::cpAsync16(v_tile + local, static_cast<const T *>(a.kv.v) + offset);
    }
    kernels::cpAsyncCommit();
  }
  for (int i = threadIdx.x; i < D; i += kThreads) {
    rope_cs[i] = i < 2 * a.rope_half ? a.rope_factors[i] : 0.0f;
    q_norm_w[i] = a.q_norm ? ld(a.q_norm, a.type, i) : 1.0f;
    k_norm_w[i] = a.k_norm ? ld(a.k_norm, a.type, i) : 1.0f;
  }
  const int slot = a.slot_mapping[0];

  // This warp's row pairs: pair p = warp, warp + kWarps, ... < R / 2.
  const int vecs = static_cast<int>(a.k / 8);
  const uint4 *x = static_cast<const uint4 *>(a.x);
  auto weightRow = [&](int pair, int e) {
    const int64_t row = qkvRow(rank * R + 2 * pair + e, h, G, D, a.heads, a.kv_heads);
    return static_cast<const uint4 *>(a.w) + row * vecs;
  };
  uint4 w0[kUnroll], w1[kUnroll];
  if (warp < Shape::kPairsPerCta) { // the first pair's first pass, before the wait
    const uint4 *r0 = weightRow(warp, 0), *r1 = weightRow(warp, 1);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (lane + 32 * u < vecs) {
        w0[u] = __ldcs(r0 + lane + 32 * u);
        w1[u] = __ldcs(r1 + lane + 32 * u);
      }
  }

  if constexpr (kPush) {
    if (threadIdx.x == 0) {
      mbarrierInit(&exchange_bars[0], 1);
      mbarrierInit(&exchange_bars[1], 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      mbarrierExpectTx(&exchange_bars[0], (G + 2) * D * 4);
      mbarrierExpectTx(&exchange_bars[1], C * (Shape::kOutputsPerCta + 2 * G) * 4);
    }
    clusterSyncRelaxed(); // the peers' barriers exist before anyone pushes
  }

  kernels::pdlWait();

  // --- The projection: a warp a row pair, K unsplit.
  for (int pair = warp; pair < Shape::kPairsPerCta; pair += kWarps) {
    const uint4 *r0 = weightRow(pair, 0), *r1 = weightRow(pair, 1);
    if (pair != warp) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (lane + 32 * u < vecs) {
          w0[u] = __ldcs(r0 + lane + 32 * u);
          w1[u] = __ldcs(r1 + lane + 32 * u);
        }
    }
    float acc0 = 0.0f, acc1 = 0.0f, squares = 0.0f;
    for (int v = lane; v < vecs; v += 32 * kUnroll) {
      uint4 xs[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        xs[u] = v + 32 * u < vecs ? __ldg(x + v + 32 * u) : uint4{};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (v + 32 * u < vecs) {
          gemv::addSquares<T>(xs[u], squares);
          gemv::Pack<T>::dot(acc0, w0[u], xs[u]);
          gemv::Pack<T>::dot(acc1, w1[u], xs[u]);
        }
      const int next = v + 32 * kUnroll;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (next + 32 * u < vecs) {
          w0[u] = __ldcs(r0 + next + 32 * u);
          w1[u] = __ldcs(r1 + next + 32 * u);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      acc0 += __shfl_xor_sync(0xffffffffu, acc0, o);
      acc1 += __shfl_xor_sync(0xffffffffu, acc1, o);
      squares += __shfl_xor_sync(0xffffffffu, squares, o);
    }
    // gemv::storePair's epilogue (every lane holds the sums): the norm's
    // scale, the bias, one rounding.
    if (a.norm) {
      const float inv_rms = 1.0f / sqrtf(squares / static_cast<float>(a.k) + a.norm_eps);
      acc0 *= inv_rms;
      acc1 *= inv_rms;
    }
    if (a.bias) {
      acc0 += ld(a.bias, a.bias_type, qkvRow(rank * R + 2 * pair, h, G, D, a.heads, a.kv_heads));
      acc1 +=
          ld(a.bias, a.bias_type, qkvRow(rank * R + 2 * pair + 1, h, G, D, a.heads, a.kv_heads));
    }
    if constexpr (kPush) {
      if (lane < C) // lane c pushes the pair into CTA c's head
        push2(&head[rank * R + 2 * pair], lane, &exchange_bars[0], rounded<T>(acc0),
              rounded<T>(acc1));
    } else if (lane == 0) {
      rows[2 * pair] = rounded<T>(acc0);
      rows[2 * pair + 1] = rounded<T>(acc1);
    }
  }

  if constexpr (kPush) {
    mbarrierWait(&exchange_bars[0], 0); // every row of the head has landed here
  } else {
    clusterSync(); // 1: every CTA's rows are in its shared memory
    for (int j = threadIdx.x; j < (G + 2) * D; j += kThreads)
      head[j] = loadCluster(clusterSharedAddress(&rows[j % R], static_cast<unsigned>(j / R)));
    __syncthreads();
  }
  // Query heads (0..G-1) and the key (G), a warp each in turn: q/k-norm and rotary in
  // registers, rounded to the storage type as the fold stores them.
  for (int hh = warp; hh <= G; hh += kWarps) {
    kernels::HeadInRegisters<D> x_head;
    x_head.load(head + hh * D, lane);
    const bool is_key = hh == G;
    if (is_key ? a.k_norm != nullptr : a.q_norm != nullptr) {
      const float *weight = is_key ? k_norm_w : q_norm_w;
      x_head.rmsNorm(
          a.qk_norm_eps, [&](int i) { return weight[i]; }, lane);
    }
    x_head.rotateWhole(
        [&](int i, float &c, float &s) {
          c = rope_cs[2 * i];
          s = rope_cs[2 * i + 1];
        },
        lane);
#pragma unroll
    for (int e = 0; e < kernels::HeadInRegisters<D>::kPerLane; ++e)
      x_head.x[e] = rounded<T>(x_head.x[e]);
    x_head.store(head + hh * D, lane);
  }
  kernels::cpAsyncWait<0>();
  __syncthreads();

  // --- Scores: a warp a key, lane l holding elements 4l..4l+3 of each head.
  const int keys = key_end - key_begin;
  float q[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      q[g][e] = head[g * D + 4 * lane + e];
  for (int i = warp; i < keys; i += kWarps) {
    float kv4[4];
    if (key_begin + i == newest) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        kv4[e] = head[G * D + 4 * lane + e];
    } else {
      const T *row = k_tile + i * D + 4 * lane;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        kv4[e] = toFloat(row[e]);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s = fmaf(q[g][e], kv4[e], s);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0)
        scores[g][i] = s * a.sm_scale_log2;
    }
  }
  __syncthreads();
  // The softmax state a head (a warp each in turn), base 2.
  for (int g = warp; g < G; g += kWarps) {
    float m = -INFINITY;
    for (int i = lane; i < keys; i += 32)
      m = fmaxf(m, scores[g][i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float l = 0.0f;
    for (int i = lane; i < keys; i += 32) {
      const float p = exp2f(scores[g][i] - m);
      scores[g][i] = p;
      l += p;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      l += __shfl_xor_sync(0xffffffffu, l, o);
    if constexpr (kPush) {
      if (lane < C) { // into CTA `lane`'s row for this CTA
        push(&recv_m[rank][g], lane, &exchange_bars[1], m);
        push(&recv_l[rank][g], lane, &exchange_bars[1], l);
      }
    } else if (lane == 0) {
      state_m[g] = m;
      state_l[g] = l;
    }
  }
  __syncthreads();
  // Unnormalized outputs: thread t sums P V for (head t / D, element t % D).
  for (int t = threadIdx.x; t < G * D; t += kThreads) {
    const int g = t / D, d = t % D;
    float acc = 0.0f;
    for (int i = 0; i < keys; ++i) {
      const float v = key_begin + i == newest ? head[(G + 1) * D + d] : toFloat(v_tile[i * D + d]);
      acc = fmaf(scores[g][i], v, acc);
    }
    if constexpr (kPush) // to the CTA that merges output t
      push(&recv_acc[rank][t % Shape::kOutputsPerCta], t / Shape::kOutputsPerCta, &exchange_bars[1],
           acc);
    else
      state_acc[t] = acc;
  }

  if constexpr (kPush)
    mbarrierWait(&exchange_bars[1], 0); // every CTA's state for this CTA's outputs
  else
    clusterSync(); // 2: every CTA's softmax state is in its shared memory

  // Each thread merges at most one output (kOutputsPerCta <= kThreads) and
  // stores it after barrier 3, so the store is not fenced by it.
  static_assert(Shape::kOutputsPerCta <= kThreads, "one output a thread");
  const int out_index = rank * Shape::kOutputsPerCta + threadIdx.x;
  float merged = 0.0f;
  if (threadIdx.x < Shape::kOutputsPerCta) {
    const int g = out_index / D;
    float m_c[C], l_c[C], acc_c[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if constexpr (kPush) {
        m_c[c] = recv_m[c][g];
        l_c[c] = recv_l[c][g];
        acc_c[c] = recv_acc[c][threadIdx.x];
      } else {
        m_c[c] = loadCluster(clusterSharedAddress(&state_m[g], c));
        l_c[c] = loadCluster(clusterSharedAddress(&state_l[g], c));
        acc_c[c] = loadCluster(clusterSharedAddress(&state_acc[out_index], c));
      }
    }
    float m = -INFINITY;
#pragma unroll
    for (int c = 0; c < C; ++c)
      m = fmaxf(m, m_c[c]);
    float l = 0.0f, acc = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float scale = m_c[c] == -INFINITY ? 0.0f : exp2f(m_c[c] - m);
      l = fmaf(l_c[c], scale, l);
      acc = fmaf(acc_c[c], scale, acc);
    }
    merged = acc / l; // l > 0: the newest key is in some CTA's chunk
  }

  if constexpr (!kPush)
    clusterSync(); // 3: the others have read this CTA's states

  if (threadIdx.x < Shape::kOutputsPerCta)
    static_cast<T *>(a.out)[static_cast<int64_t>(h) * G * D + out_index] =
        gemv::Pack<T>::fromFloat(merged);

  // The CTA whose chunk holds the newest key appends it and its value,
  // last: a cluster barrier's release fences global memory too
  // (MEMBAR.ALL.GPU in the SASS), so stores before one would hold every
  // CTA of the cluster until they land. The cache is read again only by
  // a later launch.
  if (slot >= 0 && key_begin <= newest && newest < key_end &&
      warp < 2) { // warp 0 the key, 1 the value
    const int page = slot / a.kv.page_size, offset = slot % a.kv.page_size;
    const long long base = static_cast<long long>(page) * a.kv.page_stride +
                           static_cast<long long>(h) * a.kv.head_stride +
                           static_cast<long long>(offset) * a.kv.token_stride;
    T *cache =
        static_cast<T *>(warp == 0 ? const_cast<void *>(a.kv.k) : const_cast<void *>(a.kv.v));
    for (int i = lane; i < D; i += 32)
      cache[base + i] = gemv::Pack<T>::fromFloat(head[(G + warp) * D + i]);
  }
}

template <typename T, int G, int C, bool kPush, int kWarps>
cudaError_t launchFor(const QkvAttentionArgs &a, cudaStream_t stream) {
  constexpr int D = 128;
  using Shape = QkvAttentionShape<T, D, G, C>;
  auto kernel = qkvAttentionKernel<T, D, G, C, kPush, kWarps>;
  const int smem = Shape::tileBytes(tileKeys(a.max_kv_len, C));
  static const cudaError_t configured = [&] {
    cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              Shape::tileBytes(Shape::kMaxKeys));
    if (status == cudaSuccess && C > 8)
      status = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return status;
  }();
  if (configured != cudaSuccess)
    return configured;
  const dim3 grid(C, static_cast<unsigned>(a.kv_heads), 1);
  return kernels::launchKernelInClusters(kernel, grid, dim3(kWarps * 32), smem, stream, a.pdl,
                                         static_cast<unsigned>(C), a);
}

template <typename T, int G, bool kPush, int kWarps>
cudaError_t launchSized(const QkvAttentionArgs &a, cudaStream_t stream) {
  return a.cluster == 8 ? launchFor<T, G, 8, kPush, kWarps>(a, stream)
                        : launchFor<T, G, 16, kPush, kWarps>(a, stream);
}

template <typename T, int G, bool kPush>
cudaError_t launchExchanging(const QkvAttentionArgs &a, cudaStream_t stream) {
  return a.warps == 8 ? launchSized<T, G, kPush, 8>(a, stream)
                      : launchSized<T, G, kPush, 16>(a, stream);
}

template <typename T, int G>
cudaError_t launchClustered(const QkvAttentionArgs &a, cudaStream_t stream) {
  return a.exchange == QkvAttentionExchange::kPush ? launchExchanging<T, G, true>(a, stream)
                                                   : launchExchanging<T, G, false>(a, stream);
}

template <typename T> cudaError_t launchTyped(const QkvAttentionArgs &a, cudaStream_t stream) {
  switch (a.heads / a.kv_heads) {
  case 2:
    return launchClustered<T, 2>(a, stream);
  case 4:
    return launchClustered<T, 4>(a, stream);
  case 8:
    return launchClustered<T, 8>(a, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

bool qkvAttentionSupports(const QkvAttentionArgs &a, std::string *why) {
  auto no = [&](const std::string &reason) {
    if (why)
      *why = reason;
    return false;
  };
  if (a.type != EType::kBF16 && a.type != EType::kF16)
    return no("a 16-bit element type");
  if (a.head_dim != 128)
    return no("head_dim 128 (got " + std::to_string(a.head_dim) + ")");
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    return no("query heads a multiple of the KV heads");
  const int group = a.heads / a.kv_heads;
  if (group != 2 && group != 4 && group != 8)
    return no("a GQA group of 2, 4 or 8 (got " + std::to_string(group) + ")");
  if (a.k <= 0 || a.k % 8 != 0 || !aligned16(a.x) || !aligned16(a.w))
    return no("k a multiple of 8 and 16-byte aligned x and w");
  if (a.rope_half != a.head_dim / 2 || a.rope_factors == nullptr)
    return no("rotary over the whole head");
  if (a.kv.page_table == nullptr || a.kv.page_size <= 0 || a.kv.token_stride % 8 != 0 ||
      a.kv.head_stride % 8 != 0 || a.kv.page_stride % 8 != 0 || !aligned16(a.kv.k) ||
      !aligned16(a.kv.v))
    return no("a paged cache of 16-byte aligned rows");
  if (a.kv_lens == nullptr || a.slot_mapping == nullptr || a.out == nullptr)
    return no("kv_lens, slot_mapping and out");
  if (a.max_kv_len < 1 || a.max_kv_len > kQkvAttentionMaxKvLen)
    return no("contexts of at most " + std::to_string(kQkvAttentionMaxKvLen) +
              " keys (max_kv_len " + std::to_string(a.max_kv_len) + ")");
  if (a.cluster != 8 && a.cluster != 16)
    return no("clusters of 8 or 16 CTAs (got " + std::to_string(a.cluster) + ")");
  if (a.warps != 8 && a.warps != 16)
    return no("CTAs of 8 or 16 warps (got " + std::to_string(a.warps) + ")");
  return true;
}

cudaError_t launchQkvAttention(const QkvAttentionArgs &a, cudaStream_t stream) {
  if (!qkvAttentionSupports(a))
    return cudaErrorInvalidValue;
  return a.type == EType::kBF16 ? launchTyped<__nv_bfloat16>(a, stream)
                                : launchTyped<__half>(a, stream);
}

} // namespace txc::cuda
