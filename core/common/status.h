// Status and StatusOr: the error type for anything a caller can recover from
// (bad input, an unknown name, an impossible request). Broken invariants use
// TIDAL_CHECK instead (core/common/check.h).
#ifndef TIDAL_CORE_COMMON_STATUS_H_
#define TIDAL_CORE_COMMON_STATUS_H_

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/common/check.h"

namespace tidal {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // malformed input; the message names the field
  kNotFound,          // an unknown workload, queue, node, ...
  kAlreadyExists,
  kFailedPrecondition,
  kPermissionDenied,
  kUnauthenticated,
  kResourceExhausted,
  kUnavailable,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Prefixes the message with context, e.g. "cluster.yaml:12: ".
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : rep_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : rep_(std::move(status)) {  // NOLINT
    TIDAL_CHECK(!std::get<Status>(rep_).ok()) << "StatusOr built from an OK status";
  }

  bool ok() const { return std::holds_alternative<T>(rep_); }
  Status status() const { return ok() ? Status() : std::get<Status>(rep_); }

  const T& value() const& { CheckOk(); return std::get<T>(rep_); }
  T& value() & { CheckOk(); return std::get<T>(rep_); }
  T&& value() && { CheckOk(); return std::get<T>(std::move(rep_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckOk() const {
    TIDAL_CHECK(ok()) << "value() on an error: " << std::get<Status>(rep_).ToString();
  }
  std::variant<Status, T> rep_;
};

}  // namespace tidal

#define TIDAL_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::tidal::Status tidal_status_ = (expr);    \
    if (!tidal_status_.ok()) return tidal_status_; \
  } while (0)

#define TIDAL_CONCAT_INNER_(a, b) a##b
#define TIDAL_CONCAT_(a, b) TIDAL_CONCAT_INNER_(a, b)
#define TIDAL_ASSIGN_OR_RETURN(lhs, expr) \
  TIDAL_ASSIGN_OR_RETURN_IMPL_(TIDAL_CONCAT_(tidal_statusor_, __LINE__), lhs, expr)
#define TIDAL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#endif  // TIDAL_CORE_COMMON_STATUS_H_
