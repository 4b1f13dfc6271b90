//===- CudaKernels.h - Plain CUDA kernels of the CUDA backend ----*- C++ -*-===//
//
// One launcher per txk op that is not a GEMM or attention (those go to
// cuBLASLt and runtime/kernels). Storage types are F32, BF16, F16 (EType);
// every kernel computes in fp32 and rounds once on store, as the CPU
// reference does. Launchers only enqueue on `stream` and return the launch
// error (cudaGetLastError), never synchronise.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
#define TXC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H

#include <cstdint>
#include <cuda_runtime.h>

namespace txc::cuda {

enum class EType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

/// Whether `p` may be read in 16-byte vectors (the fast kernels' condition).
inline bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// The current GPU's SM count, asked once (132 if the query fails); launch
/// shapes of the decode kernels are sized by it.
int smCount();

/// Keeps the stream busy for `cycles` SM clocks: the per-launch profile
/// queues a whole step behind it, so its events time the GPU alone and not
/// the host enqueueing the next launch.
cudaError_t launchSpin(long long cycles, cudaStream_t stream);

/// One block that does nothing but the PDL handshake (triggers its
/// dependents, waits for its predecessor): what a kernel boundary alone
/// costs in a step (the decode attention ablation). `trace`: its step-trace
/// slots, or null.
cudaError_t launchEmptyKernel(bool pdl, unsigned long long *trace, cudaStream_t stream);

/// out[r] = argmax of fp32 logits row r (ties to the lowest id; -1 for a row
/// with a NaN or only -inf), and also_out[r] where given (the next step's
/// token ids, for a step queued ahead). `workspace`: argmaxWorkspaceBytes of
/// the most rows any launch takes, zeroed once before the first launch
/// (per-row counters, left at zero; a launch of any row count may follow
/// another).
size_t argmaxWorkspaceBytes(int64_t rows);
cudaError_t launchArgmax(const float *logits, int64_t rows, int64_t vocab, void *workspace,
                         int32_t *out, cudaStream_t stream, int32_t *also_out = nullptr);

/// A decode step's rotary factors, for the decode attention's folded rope:
/// out[s][t][i] = the (cos, sin) pair i of set s at positions[t]
/// (kernels::ropeCosSin: what launchRopeAppend rotates by), one set per
/// distinct rotary table. The embedding kernel computes them beside its
/// rows: it is a step's first kernel, launched without PDL and never
/// releasing its dependents early, so every kernel after it in the stream,
/// however early it starts, sees them.
inline constexpr int kMaxStepFactorSets = 4;
struct StepRopeFactors {
  const int32_t *positions = nullptr; // one per token; null: no factors
  int sets = 0;
  const float *inv_freq[kMaxStepFactorSets] = {};
  int half[kMaxStepFactorSets] = {};
  float attention_scaling[kMaxStepFactorSets] = {};
  float *out[kMaxStepFactorSets] = {}; // [num_tokens][half] (cos, sin) pairs
};

/// out[t] = table[tokens[t] - vocab_start] (zeros outside the table), and
/// the step's rotary factors when `factors.positions` is set.
cudaError_t launchEmbedding(const int32_t *tokens, int64_t num_tokens, const void *table,
                            EType table_type, int64_t table_rows, int64_t cols, int64_t vocab_start,
                            void *out, EType out_type, const StepRopeFactors &factors,
                            cudaStream_t stream);

/// rms_norm (residual == nullptr) or add_rms_norm (sum = input + residual,
/// stored, then normalised as stored). One block per row; rows are read
/// completely before any write, so results may alias inputs row for row.
/// Rows of 16-bit elements throughout, normalised whole (group == cols, a
/// multiple of 8, at most 8192), take a kernel that holds the row in
/// registers; others a generic element loop. A null weight (folded into
/// the next GEMM's by the compiler): group == cols and no scale.
cudaError_t launchRmsNorm(const void *input, EType input_type, const void *residual,
                          EType residual_type, const void *weight, EType weight_type, int64_t group,
                          int64_t rows, int64_t cols, float eps, void *sum, EType sum_type,
                          void *out, EType out_type, cudaStream_t stream, bool pdl = false);

/// out[r, j] = silu(acc[r, j]) * acc[r, j + half] (acc fp32, [rows, 2 half]).
cudaError_t launchSwiglu(const float *acc, int64_t rows, int64_t half, void *out, EType out_type,
                         cudaStream_t stream);

struct RopeAppendArgs {
  const void *qkv = nullptr;
  EType qkv_type = EType::kF32;
  const int32_t *positions = nullptr;
  const int32_t *slot_mapping = nullptr;
  int64_t num_tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
  const float *inv_freq = nullptr; // rotary_dim / 2 entries
  int64_t half = 0;
  float attention_scaling = 1.0f;
  // The same factors at this step's positions, [num_tokens][half] (cos,
  // sin) pairs (StepRopeFactors), when the step computed them: the decode
  // attention's folded rope reads them.
  const float *step_factors = nullptr;
  const void *q_norm = nullptr, *k_norm = nullptr;
  EType q_norm_type = EType::kF32, k_norm_type = EType::kF32;
  float norm_eps = 0.0f;
  void *cache = nullptr;
  EType cache_type = EType::kF32;
  int64_t page_size = 0;
  void *out = nullptr;
  EType out_type = EType::kF32;
  bool pdl = false; // programmatic dependent launch (Launch.cuh)
};
/// One warp per (token, head); head_dim <= 512; qkv must not overlap out
/// (the caller copies).
cudaError_t launchRopeAppend(const RopeAppendArgs &args, cudaStream_t stream);

struct SimpleAttentionArgs {
  const void *q = nullptr;
  EType q_type = EType::kF32;
  const void *cache = nullptr;
  EType cache_type = EType::kF32;
  int64_t page_size = 0, kv_heads = 0, head_dim = 0, heads = 0;
  const int32_t *query_start_offsets = nullptr, *context_lens = nullptr, *block_tables = nullptr;
  int32_t max_pages_per_seq = 0, num_seqs = 0, num_tokens = 0;
  float scale = 1.0f, softcap = 0.0f;
  bool causal = true;
  int64_t sliding_window = 0;
  void *out = nullptr;
  EType out_type = EType::kF32;
  bool pdl = false; // programmatic dependent launch (Launch.cuh)
};
/// The simple, any-dtype attention (one block per token and head, chunked
/// online softmax): the fallback where runtime/kernels has no variant.
cudaError_t launchSimpleAttention(const SimpleAttentionArgs &args, cudaStream_t stream);

/// out[s] = input[query_start_offsets[s + 1] - 1].
cudaError_t launchGatherLast(const void *input, EType input_type, int64_t cols,
                             const int32_t *query_start_offsets, int32_t num_seqs, void *out,
                             EType out_type, cudaStream_t stream);

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
