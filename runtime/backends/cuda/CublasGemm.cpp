//===- CublasGemm.cpp - Row-major GEMMs on cuBLASLt, plans cached ---------===//
//
// Row-major out[M, N] is column-major out^T = w (K x N, transposed) * x^T,
// so w is cuBLASLt's A with TRANSA and x its B.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CublasGemm.h"

#include <algorithm>
#include <string>

namespace txc::cuda {

namespace {

Status cublasStatus(cublasStatus_t status, const std::string &what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return internalError(what + ": cuBLASLt status " + std::to_string(static_cast<int>(status)));
}

cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
  case DType::kBF16:
    return CUDA_R_16BF;
  case DType::kF16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

std::string shape(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

} // namespace

CublasGemm::~CublasGemm() {
  for (auto &[key, p] : plans_) {
    cublasLtMatmulDescDestroy(p.op);
    for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c, p.d})
      cublasLtMatrixLayoutDestroy(l);
  }
  if (lt_)
    cublasLtDestroy(lt_);
}

Status CublasGemm::init(void *workspace, size_t workspace_bytes) {
  workspace_ = workspace;
  workspace_bytes_ = workspace_bytes;
  return cublasStatus(cublasLtCreate(&lt_), "cublasLtCreate");
}

StatusOr<CublasGemm::Plan *> CublasGemm::plan(const Key &key, DType in, DType out, DType bias) {
  auto it = plans_.find(key);
  if (it != plans_.end())
    return &it->second;
  Plan p;
  TXC_RETURN_IF_ERROR(
      cublasStatus(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc"));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (key.bias >= 0) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                   sizeof(epilogue));
    cudaDataType_t bt = cudaType(bias);
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
  }
  const int64_t m = key.m, n = key.n, k = key.k;
  cublasLtMatrixLayoutCreate(&p.a, cudaType(in), k, n, k);
  cublasLtMatrixLayoutCreate(&p.b, cudaType(in), k, m, k);
  cublasLtMatrixLayoutCreate(&p.c, cudaType(out), n, m, n);
  cublasLtMatrixLayoutCreate(&p.d, cudaType(out), n, m, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  size_t ws = workspace_bytes_;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  const bool tune = tuning_ && key.m <= kTuneMaxRows;
  cublasLtMatmulHeuristicResult_t results[kTuneCandidates];
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt_, p.op, p.a, p.b, p.c, p.d, pref, tune ? kTuneCandidates : 1,
      results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatmulDescDestroy(p.op);
    for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c, p.d})
      cublasLtMatrixLayoutDestroy(l);
    return unimplemented("cuBLASLt has no algorithm for " + shape(m, k) + " x " + shape(n, k) +
                         "^T in " + std::string(dtypeName(in)) + " -> " +
                         std::string(dtypeName(out)) + (key.bias >= 0 ? " with bias" : ""));
  }
  p.algo = results[0].algo;
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS)
      p.candidates.push_back(results[i].algo);
  p.tuned = p.candidates.size() < 2; // nothing to choose between
  return &plans_.emplace(key, p).first->second;
}

Status CublasGemm::run(int64_t m, int64_t n, int64_t k, GemmOperand x, GemmOperand w,
                       GemmOperand bias, GemmOperand residual, void *out, DType out_dtype,
                       cudaStream_t stream) {
  if (!lt_)
    return failedPrecondition("CublasGemm::run before init");
  if (x.dtype != w.dtype)
    return unimplemented(std::string("gemm of a ") + std::string(dtypeName(x.dtype)) +
                         " input by a " + std::string(dtypeName(w.dtype)) +
                         " weight: cuBLASLt needs one operand type");
  if (residual.data && residual.dtype != out_dtype)
    return unimplemented("gemm residual must have the result's dtype");
  Key key{m,
          n,
          k,
          static_cast<int>(x.dtype),
          static_cast<int>(out_dtype),
          bias.data ? static_cast<int>(bias.dtype) : -1,
          residual.data ? 1 : 0};
  TXC_ASSIGN_OR_RETURN(Plan * p, plan(key, x.dtype, out_dtype, bias.dtype));
  // The bias pointer is a descriptor attribute: set per call, since one
  // plan serves every weight of its shape.
  if (bias.data)
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.data,
                                   sizeof(bias.data));
  if (tuning_ && !p->tuned) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
        capture == cudaStreamCaptureStatusNone)
      TXC_RETURN_IF_ERROR(tune(*p, key, x.data, w.data, out_dtype, stream));
  }
  float alpha = 1.0f, beta = residual.data ? 1.0f : 0.0f;
  const void *c = residual.data ? residual.data : out;
  return cublasStatus(cublasLtMatmul(lt_, p->op, &alpha, w.data, p->a, x.data, p->b, &beta, c, p->c,
                                     out, p->d, &p->algo, workspace_, workspace_bytes_, stream),
                      "cublasLtMatmul " + shape(m, k) + " x " + shape(n, k) + "^T");
}

Status CublasGemm::tune(Plan &p, const Key &key, const void *x, const void *w, DType out_dtype,
                        cudaStream_t stream) {
  p.tuned = true; // one attempt per shape, whatever happens below
  const std::string what =
      "tuning cuBLASLt for " + shape(key.m, key.k) + " x " + shape(key.n, key.k) + "^T";
  auto cu = [&](cudaError_t error, const char *step) {
    return error == cudaSuccess
               ? Status::ok()
               : internalError(what + ": " + step + ": " + cudaGetErrorString(error));
  };
  // A decode step streams its weights from DRAM, so every timed launch
  // follows a write that evicts L2 (larger than the H200's 60 MB).
  constexpr size_t kFlushBytes = size_t{128} << 20;
  void *scratch = nullptr, *flush = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  auto release = [&] {
    if (start)
      cudaEventDestroy(start);
    if (stop)
      cudaEventDestroy(stop);
    cudaFree(scratch);
    cudaFree(flush);
  };
  Status status = cu(
      cudaMalloc(&scratch, static_cast<size_t>(key.m * key.n) * (out_dtype == DType::kF32 ? 4 : 2)),
      "the scratch result");
  if (status.isOk())
    status = cu(cudaMalloc(&flush, kFlushBytes), "the L2 flush buffer");
  if (status.isOk())
    status = cu(cudaEventCreate(&start), "an event");
  if (status.isOk())
    status = cu(cudaEventCreate(&stop), "an event");
  if (!status.isOk()) { // no room to time in (the KV cache may hold the rest): keep the heuristic's
    release();
    cudaGetLastError();
    return Status::ok();
  }
  // One graph per candidate: the flush, then the launch between two event
  // nodes, so neither the host's enqueue time nor the flush is timed. The
  // median of kTuneReplays replays after one to warm up. A candidate that
  // does not run here is not a choice; the heuristic's first stays if none
  // does.
  auto time = [&](const cublasLtMatmulAlgo_t &algo) -> float {
    const float alpha = 1.0f, beta = 0.0f;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
      return -1;
    cudaMemsetAsync(flush, 0, kFlushBytes, stream);
    cudaEventRecordWithFlags(start, stream, cudaEventRecordExternal);
    const cublasStatus_t launched =
        cublasLtMatmul(lt_, p.op, &alpha, w, p.a, x, p.b, &beta, scratch, p.c, scratch, p.d, &algo,
                       workspace_, workspace_bytes_, stream);
    cudaEventRecordWithFlags(stop, stream, cudaEventRecordExternal);
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    bool ok = ended == cudaSuccess && launched == CUBLAS_STATUS_SUCCESS &&
              cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph)
      cudaGraphDestroy(graph);
    std::vector<float> times;
    for (int r = -1; ok && r < kTuneReplays; ++r) {
      float ms = 0;
      ok = cudaGraphLaunch(exec, stream) == cudaSuccess &&
           cudaEventSynchronize(stop) == cudaSuccess &&
           cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
      if (r >= 0)
        times.push_back(ms);
    }
    if (exec)
      cudaGraphExecDestroy(exec);
    if (!ok) {
      cudaGetLastError(); // this candidate's failure is not the caller's
      return -1;
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  float best_ms = -1;
  for (const cublasLtMatmulAlgo_t &algo : p.candidates) {
    const float ms = time(algo);
    if (ms >= 0 && (best_ms < 0 || ms < best_ms)) {
      best_ms = ms;
      p.algo = algo;
    }
  }
  release();
  return cu(cudaStreamSynchronize(stream), "finishing");
}

} // namespace txc::cuda
