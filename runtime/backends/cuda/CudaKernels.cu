//===- CudaKernels.cu - Plain CUDA kernels of the CUDA backend ------------===//
#include "runtime/backends/cuda/CudaKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace txc::cuda {

namespace {

__device__ __forceinline__ float ld(const void *base, EType t, int64_t i) {
  switch (t) {
  case EType::kBF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[i]);
  case EType::kF16:
    return __half2float(static_cast<const __half *>(base)[i]);
  default:
    return static_cast<const float *>(base)[i];
  }
}

__device__ __forceinline__ void st(void *base, EType t, int64_t i, float v) {
  switch (t) {
  case EType::kBF16:
    static_cast<__nv_bfloat16 *>(base)[i] = __float2bfloat16_rn(v);
    return;
  case EType::kF16:
    static_cast<__half *>(base)[i] = __float2half_rn(v);
    return;
  default:
    static_cast<float *>(base)[i] = v;
  }
}

/// Rounds v through storage type t (what a store then load gives).
__device__ __forceinline__ float roundTo(EType t, float v) {
  switch (t) {
  case EType::kBF16:
    return __bfloat162float(__float2bfloat16_rn(v));
  case EType::kF16:
    return __half2float(__float2half_rn(v));
  default:
    return v;
  }
}

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

__global__ void embeddingKernel(const int32_t *tokens, const void *table,
                                EType table_type, int64_t table_rows,
                                int64_t cols, int64_t vocab_start, void *out,
                                EType out_type) {
  int64_t t = blockIdx.x;
  int64_t row = static_cast<int64_t>(tokens[t]) - vocab_start;
  bool inside = row >= 0 && row < table_rows;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    st(out, out_type, t * cols + c,
       inside ? ld(table, table_type, row * cols + c) : 0.0f);
}

__global__ void rmsNormKernel(const void *input, EType input_type,
                              const void *residual, EType residual_type,
                              const void *weight, EType weight_type,
                              int64_t group, int64_t cols, float eps,
                              void *sum, EType sum_type, void *out,
                              EType out_type) {
  extern __shared__ float row[];
  __shared__ float reduce[32];
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
         row[g + i] * inv_rms * ld(weight, weight_type, i));
  }
}

__global__ void swigluKernel(const float *acc, int64_t rows, int64_t half,
                             void *out, EType out_type) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * half)
    return;
  int64_t r = i / half, j = i % half;
  float gate = acc[r * 2 * half + j], up = acc[r * 2 * half + half + j];
  st(out, out_type, i, gate / (1.0f + expf(-gate)) * up);
}

__global__ void ropeAppendKernel(RopeAppendArgs a) {
  extern __shared__ float row[];
  int64_t t = blockIdx.x;
  int64_t cols = (a.heads + 2 * a.kv_heads) * a.head_dim;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    row[c] = ld(a.qkv, a.qkv_type, t * cols + c);
  __syncthreads();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  float pos = static_cast<float>(a.positions[t]);
  for (int64_t h = warp; h < a.heads + a.kv_heads; h += warps) {
    bool is_query = h < a.heads;
    float *head = row + h * a.head_dim;
    const void *norm = is_query ? a.q_norm : a.k_norm;
    EType norm_type = is_query ? a.q_norm_type : a.k_norm_type;
    if (norm) {
      float local = 0.0f;
      for (int64_t i = lane; i < a.head_dim; i += 32)
        local += head[i] * head[i];
      for (int o = 16; o > 0; o >>= 1)
        local += __shfl_xor_sync(0xffffffffu, local, o);
      float inv_rms =
          1.0f / sqrtf(local / static_cast<float>(a.head_dim) + a.norm_eps);
      __syncwarp();
      for (int64_t i = lane; i < a.head_dim; i += 32)
        head[i] = head[i] * inv_rms * ld(norm, norm_type, i);
      __syncwarp();
    }
    for (int64_t i = lane; i < a.half; i += 32) {
      float angle = a.inv_freq[i] * pos; // fp32, as HF
      float c = static_cast<float>(cos(static_cast<double>(angle))) *
                a.attention_scaling;
      float s = static_cast<float>(sin(static_cast<double>(angle))) *
                a.attention_scaling;
      float x1 = head[i], x2 = head[i + a.half];
      head[i] = x1 * c - x2 * s;
      head[i + a.half] = x2 * c + x1 * s;
    }
  }
  __syncthreads();
  int64_t q_cols = a.heads * a.head_dim;
  for (int64_t c = threadIdx.x; c < q_cols; c += blockDim.x)
    st(a.out, a.out_type, t * q_cols + c, row[c]);
  int32_t slot = a.slot_mapping[t];
  if (slot < 0)
    return; // padding token: no cache write
  int64_t page = slot / a.page_size, offset = slot % a.page_size;
  int64_t kv_cols = a.kv_heads * a.head_dim;
  int64_t page_base = page * 2 * a.page_size * kv_cols;
  for (int64_t c = threadIdx.x; c < kv_cols; c += blockDim.x) {
    st(a.cache, a.cache_type, page_base + offset * kv_cols + c,
       row[q_cols + c]);
    st(a.cache, a.cache_type,
       page_base + (a.page_size + offset) * kv_cols + c,
       row[q_cols + kv_cols + c]);
  }
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
    return page * 2 * a.page_size * kv_cols +
           (which * a.page_size + offset) * kv_cols + kv_head * a.head_dim;
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

__global__ void gatherLastKernel(const void *input, EType input_type,
                                 int64_t cols, const int32_t *qso, void *out,
                                 EType out_type) {
  int64_t s = blockIdx.x;
  int64_t row = qso[s + 1] - 1;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    st(out, out_type, s * cols + c, ld(input, input_type, row * cols + c));
}

} // namespace

cudaError_t launchEmbedding(const int32_t *tokens, int64_t num_tokens,
                            const void *table, EType table_type,
                            int64_t table_rows, int64_t cols,
                            int64_t vocab_start, void *out, EType out_type,
                            cudaStream_t stream) {
  embeddingKernel<<<num_tokens, 256, 0, stream>>>(
      tokens, table, table_type, table_rows, cols, vocab_start, out, out_type);
  return cudaGetLastError();
}

cudaError_t launchRmsNorm(const void *input, EType input_type,
                          const void *residual, EType residual_type,
                          const void *weight, EType weight_type, int64_t group,
                          int64_t rows, int64_t cols, float eps, void *sum,
                          EType sum_type, void *out, EType out_type,
                          cudaStream_t stream) {
  size_t smem = static_cast<size_t>(cols) * sizeof(float);
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(
        rmsNormKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(smem));
    if (e != cudaSuccess)
      return e;
  }
  rmsNormKernel<<<rows, 256, smem, stream>>>(input, input_type, residual,
                                             residual_type, weight, weight_type,
                                             group, cols, eps, sum, sum_type,
                                             out, out_type);
  return cudaGetLastError();
}

cudaError_t launchSwiglu(const float *acc, int64_t rows, int64_t half,
                         void *out, EType out_type, cudaStream_t stream) {
  int64_t n = rows * half;
  swigluKernel<<<(n + 255) / 256, 256, 0, stream>>>(acc, rows, half, out,
                                                    out_type);
  return cudaGetLastError();
}

cudaError_t launchRopeAppend(const RopeAppendArgs &args, cudaStream_t stream) {
  size_t smem = static_cast<size_t>((args.heads + 2 * args.kv_heads) *
                                    args.head_dim) * sizeof(float);
  if (smem > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(
        ropeAppendKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(smem));
    if (e != cudaSuccess)
      return e;
  }
  ropeAppendKernel<<<args.num_tokens, 256, smem, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launchSimpleAttention(const SimpleAttentionArgs &args,
                                  cudaStream_t stream) {
  if (args.head_dim > kAttnThreads * kAttnMaxDimsPerThread)
    return cudaErrorInvalidValue;
  dim3 grid(static_cast<unsigned>(args.num_tokens),
            static_cast<unsigned>(args.heads));
  simpleAttentionKernel<<<grid, kAttnThreads, args.head_dim * sizeof(float),
                          stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launchGatherLast(const void *input, EType input_type, int64_t cols,
                             const int32_t *query_start_offsets,
                             int32_t num_seqs, void *out, EType out_type,
                             cudaStream_t stream) {
  gatherLastKernel<<<num_seqs, 256, 0, stream>>>(
      input, input_type, cols, query_start_offsets, out, out_type);
  return cudaGetLastError();
}

} // namespace txc::cuda
