//===- Kernels.h - The CPU reference kernels, one per txk op ----*- C++ -*-===//
//
// Each function is the math of one txk op (docs/dialects/txk.md) over plain
// views, independent of plans and artifacts, so tests can run a kernel on
// its own against a scalar reference. All of them accumulate in fp32, store
// in the output's dtype, split their outer loop over the pool, and return a
// Status for shapes or dtypes they cannot run (never abort).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CPU_KERNELS_H
#define TXC_RUNTIME_BACKENDS_CPU_KERNELS_H

#include "runtime/backends/cpu/Rotary.h"
#include "runtime/backends/cpu/Tensor.h"
#include "runtime/backends/cpu/ThreadPool.h"

#include <vector>

namespace txc::cpu {

/// The per-sequence metadata of one step (txc::engine::Batch, borrowed).
struct BatchView {
  const int32_t *query_start_offsets = nullptr; // [num_seqs + 1]
  const int32_t *context_lens = nullptr;        // [num_seqs]
  const int32_t *block_tables = nullptr;        // [num_seqs, max_pages_per_seq]
  const int32_t *slot_mapping = nullptr;        // [num_tokens]
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;
  int32_t max_pages_per_seq = 0;

  /// The position of flat token `t` of sequence `s`: its queries are the
  /// last tokens of the sequence's context.
  int32_t positionOf(int32_t s, int32_t t) const {
    int32_t new_tokens = query_start_offsets[s + 1] - query_start_offsets[s];
    return context_lens[s] - new_tokens + (t - query_start_offsets[s]);
  }
};

/// One layer of the paged cache: `num_pages` pages, each
/// [2][page_size][kv_heads][head_dim] (K then V), as FORMAT.md specifies.
struct KvCacheLayer {
  void *data = nullptr;
  DType dtype = DType::kInvalid;
  int64_t num_pages = 0;
  int64_t page_size = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;

  int64_t pageElements() const { return 2 * page_size * kv_heads * head_dim; }
  /// Element index of K (which = 0) or V (which = 1) of `head` at `slot`.
  size_t elementIndex(int which, int64_t slot, int64_t head) const {
    int64_t page = slot / page_size, offset = slot % page_size;
    return static_cast<size_t>(page * pageElements() +
                               ((which * page_size + offset) * kv_heads + head) *
                                   head_dim);
  }
};

/// Checks slot mapping and block tables against the cache: every slot and
/// every page of each sequence's context lies inside it.
Status validateBatchAgainstCache(const BatchView &batch,
                                 const KvCacheLayer &cache);

/// Checks that the cache layer holds `kv_heads` heads of `head_dim`, as the
/// launch that reads or writes it says.
Status validateCacheGeometry(const KvCacheLayer &cache, int64_t kv_heads,
                             int64_t head_dim);

// txk.embedding: out[t] = table[tokens[t] - vocab_start], zero outside the
// shard.
Status embeddingKernel(const int32_t *tokens, int64_t num_tokens,
                       const ConstMatrix &table, int64_t vocab_start,
                       const Matrix &out, ThreadPool &pool);

// txk.rms_norm: per group of weight.cols elements of each row; an absent
// weight: the whole row, unscaled.
Status rmsNormKernel(const ConstMatrix &input, const ConstMatrix &weight,
                     double eps, const Matrix &out, ThreadPool &pool);

// txk.add_rms_norm: sum = input + residual, normed = rms_norm(sum).
Status addRmsNormKernel(const ConstMatrix &input, const ConstMatrix &residual,
                        const ConstMatrix &weight, double eps,
                        const Matrix &sum, const Matrix &normed,
                        ThreadPool &pool);

enum class GemmEpilogue { kNone, kResidualAdd, kSwiglu };

/// Parses "none", "residual_add", "swiglu".
StatusOr<GemmEpilogue> parseGemmEpilogue(const std::string &name);

// txk.gemm: acc = input @ weight^T (+ bias), then the epilogue. `residual`
// may be absent for residual_add (a tensor-parallel rank other than the
// first under residual_on_first_rank), in which case nothing is added.
Status gemmKernel(const ConstMatrix &input, const ConstMatrix &weight,
                  const ConstMatrix &maybe_bias, GemmEpilogue epilogue,
                  const ConstMatrix &maybe_residual, const Matrix &out,
                  ThreadPool &pool);

struct RopeAppendParams {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  RopeParams rope;
  double norm_eps = 0.0; // for q_norm / k_norm
};

// txk.rope_append: per head optional RMSNorm (q_norm / k_norm), rotary at
// `positions`, K and V into `cache` at the batch's slots; out = rotated Q.
Status ropeAppendKernel(const ConstMatrix &qkv, const int32_t *positions,
                        const KvCacheLayer &cache, const BatchView &batch,
                        const RopeAppendParams &params,
                        const ConstMatrix &maybe_q_norm,
                        const ConstMatrix &maybe_k_norm, const Matrix &out,
                        ThreadPool &pool);

struct AttentionParams {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double scale = 1.0;
  bool causal = true;
  int64_t sliding_window = 0; // 0: full attention
  double logit_softcap = 0.0; // 0: none
};

// txk.attention: paged, GQA, causal / sliding window / soft-cap, softmax in
// fp32, over the cache (which already holds this step's keys).
Status attentionKernel(const ConstMatrix &query, const KvCacheLayer &cache,
                       const BatchView &batch, const AttentionParams &params,
                       const Matrix &out, ThreadPool &pool);

// txk.gather_last: out[s] = input[query_start_offsets[s + 1] - 1].
Status gatherLastKernel(const ConstMatrix &input, const BatchView &batch,
                        const Matrix &out);

// txk.all_reduce across in-process ranks: every tensor becomes the fp32
// sum of all of them (in rank order), rounded once to its dtype, so every
// rank holds bit-identical values.
Status allReduceSum(const std::vector<Matrix> &per_rank, ThreadPool &pool);

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_KERNELS_H
