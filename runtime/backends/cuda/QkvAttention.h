//===- QkvAttention.h - A decode layer's QKV projection and attention, one launch -*- C++ -*-===//
//
// At batch 1 a decode layer's QKV GEMV and its attention are two kernels
// whose boundary is a grid-wide dependency: the attention waits (PDL) for
// the GEMV's last block, 0.6-1.65 us after it (device run 190's trace), and
// then reloads the QKV rows from L2. Yet a KV head's attention needs only
// its own rows: its group's query heads, its key and its value ((G + 2) *
// head_dim rows of W). Here one thread-block cluster per KV head computes
// those rows (each CTA a slice, weights in registers before the PDL wait,
// as the GEMV does), meets at a cluster barrier, gathers the head's rows
// through distributed shared memory, applies q/k-norm and rotary, appends
// the new key and value to the paged cache, and runs the attention over
// the context cut across the cluster's CTAs (their keys copied into shared
// memory before the wait), merging the CTAs' softmax states through
// distributed shared memory. The dependency between the projection and
// the attention stays inside a GPC.
//
// Not used by the executor: as built it lost (device run 203, H100: it adds
// 10.9 us a Qwen3 layer over the QKV GEMV at 129 keys, where the attention
// apart adds ~7). It stays for the variants bench/README.md run 203 lists
// (smaller clusters, mbarrier exchanges instead of cluster barriers), to go
// if they lose too. QkvAttentionTest checks it against an fp64 reference;
// bench/decode_ops_bench.cu --steps times it in each model's step.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_QKVATTENTION_H
#define TXC_RUNTIME_BACKENDS_CUDA_QKVATTENTION_H

#include "attention/params.h"
#include "runtime/backends/cuda/CudaKernels.h"

#include <cstdint>
#include <cuda_runtime.h>
#include <string>

namespace txc::cuda {

/// The longest context the kernel serves (its keys cut over the cluster's
/// CTAs, each holding its share in shared memory).
constexpr int kQkvAttentionMaxKvLen = 1024;

/// How a cluster's CTAs exchange the head's rows and their softmax states.
enum class QkvAttentionExchange {
  /// Each CTA writes its own shared memory, a cluster barrier, the others
  /// read it (three barriers a launch, each release a MEMBAR.ALL.GPU).
  kClusterBarriers,
  /// Each CTA stores into the others' shared memory (st.async), counted on
  /// their mbarriers, which they wait on (one relaxed barrier, before the
  /// PDL wait, so the barriers exist first).
  kPush,
};

struct QkvAttentionArgs {
  const void *x = nullptr;    // [k]: the layer's input (RMSNorm's, its weight folded into w)
  const void *w = nullptr;    // [(heads + 2 kv_heads) * head_dim, k]: q heads, k heads, v heads
  const void *bias = nullptr; // [(heads + 2 kv_heads) * head_dim] or null
  EType bias_type = EType::kF32;
  EType type = EType::kBF16; // x, w, the cache, out and the q/k norms' weights
  int64_t k = 0;
  /// The fused input RMSNorm (GemvArgs::norm with the weight folded):
  /// inv_rms(x) scales the finished dot products.
  bool norm = true;
  float norm_eps = 0.0f;
  int heads = 0, kv_heads = 0, head_dim = 0;
  const void *q_norm = nullptr; // [head_dim] or null (Qwen3's q_norm)
  const void *k_norm = nullptr;
  float qk_norm_eps = 0.0f;
  /// The token's rotary factors, rope_half (cos, sin) pairs (the step's
  /// StepRopeFactors row, attention scaling included).
  const float *rope_factors = nullptr;
  int rope_half = 0;
  /// The paged cache (the element type `type`); the new token's key and
  /// value go to slot slot_mapping[0] (page * page_size + offset; none when
  /// negative), the context is kv_lens[0] keys with the new one last.
  kernels::KVCacheView kv;
  const int *kv_lens = nullptr;
  const int *slot_mapping = nullptr;
  /// The longest context this launch may see (at most kQkvAttentionMaxKvLen):
  /// it sizes the CTAs' shared memory for keys, so a short context leaves
  /// the SM's L1 to the GEMVs beside it.
  int max_kv_len = kQkvAttentionMaxKvLen;
  /// CTAs a KV head: 16 (the non-portable cluster size the H100/H200
  /// schedule) or 8 (portable; each CTA twice the rows and keys).
  int cluster = 16;
  QkvAttentionExchange exchange = QkvAttentionExchange::kClusterBarriers;
  /// Warps a CTA: 16 (a row pair a warp at Qwen3's shape), or 8 (a CTA of
  /// ~23K registers instead of ~46K, which fits beside the down GEMV's
  /// blocks still resident: run 203's suspect (1)).
  int warps = 16;
  float sm_scale_log2 = 0.0f; // softmax scale times log2(e)
  void *out = nullptr;        // [heads * head_dim]
  bool pdl = false;
};

/// Whether launchQkvAttention takes these arguments; where not, `why`
/// says which limit (the caller keeps the two-kernel path).
bool qkvAttentionSupports(const QkvAttentionArgs &args, std::string *why = nullptr);

/// One sequence (batch 1): grid `cluster` x kv_heads CTAs in clusters of
/// `cluster`. kv_lens[0] must not exceed max_kv_len
/// (read on the device, where a longer context traps: the caller routes
/// longer contexts elsewhere).
cudaError_t launchQkvAttention(const QkvAttentionArgs &args, cudaStream_t stream);

} // namespace txc::cuda

#endif
