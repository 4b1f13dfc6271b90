//===- Status.h - Errors returned, never thrown ----------------*- C++ -*-===//
//
// Library code in txc never throws out of its API and never aborts: a user
// who feeds a truncated file or an impossible request gets a one-line message
// that names the file, the tensor or the limit. Status carries that message;
// StatusOr<T> carries a value or the Status explaining why there is none.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_STATUS_H
#define TXC_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace txc {

/// Coarse error classes, so callers can branch (e.g. retry on
/// kResourceExhausted) without parsing messages.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller passed something malformed
  kNotFound,          // a file or tensor that should exist does not
  kIoError,           // the OS refused (open, mmap, write)
  kDataLoss,          // a file is truncated or corrupt, a hash mismatches
  kUnimplemented,     // a valid input this build does not support
  kFailedPrecondition,// inputs disagree with each other (weights vs manifest)
  kResourceExhausted, // out of KV pages, memory, batch tokens
  kOutOfRange,        // an index or length beyond a limit
  kInternal,          // a txc bug
};

inline const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk: return "Ok";
  case StatusCode::kInvalidArgument: return "InvalidArgument";
  case StatusCode::kNotFound: return "NotFound";
  case StatusCode::kIoError: return "IoError";
  case StatusCode::kDataLoss: return "DataLoss";
  case StatusCode::kUnimplemented: return "Unimplemented";
  case StatusCode::kFailedPrecondition: return "FailedPrecondition";
  case StatusCode::kResourceExhausted: return "ResourceExhausted";
  case StatusCode::kOutOfRange: return "OutOfRange";
  case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  /// The one-line message; empty when ok.
  const std::string &message() const { return message_; }
  /// "DataLoss: model.txm: truncated ..." for logs and CLI output.
  std::string toString() const {
    if (isOk())
      return "Ok";
    return std::string(statusCodeName(code_)) + ": " + message_;
  }

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status notFound(std::string m) {
  return Status(StatusCode::kNotFound, std::move(m));
}
inline Status ioError(std::string m) {
  return Status(StatusCode::kIoError, std::move(m));
}
inline Status dataLoss(std::string m) {
  return Status(StatusCode::kDataLoss, std::move(m));
}
inline Status unimplemented(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
inline Status failedPrecondition(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status resourceExhausted(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status outOfRange(std::string m) {
  return Status(StatusCode::kOutOfRange, std::move(m));
}
inline Status internalError(std::string m) {
  return Status(StatusCode::kInternal, std::move(m));
}
/// `status` with "context: " before its message (an OK status unchanged).
inline Status withContext(const std::string &context, const Status &status) {
  if (status.isOk())
    return status;
  return Status(status.code(), context + ": " + status.message());
}

/// A value or the error that prevented it. Accessing value() of an error is
/// a caller bug; check isOk() (or use TXC_ASSIGN_OR_RETURN) first.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.isOk())
      status_ = internalError("StatusOr constructed from an ok Status");
  }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }

  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() & { return *value_; }
  const T &operator*() const & { return *value_; }

private:
  Status status_;
  std::optional<T> value_;
};

} // namespace txc

#define TXC_STATUS_CONCAT_INNER(a, b) a##b
#define TXC_STATUS_CONCAT(a, b) TXC_STATUS_CONCAT_INNER(a, b)

/// Returns the Status from the enclosing function when `expr` fails.
#define TXC_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    ::txc::Status txc_status_ = (expr);                                        \
    if (!txc_status_.isOk())                                                   \
      return txc_status_;                                                      \
  } while (0)

/// `TXC_ASSIGN_OR_RETURN(auto x, makeX());` declares x from a StatusOr or
/// returns its error.
#define TXC_ASSIGN_OR_RETURN(lhs, expr)                                        \
  TXC_ASSIGN_OR_RETURN_IMPL(TXC_STATUS_CONCAT(txc_statusor_, __LINE__), lhs,  \
                            expr)
#define TXC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                              \
  auto tmp = (expr);                                                           \
  if (!tmp.isOk())                                                             \
    return tmp.status();                                                       \
  lhs = std::move(tmp).value()

#endif // TXC_STATUS_H
