//===- CublasGemm.h - Row-major GEMMs on cuBLASLt, plans cached -*- C++ -*-===//
//
// out[m, n] = x[m, k] @ w[n, k]^T (+ bias[n]) (+ residual[m, n]) with fp32
// accumulation on cuBLASLt: the executor's GEMMs that its own kernels
// (Gemv.h, SkinnyGemm.h, DecodeGemm.h) do not take, and the reference those
// kernels are timed against in bench/decode_ops_bench.cu, so the benchmark
// runs exactly the executor's cuBLASLt call. One matmul plan per shape and
// types, kept for the object's life: the heuristic's first algorithm, or
// with tuning on, the fastest of its first kTuneCandidates on the shape's
// first call outside a stream capture (decode-sized shapes only).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CUDA_CUBLASGEMM_H
#define TXC_RUNTIME_BACKENDS_CUDA_CUBLASGEMM_H

#include "txc/DType.h"
#include "txc/Status.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace txc::cuda {

/// The workspace the executor gives cuBLASLt (its heuristic may pick
/// split-K algorithms that need it).
inline constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

/// A device operand: pointer and element type (nullptr: absent).
struct GemmOperand {
  const void *data = nullptr;
  DType dtype = DType::kInvalid;
};

class CublasGemm {
public:
  CublasGemm() = default;
  ~CublasGemm();
  CublasGemm(const CublasGemm &) = delete;
  CublasGemm &operator=(const CublasGemm &) = delete;

  /// Creates the cuBLASLt handle. `workspace` (device memory of
  /// `workspace_bytes`) stays the caller's and must outlive this object's
  /// launches.
  Status init(void *workspace, size_t workspace_bytes);

  /// With tuning on, a shape of at most kTuneMaxRows rows times the
  /// heuristic's first kTuneCandidates algorithms on its first call that is
  /// not being captured (each launch into a scratch result, after an L2
  /// flush, the median of kTuneReplays) and keeps the fastest. Calls made
  /// while capturing use the heuristic's choice until then.
  void setTuning(bool on) { tuning_ = on; }
  static constexpr int64_t kTuneMaxRows = 256;
  static constexpr int kTuneCandidates = 8;
  static constexpr int kTuneReplays = 10;

  /// Enqueues out = x @ w^T (+ bias) (+ residual) on `stream`. x and w share
  /// one 16-bit or F32 type; the residual, if present, has out's type and
  /// shape and may be out itself. Unimplemented if cuBLASLt has no
  /// algorithm for the shape and types.
  Status run(int64_t m, int64_t n, int64_t k, GemmOperand x, GemmOperand w, GemmOperand bias,
             GemmOperand residual, void *out, DType out_dtype, cudaStream_t stream);

private:
  struct Key {
    int64_t m, n, k;
    int in, out, bias, residual;
    bool operator<(const Key &o) const {
      return std::tie(m, n, k, in, out, bias, residual) <
             std::tie(o.m, o.n, o.k, o.in, o.out, o.bias, o.residual);
    }
  };
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo;
    std::vector<cublasLtMatmulAlgo_t> candidates; // the heuristic's, best first
    bool tuned = false;
  };
  StatusOr<Plan *> plan(const Key &key, DType in, DType out, DType bias);
  /// Times p's candidates on these operands (the result into scratch) and
  /// keeps the fastest in p.algo.
  Status tune(Plan &p, const Key &key, const void *x, const void *w, DType out_dtype,
              cudaStream_t stream);

  cublasLtHandle_t lt_ = nullptr;
  void *workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
  bool tuning_ = false;
};

} // namespace txc::cuda

#endif // TXC_RUNTIME_BACKENDS_CUDA_CUBLASGEMM_H
