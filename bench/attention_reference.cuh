//===- attention_reference.cuh - fp64 reference attention and test data ---===//
//
// The bench checks every kernel against this: one CTA per (sampled query
// token, head), scores and softmax in double over exactly the keys the mask
// admits, addressing the same paged / packed K/V the kernel under test reads.
// Slow and obviously right; it never shares code paths with the fast kernels
// beyond kvRowOffset, the address arithmetic of the cache layout itself.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/device_utils.cuh"

namespace txc::bench {

using kernels::KVCacheView;

struct ReferenceArgs {
  const void *q = nullptr;
  long long q_token_stride = 0, q_head_stride = 0;
  KVCacheView kv;
  const int *cu_seqlens_q = nullptr; // [batch + 1]
  const int *kv_lens = nullptr;      // [batch]
  int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool causal = false;
  int window_left = -1;
  float softcap = 0.f;
  double sm_scale = 1.0;
  int max_kv_len = 0;
};

template <typename T> __device__ double toDouble(T x) { return (double)(float)x; }

/// grid (num_samples, num_qo_heads); out[sample][head][dim] in fp32.
template <typename T>
__global__ void referenceAttentionKernel(ReferenceArgs a, const int *sample_tokens, const int *sample_seqs,
                                         float *out, double *scratch) {
  const int sample = blockIdx.x, head = blockIdx.y;
  const int token = sample_tokens[sample], seq = sample_seqs[sample];
  const int q_len = a.cu_seqlens_q[seq + 1] - a.cu_seqlens_q[seq];
  const int kv_len = a.kv_lens[seq];
  const int query_pos = token - a.cu_seqlens_q[seq] + kv_len - q_len;
  int lo = 0, hi = kv_len;
  if (a.window_left >= 0)
    lo = max(0, query_pos - a.window_left);
  if (a.causal)
    hi = min(kv_len, query_pos + 1);
  const int kv_head = head / (a.num_qo_heads / a.num_kv_heads);
  const T *q = static_cast<const T *>(a.q) + token * a.q_token_stride + head * a.q_head_stride;
  const T *k = static_cast<const T *>(a.kv.k) + kv_head * a.kv.head_stride;
  const T *v = static_cast<const T *>(a.kv.v) + kv_head * a.kv.head_stride;
  double *scores = scratch + ((long long)sample * gridDim.y + head) * a.max_kv_len;

  __shared__ double reduce[256];
  double local_max = -1e300;
  for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    const T *kr = k + kernels::kvRowOffset<0>(a.kv, seq, j);
    double dot = 0;
    for (int d = 0; d < a.head_dim; ++d)
      dot += toDouble(q[d]) * toDouble(kr[d]);
    double logit = dot * a.sm_scale;
    if (a.softcap > 0.f)
      logit = a.softcap * tanh(logit / a.softcap);
    scores[j] = logit;
    local_max = fmax(local_max, logit);
  }
  reduce[threadIdx.x] = local_max;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s)
      reduce[threadIdx.x] = fmax(reduce[threadIdx.x], reduce[threadIdx.x + s]);
    __syncthreads();
  }
  const double row_max = reduce[0];
  __syncthreads();
  double local_sum = 0;
  for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    scores[j] = exp(scores[j] - row_max);
    local_sum += scores[j];
  }
  reduce[threadIdx.x] = local_sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s)
      reduce[threadIdx.x] += reduce[threadIdx.x + s];
    __syncthreads();
  }
  const double row_sum = reduce[0];
  for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    double acc = 0;
    for (int j = lo; j < hi; ++j)
      acc += scores[j] * toDouble(v[kernels::kvRowOffset<0>(a.kv, seq, j) + d]);
    out[((long long)sample * gridDim.y + head) * a.head_dim + d] = hi > lo ? (float)(acc / row_sum) : 0.f;
  }
}

/// Fills n elements with uniform values in [-scale, scale) from a counter hash,
/// so every check draws fresh data from its own seed.
template <typename T> __global__ void fillUniformKernel(T *data, long long n, unsigned long long seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned long long x = (unsigned long long)i * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    float u = (float)(x >> 40) * (1.0f / 16777216.0f); // [0, 1)
    data[i] = (T)((2.f * u - 1.f) * scale);
  }
}

} // namespace txc::bench
