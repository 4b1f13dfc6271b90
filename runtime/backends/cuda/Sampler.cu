//===- Sampler.cu - Next-token sampling on the GPU -------------------------===//
#include "runtime/backends/cuda/Sampler.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

namespace txc::cuda {

namespace {

constexpr int kThreads = 1024;

/// Keys that sort ascending as (row, logit descending).
__global__ void buildKeys(const float *logits, int32_t vocab, uint64_t *keys, int32_t *ids) {
  const int64_t row = blockIdx.x;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    uint32_t bits = __float_as_uint(logits[row * vocab + i]);
    uint32_t ascending = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
    keys[row * vocab + i] = (static_cast<uint64_t>(row) << 32) | ~ascending;
    ids[row * vocab + i] = i;
  }
}

struct SumDouble {
  __device__ double operator()(double a, double b) const { return a + b; }
};

/// One block per row: sampleToken's draw over the row's sorted ids.
__global__ void __launch_bounds__(kThreads)
    drawKernel(const float *logits, int32_t vocab, const int32_t *sorted,
               const engine::RowSampling *sampling, int32_t *tokens) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  using Scan = cub::BlockScan<double, kThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } temp;
  __shared__ double shared_total;
  __shared__ int32_t found;
  const int64_t row = blockIdx.x;
  const float *values = logits + row * vocab;
  const int32_t *order = sorted + row * vocab;
  const engine::RowSampling s = sampling[row];

  bool nan = false;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x)
    nan = nan || isnan(values[i]);
  nan = __syncthreads_or(nan);
  const float best = values[order[0]];
  if (nan || best == -INFINITY) { // NaN keys sort anywhere: test the row itself
    if (threadIdx.x == 0)
      tokens[row] = -1;
    return;
  }
  if (s.temperature <= 0.0f || s.top_k == 1) {
    if (threadIdx.x == 0)
      tokens[row] = order[0];
    return;
  }
  const bool needs_order = s.top_k > 0 || s.top_p < 1.0f;
  const int32_t n = s.top_k > 0 && s.top_k < vocab ? s.top_k : vocab;
  const double inverse_temperature = 1.0 / s.temperature;
  auto candidate = [&](int32_t i) { return needs_order ? order[i] : i; };
  auto weight = [&](int32_t i) {
    return i < n ? exp((static_cast<double>(values[candidate(i)]) - best) * inverse_temperature)
                 : 0.0;
  };

  double local = 0.0;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x)
    local += weight(i);
  double total = Reduce(temp.reduce).Sum(local);
  if (threadIdx.x == 0)
    shared_total = total;
  __syncthreads();
  total = shared_total;

  // First index whose inclusive prefix sum reaches `threshold` (strictly
  // passes it when `strict`), in chunks of one value per thread.
  auto firstReaching = [&](double threshold, bool strict) -> int32_t {
    if (threadIdx.x == 0)
      found = -1;
    double carried = 0.0;
    for (int32_t base = 0; base < n; base += blockDim.x) {
      __syncthreads();
      int32_t i = base + threadIdx.x;
      double w = i < n ? weight(i) : 0.0, inclusive = 0.0, chunk = 0.0;
      Scan(temp.scan).InclusiveSum(w, inclusive, chunk);
      inclusive += carried;
      bool reached = i < n && (strict ? threshold < inclusive : inclusive >= threshold);
      if (reached)
        atomicMin(reinterpret_cast<unsigned *>(&found), static_cast<unsigned>(i));
      __syncthreads();
      if (found >= 0)
        return found;
      carried += chunk;
    }
    return -1;
  };

  int32_t keep = n;
  if (s.top_p < 1.0f) {
    int32_t last = firstReaching(static_cast<double>(s.top_p) * total, false);
    keep = last >= 0 ? last + 1 : n;
    // The kept mass, summed as the draw below sums it.
    double kept = 0.0;
    for (int32_t i = threadIdx.x; i < keep; i += blockDim.x)
      kept += weight(i);
    __syncthreads();
    kept = Reduce(temp.reduce).Sum(kept);
    if (threadIdx.x == 0)
      shared_total = kept;
    __syncthreads();
    total = shared_total;
  }
  __syncthreads();
  int32_t chosen = firstReaching(s.uniform * total, true);
  if (threadIdx.x == 0)
    tokens[row] = candidate(chosen >= 0 && chosen < keep ? chosen : keep - 1);
}

struct Workspace {
  uint64_t *keys_in, *keys_out;
  int32_t *ids_in, *ids_out;
  void *cub;
  size_t cub_bytes;
};

size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t cubBytes(int32_t vocab) {
  size_t bytes = 0;
  int items = kSamplerRowsPerPass * vocab;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<uint64_t *>(nullptr),
                                  static_cast<uint64_t *>(nullptr), static_cast<int32_t *>(nullptr),
                                  static_cast<int32_t *>(nullptr), items);
  return bytes;
}

Workspace carve(void *base, int32_t vocab) {
  size_t items = static_cast<size_t>(kSamplerRowsPerPass) * vocab;
  auto *p = static_cast<unsigned char *>(base);
  Workspace w;
  w.keys_in = reinterpret_cast<uint64_t *>(p);
  p += alignUp(items * 8);
  w.keys_out = reinterpret_cast<uint64_t *>(p);
  p += alignUp(items * 8);
  w.ids_in = reinterpret_cast<int32_t *>(p);
  p += alignUp(items * 4);
  w.ids_out = reinterpret_cast<int32_t *>(p);
  p += alignUp(items * 4);
  w.cub = p;
  w.cub_bytes = cubBytes(vocab);
  return w;
}

} // namespace

size_t samplingWorkspaceBytes(int32_t vocab) {
  size_t items = static_cast<size_t>(kSamplerRowsPerPass) * vocab;
  return 2 * alignUp(items * 8) + 2 * alignUp(items * 4) + alignUp(cubBytes(vocab));
}

cudaError_t launchSampling(const float *logits, int32_t rows, int32_t vocab,
                           const engine::RowSampling *sampling, void *workspace,
                           size_t workspace_bytes, int32_t *tokens, cudaStream_t stream) {
  if (workspace_bytes < samplingWorkspaceBytes(vocab) || vocab <= 0)
    return cudaErrorInvalidValue;
  Workspace w = carve(workspace, vocab);
  for (int32_t first = 0; first < rows; first += kSamplerRowsPerPass) {
    int32_t pass = rows - first < kSamplerRowsPerPass ? rows - first : kSamplerRowsPerPass;
    const float *pass_logits = logits + static_cast<int64_t>(first) * vocab;
    buildKeys<<<pass, kThreads, 0, stream>>>(pass_logits, vocab, w.keys_in, w.ids_in);
    size_t cub_bytes = w.cub_bytes;
    // Row index in bits 32..35 (kSamplerRowsPerPass <= 16), logit below.
    cudaError_t e = cub::DeviceRadixSort::SortPairs(
        w.cub, cub_bytes, w.keys_in, w.keys_out, w.ids_in, w.ids_out, pass * vocab, 0, 36, stream);
    if (e != cudaSuccess)
      return e;
    drawKernel<<<pass, kThreads, 0, stream>>>(pass_logits, vocab, w.ids_out, sampling + first,
                                              tokens + first);
  }
  return cudaGetLastError();
}

} // namespace txc::cuda
