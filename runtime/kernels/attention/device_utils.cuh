//===- device_utils.cuh - Small device helpers shared by the kernels ------===//
//
// Element-type conversions, inline PTX for the Ampere/Hopper instructions the
// kernels use (cp.async, ldmatrix, mma.sync), and KV-cache addressing. Only
// CUDA's own fp16/bf16 headers are included so that NVRTC can compile it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/params.h"

// NVRTC compiles without the C math headers that define INFINITY.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

namespace txc::kernels {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__host__ __device__ constexpr int ceilDiv(int a, int b) { return (a + b - 1) / b; }

/// Programmatic dependent launch (sm_90): waits until every predecessor grid
/// has finished and its writes are visible. A no-op in a kernel launched
/// without cudaLaunchAttributeProgrammaticStreamSerialization.
__device__ __forceinline__ void pdlWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/// Lets the next kernel in the stream start launching its blocks (they wait
/// in pdlWait until this grid is done). A no-op without the attribute.
__device__ __forceinline__ void pdlLaunchDependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/// Step tracing, a diagnostic (DecodeParams::maybe_trace, GemvArgs::trace):
/// a launch's kTraceSlotsPerLaunch slots take globaltimer stamps in
/// nanoseconds: [0] when the grid's first block started, [1] when its last
/// block started, [2] when its first block passed pdlWait and [3] when its
/// last block finished. The first and last blocks by index stand in for the
/// first and last to start (blocks are dispatched in index order), so only
/// the exit takes an atomic, one reduction a block. Kernels with few blocks
/// (the decode attention) also stamp the latest over their blocks of the
/// start [4], the wait release [5] and four points of their own [6]-[9]
/// (traceLatest: an atomic a block each, which a GEMV's thousands of
/// blocks would queue at one address). The decode attention's block 0 also
/// stamps its SM clock (clock64) at kTraceBlock0Points points of its own
/// [10]-[18] (traceBlock0Clock): the phases after its wait are a few hundred
/// cycles each, finer than the latest-over-blocks points resolve. The CTA
/// that merges the splits of sequence 0's KV head 0 stamps its SM clock at
/// kTraceMergerPoints points [19]-[22] (traceMergerClock): the serial tail
/// of a split launch (device runs 254-257).
/// Slots start at zero (not stamped). A null pointer costs one test a block.
enum TraceSlot {
  kTraceFirstEntry = 0,
  kTraceLastEntry = 1,
  kTraceWaitRelease = 2,
  kTraceLastExit = 3,
  kTraceLatestEntry = 4,
  kTraceLatestWaitRelease = 5,
  kTraceLatestMarkA = 6,
  kTraceLatestMarkB = 7,
  kTraceLatestMarkC = 8,
  kTraceLatestMarkD = 9,
  kTraceBlock0Clock = 10,
  kTraceBlock0Points = 9,
  kTraceMergerClock = kTraceBlock0Clock + kTraceBlock0Points,
  kTraceMergerPoints = 4,
  kTraceSlotsPerLaunch = kTraceMergerClock + kTraceMergerPoints,
};

/// The points of traceBlock0Clock, in the order the decode attention passes
/// them.
enum TraceBlock0Point {
  kBlock0WaitRelease = 0, // past pdlWait
  kBlock0FoldLoaded = 1,    // the folded rope's global loads in shared memory
  kBlock0FoldHeadsDone = 2, // warp 0's head normalized, rotated and stored
  kBlock0QueryReady = 3,    // the fold done, every warp past its barrier (mark A)
  kBlock0FirstTile = 4,     // thread 0's copies of the first tile landed (before the barrier)
  kBlock0TilesComputed = 5,
  kBlock0TilesDone = 6,     // every copy waited for (mark B)
  kBlock0StatesStored = 7,  // the per-warp softmax states in shared memory
  kBlock0Exit = 8,          // the epilogue done
};

/// The points of traceMergerClock: the merger knows it merges, its loads
/// issued, landed (thread 0's copies waited for, after the weights: the
/// staged merge computes them while the copies land, since device run 270;
/// the whole CTA before that) and merged (the output stored, the whole CTA).
enum TraceMergerPoint {
  kMergerKnows = 0,
  kMergerIssued = 1,
  kMergerLanded = 2,
  kMergerMerged = 3,
};

__device__ __forceinline__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned linearBlockIndex() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

__device__ __forceinline__ void traceEntry(unsigned long long *trace) {
  if (trace == nullptr || threadIdx.x != 0)
    return;
  const unsigned block = linearBlockIndex();
  if (block == 0)
    trace[kTraceFirstEntry] = globalTimerNs();
  if (block == gridDim.x * gridDim.y * gridDim.z - 1)
    trace[kTraceLastEntry] = globalTimerNs();
}

__device__ __forceinline__ void traceWaitRelease(unsigned long long *trace) {
  if (trace != nullptr && threadIdx.x == 0 && linearBlockIndex() == 0)
    trace[kTraceWaitRelease] = globalTimerNs();
}

/// The latest over the grid's blocks of the point where thread 0 calls it
/// (slot kTraceLatest*).
__device__ __forceinline__ void traceLatest(unsigned long long *trace, TraceSlot slot) {
  if (trace != nullptr && threadIdx.x == 0)
    atomicMax(trace + slot, globalTimerNs());
}

/// Block 0's thread 0 records its SM clock at `point` (TraceBlock0Point).
/// Everything it tests comes from special registers and the parameter bank,
/// so a traced kernel keeps no register live for it between points.
__device__ __forceinline__ void traceBlock0Clock(unsigned long long *trace, int point) {
  if (trace != nullptr && threadIdx.x == 0 && linearBlockIndex() == 0)
    trace[kTraceBlock0Clock + point] = clock64();
}

/// The merging CTA of (sequence 0, KV head 0)'s thread 0 records its SM
/// clock at `point` (TraceMergerPoint).
__device__ __forceinline__ void traceMergerClock(unsigned long long *trace, int seq, int kv_head,
                                                 int point) {
  if (trace != nullptr && threadIdx.x == 0 && seq == 0 && kv_head == 0)
    trace[kTraceMergerClock + point] = clock64();
}

/// After the block's last store: the caller's whole block reaches it (a
/// barrier when tracing; `trace` is the same for every thread).
__device__ __forceinline__ void traceExit(unsigned long long *trace) {
  if (trace == nullptr)
    return;
  __syncthreads();
  if (threadIdx.x == 0)
    atomicMax(trace + kTraceLastExit, globalTimerNs());
}

/// Conversions between a 16-bit storage type and fp32 pairs.
template <typename T> struct ElementOps;

template <> struct ElementOps<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  static constexpr bool kIsBf16 = true;
  __device__ static float2 toFloat2(unsigned bits) {
    Pair p = *reinterpret_cast<Pair *>(&bits);
    return __bfloat1622float2(p);
  }
  __device__ static unsigned fromFloat2(float a, float b) {
    Pair p = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<unsigned *>(&p);
  }
  __device__ static __nv_bfloat16 fromFloat(float a) { return __float2bfloat16_rn(a); }
};

template <> struct ElementOps<__half> {
  using Pair = __half2;
  static constexpr bool kIsBf16 = false;
  __device__ static float2 toFloat2(unsigned bits) {
    Pair p = *reinterpret_cast<Pair *>(&bits);
    return __half22float2(p);
  }
  __device__ static unsigned fromFloat2(float a, float b) {
    Pair p = __floats2half2_rn(a, b);
    return *reinterpret_cast<unsigned *>(&p);
  }
  __device__ static __half fromFloat(float a) { return __float2half_rn(a); }
};

/// Element offset of (sequence, token) in the K/V cache, without the head term.
template <int kPageSize>
__device__ __forceinline__ long long kvRowOffset(const KVCacheView &kv, int seq, int token) {
  if (kv.page_table == nullptr)
    return (long long)(kv.maybe_cu_seqlens_k[seq] + token) * kv.token_stride;
  int page_index, in_page;
  if constexpr (kPageSize > 0) {
    page_index = token / kPageSize;
    in_page = token % kPageSize;
  } else {
    page_index = token >> kv.page_size_log2;
    in_page = token & (kv.page_size - 1);
  }
  int page = __ldg(kv.page_table + seq * kv.page_table_stride + page_index);
  return (long long)page * kv.page_stride + (long long)in_page * kv.token_stride;
}

/// The page that holds `token` of a paged sequence, looked up before the
/// kernel knows the sequence's length: tokens past the table's row read its
/// last entry, and the caller uses only the pages of tokens that exist.
template <int kPageSize>
__device__ __forceinline__ int kvPageAhead(const KVCacheView &kv, int seq, int token) {
  const int page_index = kPageSize > 0 ? token / kPageSize : token >> kv.page_size_log2;
  return __ldg(kv.page_table + seq * kv.page_table_stride +
               min(page_index, static_cast<int>(kv.page_table_stride) - 1));
}

/// kvRowOffset for a token whose page kvPageAhead found.
template <int kPageSize>
__device__ __forceinline__ long long kvRowOffsetInPage(const KVCacheView &kv, int page, int token) {
  const int in_page = kPageSize > 0 ? token % kPageSize : token & (kv.page_size - 1);
  return (long long)page * kv.page_stride + (long long)in_page * kv.token_stride;
}

__device__ __forceinline__ uint4 loadGlobal16(const void *ptr) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(ptr));
  return r;
}

__device__ __forceinline__ unsigned smemAddress(const void *ptr) {
  return static_cast<unsigned>(__cvta_generic_to_shared(ptr));
}

/// 16-byte async copy; when `valid` is false the destination is zero-filled,
/// so rows past the end of a sequence hold zeros, never stale data.
__device__ __forceinline__ void cpAsync16(void *smem, const void *gmem, bool valid) {
  int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smemAddress(smem)), "l"(gmem),
               "r"(src_bytes));
}
/// 16-byte async copy of a chunk known to be in range.
__device__ __forceinline__ void cpAsync16(void *smem, const void *gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smemAddress(smem)), "l"(gmem));
}
/// atomicAdd with acquire-release semantics at GPU scope: the writes before
/// it (the CTA's, behind a barrier) are visible to whoever acquires the
/// count, and what others released before their adds is visible after it.
__device__ __forceinline__ unsigned atomicAddAcqRelGpu(unsigned *address, unsigned value) {
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(address), "r"(value) : "memory");
  return old;
}
/// A release add at GPU scope (no result): after a barrier, it publishes
/// the writes of every thread behind the barrier to an acquiring reader.
__device__ __forceinline__ void redAddReleaseGpu(unsigned *address, unsigned value) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
}
/// An acquire load at GPU scope: what was released before the value it
/// reads is visible after it (to the other threads behind a barrier too).
__device__ __forceinline__ unsigned loadAcquireGpu(const unsigned *address) {
  unsigned value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}
/// An L2 policy whose lines go first: for data read once a step (weights).
__device__ __forceinline__ unsigned long long l2EvictFirstPolicy() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;"); }
template <int kPending> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

/// Thread-block clusters (sm_90). clusterSync: every thread of every CTA of
/// the cluster arrives (release) and waits (acquire), so shared-memory
/// writes before it are visible to other CTAs' loads after it.
__device__ __forceinline__ unsigned clusterCtaRank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void clusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/// The address of `local` (this CTA's shared memory) in CTA `rank`'s.
__device__ __forceinline__ unsigned clusterSharedAddress(const void *local, unsigned rank) {
  unsigned address;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(address) : "r"(smemAddress(local)), "r"(rank));
  return address;
}
__device__ __forceinline__ float loadCluster(unsigned address) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(address) : "memory");
  return v;
}
__device__ __forceinline__ float4 loadCluster4(unsigned address) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(address)
               : "memory");
  return v;
}

__device__ __forceinline__ void ldmatrixX4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrixX4Trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// Four 8x8 b16 matrices to shared memory; lane l gives the address of row
/// l % 8 of matrix l / 8, and register i holds (row lane / 4, columns
/// 2 (lane % 4) and + 1) of matrix i: an mma accumulator's layout.
__device__ __forceinline__ void stmatrixX4(unsigned addr, const unsigned (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

/// The 8x8 b16 matrix whose fragment this warp holds (lane l: row l / 4,
/// columns 2 (l % 4) and + 1, an mma accumulator's layout), transposed, in
/// the same layout: an accumulator's rows become a B operand's columns.
__device__ __forceinline__ unsigned movmatrixTrans(unsigned x) {
  unsigned y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

/// D = A(16x16) * B(16x8) + D, fp32 accumulation.
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (ElementOps<T>::kIsBf16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ float fastExp2(float x) { return exp2f(x); }

/// One online-softmax step of a row (base-2 logits): its running maximum
/// becomes `block_max` (this block's keys included) and its sum is rescaled
/// to it; returns the factor its output accumulators take. `safe_max` is
/// what to subtract from the block's logits: 0 for a row that has seen only
/// masked keys (maximum -inf), whose p are then 0.
__device__ __forceinline__ float onlineSoftmaxStep(float &row_max, float &row_sum, float block_max,
                                                   float &safe_max) {
  safe_max = block_max == -INFINITY ? 0.f : block_max;
  const float rescale = exp2f(row_max - safe_max);
  row_max = block_max;
  row_sum *= rescale;
  return rescale;
}

} // namespace txc::kernels
