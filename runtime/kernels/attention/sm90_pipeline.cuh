//===- sm90_pipeline.cuh - Hopper synchronization for warp-specialized kernels -===//
//
// sm_90a only. The pieces a producer/consumer kernel is built from:
// mbarriers in shared memory (a phase completes when the expected number of
// arrivals has happened; waiters name the phase by its parity), cp.async
// arrivals that fire when the issuing thread's copies have landed, named
// barriers for subsets of the CTA (ids 1..15; 0 is __syncthreads), and
// setmaxnreg, which moves registers from the producer warpgroup to the
// consumer warpgroups.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/device_utils.cuh"

namespace txc::kernels {

__device__ __forceinline__ void mbarrierInit(unsigned long long *bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemAddress(bar)), "r"(arrivals) : "memory");
}

/// Makes initialized mbarriers visible before any thread uses them.
__device__ __forceinline__ void mbarrierInitFence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

__device__ __forceinline__ void mbarrierArrive(unsigned long long *bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smemAddress(bar))
               : "memory");
}

/// Blocks until the phase with parity `parity` of `bar` has completed. A
/// freshly initialized barrier counts the phase before its first as complete,
/// so waiting for parity 1 on it returns at once (how producers start).
__device__ __forceinline__ void mbarrierWait(unsigned long long *bar, unsigned parity) {
  const unsigned addr = smemAddress(bar);
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(addr), "r"(parity)
                 : "memory");
  } while (!done);
}

/// One arrival on `bar` once every cp.async this thread issued so far has
/// landed. `.noinc`: the arrival counts toward the barrier's expected count.
__device__ __forceinline__ void cpAsyncMbarrierArrive(unsigned long long *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smemAddress(bar)) : "memory");
}

__device__ __forceinline__ void cpAsyncWaitAll() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/// One arrival on `bar` that also expects `bytes` more of asynchronous
/// (TMA) transactions before its phase completes.
__device__ __forceinline__ void mbarrierArriveExpectTx(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemAddress(bar)), "r"(bytes)
               : "memory");
}

/// A contiguous global -> shared copy by the TMA unit (no tensor map), under
/// an L2 policy: `bytes` a multiple of 16, both addresses 16-byte aligned;
/// its bytes count as transactions on `bar` (mbarrierArriveExpectTx). One
/// instruction moves a whole row, where cp.async takes a thread slot a 16
/// bytes and stalls its issue when the SM's slots are full.
__device__ __forceinline__ void bulkLoad(void *dst, const void *src, unsigned bytes, unsigned long long *bar,
                                         unsigned long long l2_policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, "
               "[%3], %4;\n" ::"r"(smemAddress(dst)),
               "l"(src), "r"(bytes), "r"(smemAddress(bar)), "l"(l2_policy)
               : "memory");
}

/// Brings a TMA descriptor (a __grid_constant__ kernel parameter) into the
/// descriptor cache ahead of its first use.
__device__ __forceinline__ void tmaPrefetchDescriptor(const void *desc) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(desc)) : "memory");
}

/// TMA: asks the L2 for the box of a rank-4 tensor at (x, y, z, w),
/// innermost first; nothing lands in shared memory and nothing waits for it.
__device__ __forceinline__ void tmaPrefetchL2_4d(const void *desc, int x, int y, int z, int w) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(desc)),
               "r"(x), "r"(y), "r"(z), "r"(w)
               : "memory");
}

/// TMA: the box of a rank-4 tensor at coordinates (x, y, z, w), innermost
/// first, copied to shared memory at `dst` (laid out and swizzled as the
/// descriptor says); its bytes count as transactions on `bar`, also where
/// the box lies past the tensor, whose elements read as zeros.
__device__ __forceinline__ void tmaLoad4d(void *dst, const void *desc, int x, int y, int z, int w,
                                          unsigned long long *bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
               "%5}], [%6];\n" ::"r"(smemAddress(dst)),
               "l"(reinterpret_cast<unsigned long long>(desc)), "r"(x), "r"(y), "r"(z), "r"(w), "r"(smemAddress(bar))
               : "memory");
}

/// TMA store: the box at (x, y, z, w) of a rank-4 tensor from shared memory
/// at `src` (laid out as the descriptor says), in this thread's current bulk
/// group; shared-memory writes before it need fenceProxyAsyncShared. Parts
/// of the box past the tensor are not written.
__device__ __forceinline__ void tmaStore4d(const void *desc, const void *src, int x, int y, int z, int w) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(desc)),
               "r"(smemAddress(src)), "r"(x), "r"(y), "r"(z), "r"(w)
               : "memory");
}
__device__ __forceinline__ void bulkCommit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/// This thread's bulk groups have read their shared-memory sources.
__device__ __forceinline__ void bulkWaitRead() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
/// This thread's bulk groups are complete (their global writes done).
__device__ __forceinline__ void bulkWaitAll() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void namedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void namedBarrierArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Every warp of the warpgroup must execute these.
template <int kRegisters> __device__ __forceinline__ void warpgroupRegistersDown() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters> __device__ __forceinline__ void warpgroupRegistersUp() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

/// 2^x on the SFU (ex2.approx.ftz): -inf gives +0, which the masks rely on.
__device__ __forceinline__ float exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <int kN> __device__ __forceinline__ void pinRegisters(unsigned (&r)[kN][4]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+r"(r[i][e])::"memory");
}

} // namespace txc::kernels
