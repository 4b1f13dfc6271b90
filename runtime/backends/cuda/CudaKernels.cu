//===- CudaKernels.cu - Plain CUDA kernels of the CUDA backend ------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/Launch.cuh"
#include "runtime/backends/cuda/RopeAppend.cuh"
#include "runtime/backends/cuda/StepTrace.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

/// Element i of a 16-byte chunk of 16-bit T, as float, and back.
template <typename T> struct Vec16 {
  static __device__ __forceinline__ float get(const uint4 &v, int i) {
    return static_cast<float>(reinterpret_cast<const T *>(&v)[i]);
  }
  static __device__ __forceinline__ void set(uint4 &v, int i, float f) {
    reinterpret_cast<T *>(&v)[i] = static_cast<T>(f);
  }
};

__device__ float blockSum(float v, float *shared) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  float total = 0.0f;
  int warps = (blockDim.x + 31) / 32;
  for (int w = 0; w < warps; ++w)
    total += shared[w];
  return total;
}

__device__ float blockMax(float v, float *shared) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  float total = -INFINITY;
  int warps = (blockDim.x + 31) / 32;
  for (int w = 0; w < warps; ++w)
    total = fmaxf(total, shared[w]);
  return total;
}

// A 16-bit table's row in 16-byte chunks of 8 elements, a thread's chunks
// (up to kEmbeddingChunks a pass) asked for at once: the row comes from
// DRAM, and the element loop below issued its loads one round trip apart
// (bench/sass_load_chains.py: 4 in series at 1024 columns and 256 threads).
// Out: the table's type (copied) or fp32 (widened); 0 outside the table.
constexpr int kEmbeddingChunks = 4;
template <typename T>
__device__ __forceinline__ void embedRowInChunks(const uint4 *src, bool inside, int64_t chunks,
                                                 bool widen, void *out_row) {
  for (int64_t base = threadIdx.x; base < chunks; base += int64_t{blockDim.x} * kEmbeddingChunks) {
    uint4 chunk[kEmbeddingChunks];
#pragma unroll
    for (int u = 0; u < kEmbeddingChunks; ++u) {
      const int64_t i = base + u * int64_t{blockDim.x};
      chunk[u] = inside && i < chunks ? __ldg(src + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kEmbeddingChunks; ++u) {
      const int64_t i = base + u * int64_t{blockDim.x};
      if (i >= chunks)
        break;
      if (!widen) {
        static_cast<uint4 *>(out_row)[i] = chunk[u];
        continue;
      }
      float4 *dst = static_cast<float4 *>(out_row) + 2 * i;
      dst[0] = make_float4(Vec16<T>::get(chunk[u], 0), Vec16<T>::get(chunk[u], 1),
                           Vec16<T>::get(chunk[u], 2), Vec16<T>::get(chunk[u], 3));
      dst[1] = make_float4(Vec16<T>::get(chunk[u], 4), Vec16<T>::get(chunk[u], 5),
                           Vec16<T>::get(chunk[u], 6), Vec16<T>::get(chunk[u], 7));
    }
  }
}

__global__ void embeddingKernel(const int32_t *tokens, const void *table, EType table_type,
                                int64_t table_rows, int64_t cols, int64_t vocab_start, void *out,
                                EType out_type, const StepRopeFactors factors) {
  int64_t t = blockIdx.x;
  int64_t row = static_cast<int64_t>(tokens[t]) - vocab_start;
  bool inside = row >= 0 && row < table_rows;
  const bool half_table = table_type == EType::kBF16 || table_type == EType::kF16;
  const bool aligned = ((reinterpret_cast<uintptr_t>(table) | reinterpret_cast<uintptr_t>(out)) % 16) == 0;
  if (half_table && (out_type == table_type || out_type == EType::kF32) && cols % 8 == 0 && aligned) {
    const bool widen = out_type == EType::kF32;
    void *out_row = static_cast<char *>(out) + t * cols * (widen ? 4 : 2);
    const uint4 *src = static_cast<const uint4 *>(table) + (inside ? row : 0) * (cols / 8);
    if (table_type == EType::kBF16)
      embedRowInChunks<__nv_bfloat16>(src, inside, cols / 8, widen, out_row);
    else
      embedRowInChunks<__half>(src, inside, cols / 8, widen, out_row);
  } else {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      st(out, out_type, t * cols + c, inside ? ld(table, table_type, row * cols + c) : 0.0f);
  }
  if (!factors.positions)
    return;
  const float pos = static_cast<float>(factors.positions[t]);
  for (int s = 0; s < factors.sets; ++s) {
    float *pairs = factors.out[s] + 2 * t * factors.half[s];
    for (int i = threadIdx.x; i < factors.half[s]; i += blockDim.x)
      kernels::ropeCosSin(factors.inv_freq[s], i, pos, factors.attention_scaling[s], pairs[2 * i],
                          pairs[2 * i + 1]);
  }
}

__global__ void rmsNormKernel(const void *input, EType input_type, const void *residual,
                              EType residual_type, const void *weight, EType weight_type,
                              int64_t group, int64_t cols, float eps, void *sum, EType sum_type,
                              void *out, EType out_type) {
  extern __shared__ float row[];
  __shared__ float reduce[32];
  pdlLaunchDependents();
  pdlWait();
  int64_t r = blockIdx.x;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = ld(input, input_type, r * cols + c);
    if (residual)
      v = roundTo(sum_type, v + ld(residual, residual_type, r * cols + c));
    row[c] = v;
  }
  __syncthreads();
  if (residual)
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      st(sum, sum_type, r * cols + c, row[c]);
  for (int64_t g = 0; g < cols; g += group) {
    float local = 0.0f;
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x)
      local += row[g + i] * row[g + i];
    float total = blockSum(local, reduce);
    float inv_rms = 1.0f / sqrtf(total / static_cast<float>(group) + eps);
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x)
      st(out, out_type, r * cols + g + i,
         weight ? row[g + i] * inv_rms * ld(weight, weight_type, i) : row[g + i] * inv_rms);
  }
}

// The same for rows of 16-bit elements throughout (input, residual, sum,
// weight, out) normalised whole, the common case: each thread keeps kVecs
// 16-byte vectors of the row in registers, so a row is one round of loads
// in flight instead of the generic kernel's element loop through shared
// memory (measured on the H200, device run 25: 11.9 us per Llama-3-8B
// batch-32 norm with per-launch events).
constexpr int kVecNormThreads = 128;

template <typename T, int kVecs>
__global__ void __launch_bounds__(kVecNormThreads)
    rmsNormVecKernel(const uint4 *input, const uint4 *residual, const uint4 *weight, int64_t cols,
                     float eps, uint4 *sum, uint4 *out) {
  __shared__ float reduce[32];
  pdlLaunchDependents();
  pdlWait();
  const int64_t row_vecs = cols / 8;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * row_vecs;
  // A thread's chunks of the row (and of the residual, and of the weight)
  // are asked for together before any is used or any sum is stored: the
  // stores may alias the inputs (row for row), so loads after a store went
  // out one round trip after it, kVecs in series (bench/sass_load_chains.py).
  uint4 xs[kVecs], rs[kVecs], ws[kVecs];
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t c = threadIdx.x + j * kVecNormThreads;
    xs[j] = rs[j] = ws[j] = uint4{};
    if (c >= row_vecs)
      continue;
    xs[j] = input[base + c];
    if (residual)
      rs[j] = residual[base + c];
    if (weight)
      ws[j] = weight[c];
  }
  float v[kVecs][8];
  float local = 0.0f;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t c = threadIdx.x + j * kVecNormThreads;
    if (c >= row_vecs)
      continue;
    const uint4 x = xs[j], r = rs[j];
    uint4 s = {};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float f = Vec16<T>::get(x, e);
      if (residual) { // the sum is stored, then normalised as stored
        Vec16<T>::set(s, e, f + Vec16<T>::get(r, e));
        f = Vec16<T>::get(s, e);
      }
      v[j][e] = f;
      local += f * f;
    }
    if (residual)
      sum[base + c] = s;
  }
  const float inv_rms = 1.0f / sqrtf(blockSum(local, reduce) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t c = threadIdx.x + j * kVecNormThreads;
    if (c >= row_vecs)
      continue;
    uint4 o;
    if (weight) {
      const uint4 w = ws[j];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        Vec16<T>::set(o, e, v[j][e] * inv_rms * Vec16<T>::get(w, e));
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        Vec16<T>::set(o, e, v[j][e] * inv_rms);
    }
    out[base + c] = o;
  }
}

template <typename T>
cudaError_t launchRmsNormVec(const void *input, const void *residual, const void *weight,
                             int64_t rows, int64_t cols, float eps, void *sum, void *out,
                             cudaStream_t stream, bool pdl) {
  const int64_t per_thread = (cols / 8 + kVecNormThreads - 1) / kVecNormThreads;
  auto run = [&](auto kernel) {
    return launchKernel(kernel, dim3(static_cast<unsigned>(rows)), dim3(kVecNormThreads), 0, stream,
                        pdl, static_cast<const uint4 *>(input),
                        static_cast<const uint4 *>(residual), static_cast<const uint4 *>(weight),
                        cols, eps, static_cast<uint4 *>(sum), static_cast<uint4 *>(out));
  };
  if (per_thread <= 1)
    return run(rmsNormVecKernel<T, 1>);
  if (per_thread <= 2)
    return run(rmsNormVecKernel<T, 2>);
  if (per_thread <= 4)
    return run(rmsNormVecKernel<T, 4>);
  return run(rmsNormVecKernel<T, 8>);
}

__global__ void swigluKernel(const float *acc, int64_t rows, int64_t half, void *out,
                             EType out_type) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * half)
    return;
  int64_t r = i / half, j = i % half;
  float gate = acc[r * 2 * half + j], up = acc[r * 2 * half + half + j];
  st(out, out_type, i, gate / (1.0f + expf(-gate)) * up);
}

// One warp per head of one token (q, k or v), so a decode step's few
// tokens still spread over many SMs (RopeAppend.cuh).
constexpr int kRopeHeadsPerBlock = 4;
constexpr int kRopeMaxHeadDim = 512;

__global__ void __launch_bounds__(kRopeHeadsPerBlock * 32) ropeAppendKernel(RopeAppendArgs a) {
  __shared__ float staged[kRopeHeadsPerBlock][kRopeMaxHeadDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x;
  const int64_t h = static_cast<int64_t>(blockIdx.y) * kRopeHeadsPerBlock + warp;
  const int64_t total = a.heads + 2 * a.kv_heads;
  pdlLaunchDependents();
  pdlWait();
  if (h >= total)
    return;
  float *head = staged[warp];
  for (int64_t i = lane; i < a.head_dim; i += 32)
    head[i] = ld(a.qkv, a.qkv_type, t * total * a.head_dim + h * a.head_dim + i);
  __syncwarp();
  ropeAppendStagedHead(a, t, h, head, lane);
}

constexpr int kAttnThreads = 128;
constexpr int kAttnChunk = 1024;
constexpr int kAttnMaxDimsPerThread = 4; // head_dim <= 512

__global__ void simpleAttentionKernel(SimpleAttentionArgs a) {
  __shared__ float scores[kAttnChunk];
  __shared__ float reduce[32];
  extern __shared__ float q[];
  int64_t t = blockIdx.x, h = blockIdx.y;
  int64_t group = a.heads / a.kv_heads, kv_head = h / group;
  // The sequence of token t.
  int lo = 0, hi = a.num_seqs - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (a.query_start_offsets[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  int s = lo;
  int64_t new_tokens = a.query_start_offsets[s + 1] - a.query_start_offsets[s];
  int64_t context = a.context_lens[s];
  int64_t position = context - new_tokens + (t - a.query_start_offsets[s]);
  int64_t last = a.causal ? min(position, context - 1) : context - 1;
  int64_t first = 0;
  if (a.sliding_window > 0)
    first = max(static_cast<int64_t>(0), position - a.sliding_window + 1);
  int64_t q_cols = a.heads * a.head_dim;
  for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x)
    q[d] = ld(a.q, a.q_type, t * q_cols + h * a.head_dim + d);
  __syncthreads();
  int64_t kv_cols = a.kv_heads * a.head_dim;
  const int32_t *table = a.block_tables + static_cast<int64_t>(s) * a.max_pages_per_seq;
  auto base = [&](int which, int64_t j) {
    int64_t page = table[j / a.page_size], offset = j % a.page_size;
    return page * 2 * a.page_size * kv_cols + (which * a.page_size + offset) * kv_cols +
           kv_head * a.head_dim;
  };
  float acc[kAttnMaxDimsPerThread] = {0, 0, 0, 0};
  float running_max = -INFINITY, denominator = 0.0f;
  for (int64_t start = first; start <= last; start += kAttnChunk) {
    int64_t end = min(last + 1, start + kAttnChunk);
    float local_max = -INFINITY;
    for (int64_t j = start + threadIdx.x; j < end; j += blockDim.x) {
      int64_t k = base(0, j);
      float score = 0.0f;
      for (int64_t d = 0; d < a.head_dim; ++d)
        score += q[d] * ld(a.cache, a.cache_type, k + d);
      score *= a.scale;
      if (a.softcap > 0.0f)
        score = a.softcap * tanhf(score / a.softcap);
      scores[j - start] = score;
      local_max = fmaxf(local_max, score);
    }
    float chunk_max = blockMax(local_max, reduce); // syncs: scores visible
    float new_max = fmaxf(running_max, chunk_max);
    float rescale = expf(running_max - new_max);
    for (int i = 0; i < kAttnMaxDimsPerThread; ++i)
      acc[i] *= rescale;
    denominator *= rescale;
    for (int64_t j = start; j < end; ++j) {
      float w = expf(scores[j - start] - new_max);
      denominator += w;
      int64_t v = base(1, j);
      for (int i = 0; i < kAttnMaxDimsPerThread; ++i) {
        int64_t d = threadIdx.x + i * blockDim.x;
        if (d < a.head_dim)
          acc[i] += w * ld(a.cache, a.cache_type, v + d);
      }
    }
    running_max = new_max;
    __syncthreads();
  }
  float inv = denominator > 0.0f ? 1.0f / denominator : 0.0f;
  for (int i = 0; i < kAttnMaxDimsPerThread; ++i) {
    int64_t d = threadIdx.x + i * blockDim.x;
    if (d < a.head_dim)
      st(a.out, a.out_type, t * q_cols + h * a.head_dim + d, acc[i] * inv);
  }
}

__global__ void gatherLastKernel(const void *input, EType input_type, int64_t cols,
                                 const int32_t *qso, void *out, EType out_type) {
  int64_t s = blockIdx.x;
  int64_t row = qso[s + 1] - 1;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    st(out, out_type, s * cols + c, ld(input, input_type, row * cols + c));
}

// Greedy sampling: kArgmaxSlices blocks per row each scan a slice of it
// (a 152k-entry row is 600 KB: one block alone walks it in ~10 us of
// dependent L2 round trips); the last block of a row to finish (a counter
// per row, left at zero) reduces the slices' winners. Each thread scans a
// strided part of its slice, so its first maximum is its lowest index, and
// every reduction keeps the lowest index among equal maxima, as sampleToken
// does on the host. A NaN anywhere makes the row -1.
constexpr int kArgmaxThreads = 256;
constexpr int kArgmaxSlices = 32;
constexpr int kArgmaxBatch = 8; // float4s a thread asks for before comparing
constexpr int32_t kArgmaxNan = -2; // a slice's index when it saw a NaN

// A row's place in the argmax workspace: its slices' winners and the count of
// slices done. Laid out by row, whatever the launch's row count, so a row's
// count is where the last launch left it (at 0). Laid out by the row count
// (all winners, then all counts) a launch of fewer rows found its counts
// among the winners a launch of more had written: rows whose count was not 0
// went unwritten (the row kept the token before) or read stale slices. Since
// 3bb3a76 every greedy step after a launch of more rows (a prefill of more
// sequences, a step before rows ended) could lose rows' tokens: found from
// device runs 197-199, where a step of fewer rows gave tokens the CPU backend
// does not, row 0's and row 2's repeating their last one.
struct ArgmaxRow {
  float values[kArgmaxSlices];
  int32_t indices[kArgmaxSlices];
  unsigned count;
};

__device__ __forceinline__ bool argmaxBetter(float v, int32_t i, float w, int32_t j) {
  return v > w || (v == w && i < j);
}

/// The block's best (value, index) into thread 0's registers.
__device__ void argmaxBlockReduce(float &best, int32_t &index) {
  __shared__ float best_values[kArgmaxThreads / 32];
  __shared__ int32_t best_indices[kArgmaxThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    float v = __shfl_xor_sync(0xffffffffu, best, o);
    int32_t i = __shfl_xor_sync(0xffffffffu, index, o);
    if (argmaxBetter(v, i, best, index)) {
      best = v;
      index = i;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    best_values[warp] = best;
    best_indices[warp] = index;
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kArgmaxThreads / 32; ++w)
      if (argmaxBetter(best_values[w], best_indices[w], best, index)) {
        best = best_values[w];
        index = best_indices[w];
      }
}

__global__ void __launch_bounds__(kArgmaxThreads)
    argmaxKernel(const float *logits, int64_t vocab, ArgmaxRow *workspace, int32_t *out, int32_t *also_out) {
  __shared__ bool last;
  const int64_t row = blockIdx.y, slice = blockIdx.x;
  const float *values = logits + row * vocab;
  float best = -INFINITY;
  int32_t index = INT32_MAX;
  bool nan = false;
  auto consider = [&](float v, int64_t c) { // in increasing c: the first maximum stays
    if (isnan(v))
      nan = true;
    else if (v > best) {
      best = v;
      index = static_cast<int32_t>(c);
    }
  };
  if (vocab % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0) {
    // Rows of whole float4s: a thread asks for up to kArgmaxBatch of them
    // at once, then compares. The logits are the lm_head's, just written
    // (in L2): one round trip for Qwen3's 151936 (4.6 float4s a thread),
    // where a scalar loop unrolled by 4 issued ~5 in series.
    const float4 *rows4 = reinterpret_cast<const float4 *>(values);
    const int64_t vecs = vocab / 4;
    const int64_t begin = vecs * slice / kArgmaxSlices, end = vecs * (slice + 1) / kArgmaxSlices;
    for (int64_t base = begin + threadIdx.x; base < end; base += kArgmaxThreads * kArgmaxBatch) {
      float4 batch[kArgmaxBatch];
#pragma unroll
      for (int u = 0; u < kArgmaxBatch; ++u) {
        const int64_t v = base + u * kArgmaxThreads;
        batch[u] = v < end ? rows4[v] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      }
#pragma unroll
      for (int u = 0; u < kArgmaxBatch; ++u) {
        const int64_t c = 4 * (base + u * kArgmaxThreads);
        consider(batch[u].x, c);
        consider(batch[u].y, c + 1);
        consider(batch[u].z, c + 2);
        consider(batch[u].w, c + 3);
      }
    }
  } else {
    const int64_t begin = vocab * slice / kArgmaxSlices, end = vocab * (slice + 1) / kArgmaxSlices;
#pragma unroll 4
    for (int64_t c = begin + threadIdx.x; c < end; c += kArgmaxThreads)
      consider(values[c], c);
  }
  const bool any_nan = __syncthreads_or(nan);
  argmaxBlockReduce(best, index);
  ArgmaxRow &slots = workspace[row];
  if (threadIdx.x == 0) {
    slots.values[slice] = best;
    slots.indices[slice] = any_nan ? kArgmaxNan : index;
    // The acquire-release count publishes the slice's winner and, in the
    // row's last block, shows this thread the other slices' winners.
    last = kernels::atomicAddAcqRelGpu(&slots.count, 1u) == kArgmaxSlices - 1;
    if (last)
      slots.count = 0;
  }
  __syncthreads();
  if (!last || threadIdx.x != 0)
    return;
  best = -INFINITY;
  index = INT32_MAX;
  bool row_nan = false;
  for (int s = 0; s < kArgmaxSlices; ++s) { // in slice order: ties keep the lowest index
    const float v = __ldcg(slots.values + s);
    const int32_t i = __ldcg(slots.indices + s);
    row_nan = row_nan || i == kArgmaxNan;
    if (i != kArgmaxNan && argmaxBetter(v, i, best, index)) {
      best = v;
      index = i;
    }
  }
  out[row] = row_nan || index == INT32_MAX ? -1 : index;
  if (also_out)
    also_out[row] = out[row];
}

__global__ void spinKernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles)
    ;
}

static_assert(kernels::kTraceSlotsPerLaunch == kTraceSlotsPerLaunch &&
                  kernels::kTraceBlock0Clock == kTraceBlock0Clock &&
                  kernels::kTraceBlock0Points == kTraceBlock0Points,
              "the step trace's slots a launch, on the device and the host");

__global__ void emptyPdlKernel(unsigned long long *trace) {
  pdlLaunchDependents();
  kernels::traceEntry(trace);
  pdlWait();
  kernels::traceWaitRelease(trace);
  kernels::traceExit(trace);
}

} // namespace

int smCount() {
  static const int count = [] {
    int device = 0, sms = 132;
    if (cudaGetDevice(&device) == cudaSuccess)
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    return sms;
  }();
  return count;
}


cudaError_t launchSpin(long long cycles, cudaStream_t stream) {
  spinKernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

cudaError_t launchEmptyKernel(bool pdl, unsigned long long *trace, cudaStream_t stream) {
  return launchKernel(emptyPdlKernel, dim3(1), dim3(32), 0, stream, pdl, trace);
}

size_t argmaxWorkspaceBytes(int64_t rows) { return static_cast<size_t>(rows) * sizeof(ArgmaxRow); }

cudaError_t launchArgmax(const float *logits, int64_t rows, int64_t vocab, void *workspace,
                         int32_t *out, cudaStream_t stream, int32_t *also_out) {
  if (rows <= 0)
    return cudaSuccess;
  argmaxKernel<<<dim3(kArgmaxSlices, static_cast<unsigned>(rows)), kArgmaxThreads, 0, stream>>>(
      logits, vocab, static_cast<ArgmaxRow *>(workspace), out, also_out);
  return cudaGetLastError();
}

cudaError_t launchEmbedding(const int32_t *tokens, int64_t num_tokens, const void *table,
                            EType table_type, int64_t table_rows, int64_t cols, int64_t vocab_start,
                            void *out, EType out_type, const StepRopeFactors &factors,
                            cudaStream_t stream) {
  if (num_tokens < 0 || factors.sets < 0 || factors.sets > kMaxStepFactorSets)
    return cudaErrorInvalidValue;
  if (num_tokens == 0)
    return cudaSuccess;
  embeddingKernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(
      tokens, table, table_type, table_rows, cols, vocab_start, out, out_type, factors);
  return cudaGetLastError();
}

cudaError_t launchRmsNorm(const void *input, EType input_type, const void *residual,
                          EType residual_type, const void *weight, EType weight_type, int64_t group,
                          int64_t rows, int64_t cols, float eps, void *sum, EType sum_type,
                          void *out, EType out_type, cudaStream_t stream, bool pdl) {
  const bool same16 = (input_type == EType::kBF16 || input_type == EType::kF16) &&
                      (!weight || weight_type == input_type) && out_type == input_type &&
                      (!residual || (residual_type == input_type && sum_type == input_type));
  if (same16 && group == cols && cols % 8 == 0 && cols <= 8 * 8 * kVecNormThreads &&
      aligned16(input) && aligned16(weight) && aligned16(out) &&
      (!residual || (aligned16(residual) && aligned16(sum)))) {
    if (input_type == EType::kBF16)
      return launchRmsNormVec<__nv_bfloat16>(input, residual, weight, rows, cols, eps, sum, out,
                                             stream, pdl);
    return launchRmsNormVec<__half>(input, residual, weight, rows, cols, eps, sum, out, stream,
                                    pdl);
  }
  size_t smem = static_cast<size_t>(cols) * sizeof(float);
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(rmsNormKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
    if (e != cudaSuccess)
      return e;
  }
  return launchKernel(rmsNormKernel, dim3(static_cast<unsigned>(rows)), dim3(256), smem, stream,
                      pdl, input, input_type, residual, residual_type, weight, weight_type, group,
                      cols, eps, sum, sum_type, out, out_type);
}

cudaError_t launchSwiglu(const float *acc, int64_t rows, int64_t half, void *out, EType out_type,
                         cudaStream_t stream) {
  int64_t n = rows * half;
  swigluKernel<<<(n + 255) / 256, 256, 0, stream>>>(acc, rows, half, out, out_type);
  return cudaGetLastError();
}

cudaError_t launchRopeAppend(const RopeAppendArgs &args, cudaStream_t stream) {
  if (args.head_dim > kRopeMaxHeadDim || args.num_tokens <= 0)
    return args.num_tokens == 0 ? cudaSuccess : cudaErrorInvalidValue;
  int64_t heads = args.heads + 2 * args.kv_heads;
  dim3 grid(static_cast<unsigned>(args.num_tokens),
            static_cast<unsigned>((heads + kRopeHeadsPerBlock - 1) / kRopeHeadsPerBlock));
  return launchKernel(ropeAppendKernel, grid, dim3(kRopeHeadsPerBlock * 32), 0, stream, args.pdl,
                      args);
}

cudaError_t launchSimpleAttention(const SimpleAttentionArgs &args, cudaStream_t stream) {
  if (args.head_dim > kAttnThreads * kAttnMaxDimsPerThread)
    return cudaErrorInvalidValue;
  dim3 grid(static_cast<unsigned>(args.num_tokens), static_cast<unsigned>(args.heads));
  simpleAttentionKernel<<<grid, kAttnThreads, args.head_dim * sizeof(float), stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launchGatherLast(const void *input, EType input_type, int64_t cols,
                             const int32_t *query_start_offsets, int32_t num_seqs, void *out,
                             EType out_type, cudaStream_t stream) {
  gatherLastKernel<<<num_seqs, 256, 0, stream>>>(input, input_type, cols, query_start_offsets, out,
                                                 out_type);
  return cudaGetLastError();
}

} // namespace txc::cuda
