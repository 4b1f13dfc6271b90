//===- pdl_release_probe.cu - When griddepcontrol.wait releases, and why --===//
//
// A diagnostic for the decode attention's b1 L4096 chain (bench/RUNLOG.md,
// runs 242-243): traced, its wait released 2.7 us after the launch before
// had exited, 0.7 us with half its early K/V loads held back. Is that the
// waiting thread's own loads in flight (a per-thread cost: a thread that
// issued none would pass sooner), or the grid-wide flush queued behind the
// memory traffic (no thread passes sooner)? And after the wait, does an L2
// load (the query) come back quickly while the SM's loads are in flight?
//
// A primary grid stands in for the launch before: 256 CTAs at two an SM, of
// which 8 (the "mergers") stay 2.5 us longer and write the query's line. A
// dependent grid (programmatic stream serialization) of 256 CTAs, which can
// start only as the primary's CTAs exit, loads 64 KB of cold K/V a CTA
// before its wait, as the attention does, in one of these ways:
//   none       no early loads (the release latency alone)
//   all        every thread's cp.async, then every thread waits (main's form)
//   warps1-3   warps 1-3 issue all of the cp.async; warp 0 issues none
//   bulk       one thread of warp 1 issues cp.async.bulk (TMA) copies
// Warp 0's lane 0 waits, then loads the query's line (ld.global.cg) and
// stamps when it returns; warp 1's lane 0 stamps its own release and when
// its copies landed. Times are globaltimer ns after the primary's last
// exit, medians over iterations of the latest over CTAs.
//
// Usage: pdl_release_probe [iterations]
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "attention/pdl_launch.h"
#include "attention/sm90_pipeline.cuh"

#include "cuda_check.h"

using namespace txc::kernels;

namespace {

constexpr int kCtas = 256;                 // the attention's grid at b1 (32 splits x 8 KV heads)
constexpr int kThreads = 128;              // its 4-warp CTA
constexpr int kSmemBytes = 104 * 1024;     // two CTAs an SM, as its three K/V stages
constexpr int kEarlyBytes = 64 * 1024;     // a CTA's K/V loaded before the wait (128 keys, d128)
constexpr long long kPrimaryNs = 20000;    // the launch before's body
constexpr long long kMergerExtraNs = 2500; // its merging CTAs' tail
constexpr int kMergerEvery = 32;           // one merger a KV head

enum Mode { kNone, kAll, kWarps123, kBulk, kModes };
const char *const kModeNames[kModes] = {"none", "all", "warps1-3", "bulk"};

// Per-iteration record, globaltimer ns (max over CTAs unless said).
enum Slot {
  kPrimaryNonMergerExit, // latest exit of a primary CTA that is not a merger
  kPrimaryExit,          // latest exit of any primary CTA
  kFirstStart,           // earliest dependent CTA start (stored as ~t, max)
  kLastStart,
  kWarp0Release,
  kWarp1Release,
  kQueryLanded,
  kDataLanded,
  kDependentExit,
  kSlots
};

__global__ void primaryKernel(unsigned *query, unsigned long long *rec, unsigned tag) {
  pdlLaunchDependents();
  if (threadIdx.x != 0)
    return;
  const bool merger = blockIdx.x % kMergerEvery == kMergerEvery - 1;
  const unsigned long long until = globalTimerNs() + kPrimaryNs + (merger ? kMergerExtraNs : 0);
  while (globalTimerNs() < until) {
  }
  if (merger)
    query[(blockIdx.x / kMergerEvery) * 32] = tag;
  const unsigned long long t = globalTimerNs();
  atomicMax(rec + kPrimaryExit, t);
  if (!merger)
    atomicMax(rec + kPrimaryNonMergerExit, t);
}

__global__ void dependentKernel(const unsigned char *kv, const unsigned *query,
                                unsigned long long *rec, int mode) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (tid == 0) {
    const unsigned long long t = globalTimerNs();
    atomicMax(rec + kFirstStart, ~t);
    atomicMax(rec + kLastStart, t);
  }
  if (mode == kBulk && tid == 0) {
    mbarrierInit(&bar, 1);
    mbarrierInitFence();
  }
  __syncthreads(); // the copies' barrier is initialized before anyone uses it
  const unsigned char *src = kv + (size_t)blockIdx.x * kEarlyBytes;
  constexpr int kChunks = kEarlyBytes / 16;
  const bool loads = mode == kAll || (mode == kWarps123 && warp > 0);
  if (loads) {
    const int first = mode == kAll ? tid : tid - 32, step = mode == kAll ? kThreads : kThreads - 32;
    for (int c = first; c < kChunks; c += step)
      cpAsync16(smem + 16 * c, src + 16 * c);
    cpAsyncCommit();
  }
  if (mode == kBulk && tid == 32) {
    mbarrierArriveExpectTx(&bar, kEarlyBytes);
    constexpr int kPiece = 4096;
    const unsigned long long policy = l2EvictFirstPolicy(); // read once
    for (int off = 0; off < kEarlyBytes; off += kPiece)
      bulkLoad(smem + off, src + off, kPiece, &bar, policy);
  }
  pdlWait();
  if (lane == 0 && warp == 0) {
    atomicMax(rec + kWarp0Release, globalTimerNs());
    // A branch on the loaded value holds the stamp until the load is back
    // (the primary writes tags from 1 up). In the build device run 273
    // measured, the value fed only an asm operand its text did not read and
    // ptxas dropped the load: that run's "query" column is no load's time.
    const unsigned v = __ldcg(query + (blockIdx.x / kMergerEvery) * 32);
    if (v == ~0u)
      __trap();
    atomicMax(rec + kQueryLanded, globalTimerNs());
  }
  // Warp 1's lane 0 stamps when its copies (or the bulk copies) landed;
  // every thread waits for them before the CTA leaves (a CTA may not exit
  // under a copy into its shared memory).
  if (lane == 0 && warp == 1)
    atomicMax(rec + kWarp1Release, globalTimerNs());
  if (loads)
    cpAsyncWaitAll();
  if (mode == kBulk)
    mbarrierWait(&bar, 0);
  if (lane == 0 && warp == 1)
    atomicMax(rec + kDataLanded, globalTimerNs());
  __syncthreads();
  if (tid == 0)
    atomicMax(rec + kDependentExit, globalTimerNs());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 60;
  constexpr int kWarmup = 5;
  cudaDeviceProp prop{};
  BENCH_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("pdl_release_probe on %s (%d SMs): %d CTAs x %d threads, %d KB early a CTA, "
              "primary %lld ns (+%lld for every %dth CTA)\n",
              prop.name, prop.multiProcessorCount, kCtas, kThreads, kEarlyBytes / 1024, kPrimaryNs,
              kMergerExtraNs, kMergerEvery);
  // Cold K/V: each iteration reads its own 16 MB of a buffer several times
  // the L2.
  constexpr size_t kRegion = (size_t)kCtas * kEarlyBytes;
  constexpr int kRegions = 32;
  unsigned char *kv = nullptr;
  unsigned *query = nullptr;
  unsigned long long *rec = nullptr;
  BENCH_CHECK_CUDA(cudaMalloc(&kv, kRegion * kRegions));
  BENCH_CHECK_CUDA(cudaMemset(kv, 1, kRegion * kRegions));
  BENCH_CHECK_CUDA(cudaMalloc(&query, 32 * sizeof(unsigned) * (kCtas / kMergerEvery)));
  const int records = kModes * (iterations + kWarmup);
  BENCH_CHECK_CUDA(cudaMalloc(&rec, sizeof(unsigned long long) * kSlots * records));
  BENCH_CHECK_CUDA(cudaMemset(rec, 0, sizeof(unsigned long long) * kSlots * records));
  BENCH_CHECK_CUDA(
      cudaFuncSetAttribute(primaryKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  BENCH_CHECK_CUDA(cudaFuncSetAttribute(dependentKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSmemBytes));
  cudaStream_t stream;
  BENCH_CHECK_CUDA(cudaStreamCreate(&stream));

  int record = 0;
  for (int i = 0; i < iterations + kWarmup; ++i) {
    for (int mode = 0; mode < kModes; ++mode, ++record) {
      unsigned long long *r = rec + (size_t)kSlots * record;
      primaryKernel<<<kCtas, kThreads, kSmemBytes, stream>>>(query, r, (unsigned)record + 1);
      BENCH_CHECK_CUDA(cudaGetLastError());
      const unsigned char *region = kv + kRegion * (record % kRegions);
      BENCH_CHECK_CUDA(launchKernel(dependentKernel, dim3(kCtas), dim3(kThreads), kSmemBytes, stream, /*pdl=*/true,
                                    region, (const unsigned *)query, r, mode));
    }
  }
  BENCH_CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<unsigned long long> host((size_t)kSlots * records);
  BENCH_CHECK_CUDA(cudaMemcpy(host.data(), rec, host.size() * sizeof(unsigned long long),
                   cudaMemcpyDeviceToHost));

  std::printf(
      "%-9s %9s %9s %9s %9s %9s %9s %9s %9s  (ns after the primary's last exit; medians of %d)\n",
      "mode", "nm-exit", "1st-start", "lst-start", "w0-rel", "w1-rel", "query", "data", "exit",
      iterations);
  for (int mode = 0; mode < kModes; ++mode) {
    std::vector<double> col[kSlots];
    for (int i = kWarmup; i < iterations + kWarmup; ++i) {
      const unsigned long long *r = host.data() + (size_t)kSlots * (i * kModes + mode);
      const double e = (double)r[kPrimaryExit];
      auto rel = [&](unsigned long long t) { return t == 0 ? 0.0 : (double)t - e; };
      col[kPrimaryNonMergerExit].push_back(rel(r[kPrimaryNonMergerExit]));
      col[kFirstStart].push_back(rel(~r[kFirstStart]));
      for (int s = kLastStart; s < kSlots; ++s)
        col[s].push_back(rel(r[s]));
    }
    std::printf("%-9s %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f\n", kModeNames[mode],
                median(col[kPrimaryNonMergerExit]), median(col[kFirstStart]),
                median(col[kLastStart]), median(col[kWarp0Release]), median(col[kWarp1Release]),
                median(col[kQueryLanded]), median(col[kDataLanded]), median(col[kDependentExit]));
  }
  return 0;
}
