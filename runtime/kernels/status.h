//===- status.h - Status and the error macros of the kernel library -------===//
//
// Host entry points of the kernel library and of the codegen library return a
// Status instead of aborting: an artifact compiler or a serving process must
// be able to report "unsupported head_dim 96" or "cudaErrorInvalidValue at
// decode.cu:120 in cudaLaunchKernel(...)" and keep running.
//
// One macro family covers every kind of call. TXC_RETURN_IF_ERROR propagates a
// Status; TXC_CUDA_CHECK, TXC_CU_CHECK (driver API) and TXC_NVRTC_CHECK turn a
// library error code into a Status naming file, line and the failing call.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <utility>

namespace txc::kernels {

enum class StatusCode { kOk = 0, kInvalidArgument, kUnsupported, kCudaError, kCompileError, kIoError };

class Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  static Status invalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Builds the message of a failed library call: "<what> at <file>:<line> in <call>".
inline Status callFailed(StatusCode code, const char *what, const char *file, int line, const char *call) {
  return Status(code, std::string(what) + " at " + file + ":" + std::to_string(line) + " in " + call);
}

} // namespace txc::kernels

#define TXC_RETURN_IF_ERROR(expr)                                                                  \
  do {                                                                                             \
    ::txc::kernels::Status txc_status_ = (expr);                                                   \
    if (!txc_status_.isOk())                                                                       \
      return txc_status_;                                                                          \
  } while (0)

// The library-specific macros are defined only where that library's header was
// included first, so this header stays usable in CPU-only builds.
#if defined(__CUDA_RUNTIME_H__) || defined(CUDART_VERSION)
#define TXC_CUDA_CHECK(call)                                                                       \
  do {                                                                                             \
    cudaError_t txc_err_ = (call);                                                                 \
    if (txc_err_ != cudaSuccess)                                                                   \
      return ::txc::kernels::callFailed(::txc::kernels::StatusCode::kCudaError,                    \
                                        cudaGetErrorName(txc_err_), __FILE__, __LINE__, #call);    \
  } while (0)
#endif

#if defined(__cuda_cuda_h__)
#define TXC_CU_CHECK(call)                                                                         \
  do {                                                                                             \
    CUresult txc_res_ = (call);                                                                    \
    if (txc_res_ != CUDA_SUCCESS) {                                                                \
      const char *txc_name_ = "CUDA driver error";                                                 \
      cuGetErrorName(txc_res_, &txc_name_);                                                        \
      return ::txc::kernels::callFailed(::txc::kernels::StatusCode::kCudaError, txc_name_,         \
                                        __FILE__, __LINE__, #call);                                \
    }                                                                                              \
  } while (0)
#endif

#if defined(__NVRTC_H__)
#define TXC_NVRTC_CHECK(call)                                                                      \
  do {                                                                                             \
    nvrtcResult txc_res_ = (call);                                                                 \
    if (txc_res_ != NVRTC_SUCCESS)                                                                 \
      return ::txc::kernels::callFailed(::txc::kernels::StatusCode::kCompileError,                 \
                                        nvrtcGetErrorString(txc_res_), __FILE__, __LINE__, #call); \
  } while (0)
#endif
