// Status and Result<T>: kiln's error model. No exception crosses the public API.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "kiln/api.h"

namespace kiln {

// One closed list of error kinds. The Python layer maps each to an exception.
enum class Error : uint32_t {
  Ok = 0,
  // A caller passed a bad argument to an API function.
  InvalidArgument = 1,
  // A program file is malformed, truncated, inconsistent or exceeds a limit.
  InvalidProgram = 2,
  // An input given to a method has the wrong count, dtype or shape.
  InvalidInput = 3,
  // No kernel is registered for an operator with the dtypes the program needs.
  MissingKernel = 4,
  // No backend is registered under the name a delegate asks for.
  MissingBackend = 5,
  // A registration collides with an earlier one (same backend name or kernel key).
  RegistrationConflict = 6,
  // A library was built against another kiln ABI version.
  AbiMismatch = 7,
  // A named thing (method, file) does not exist.
  NotFound = 8,
  // The program uses a feature this runtime does not support.
  NotSupported = 9,
  // Memory could not be allocated, or a limit set by the caller would be exceeded.
  OutOfMemory = 10,
  // The operating system refused a file operation.
  IoError = 11,
  // A kernel or backend rejected its arguments while running.
  KernelFailure = 12,
  // A broken invariant inside kiln: a bug, never the user's mistake.
  Internal = 13,
  // More than one copy of the kiln runtime is loaded in this process, so there
  // would be more than one set of registries.
  DuplicateRuntime = 14,
  // A Method was called while another thread was inside a call of it (see
  // the thread contract in program.h): refused, never run on mixed inputs.
  Busy = 15,
};

// Stable lowercase name of an error kind ("invalid_program").
KILN_API const char* error_name(Error e) noexcept;

class [[nodiscard]] KILN_API Status {
 public:
  Status() noexcept = default;
  Status(Error code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() noexcept { return Status(); }

  bool is_ok() const noexcept { return code_ == Error::Ok; }
  explicit operator bool() const noexcept { return is_ok(); }
  Error code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "invalid_program: <message>"
  std::string to_string() const;
  // Prepends "context: " to the message (no-op on success).
  Status with_context(const std::string& context) &&;

 private:
  Error code_ = Error::Ok;
  std::string message_;
};

// printf-style formatting used by the KILN_ macros.
KILN_API std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

namespace detail {
// Prints "kiln: ... used without a value: <status>" to stderr and aborts: what an unchecked
// `->`, `*` or value() on a failed Result does, so that the program says why it stopped.
[[noreturn]] KILN_API void result_without_value(const Status& status) noexcept;
}  // namespace detail

// Holds either a T or a failed Status; ok() and status() agree by construction.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : status_(), has_value_(true) { new (&storage_) T(std::move(value)); }
  Result(Status status) : status_(std::move(status)), has_value_(false) {
    if (status_.is_ok()) status_ = Status(Error::Internal, "Result built from an ok Status");
  }
  Result(Result&& other) noexcept : status_(std::move(other.status_)), has_value_(other.has_value_) {
    if (has_value_) new (&storage_) T(std::move(other.value_ref()));
  }
  Result& operator=(Result&& other) noexcept {
    if (this != &other) {
      reset();
      status_ = std::move(other.status_);
      has_value_ = other.has_value_;
      if (has_value_) new (&storage_) T(std::move(other.value_ref()));
    }
    return *this;
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  ~Result() { reset(); }

  bool ok() const noexcept { return has_value_; }
  explicit operator bool() const noexcept { return has_value_; }
  const Status& status() const noexcept { return status_; }
  Error error() const noexcept { return status_.code(); }

  // Precondition: ok(). Checked: calling these on an error is a programming bug, which prints the
  // error and aborts.
  T& value() & { return value_ref(); }
  const T& value() const& { return const_cast<Result*>(this)->value_ref(); }
  T&& value() && { return std::move(value_ref()); }
  T* operator->() { return &value_ref(); }
  const T* operator->() const { return &const_cast<Result*>(this)->value_ref(); }
  T& operator*() & { return value_ref(); }

 private:
  T& value_ref() {
    if (!has_value_) detail::result_without_value(status_);
    return *reinterpret_cast<T*>(&storage_);
  }
  void reset() {
    if (has_value_) reinterpret_cast<T*>(&storage_)->~T();
    has_value_ = false;
  }
  Status status_;
  bool has_value_;
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace kiln

// Returns Status(Error::kind, formatted message) from the enclosing function when
// `cond` is false. The message should say what was expected and where.
#define KILN_CHECK_OR_RETURN(cond, kind, ...)                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      return ::kiln::Status(::kiln::Error::kind, ::kiln::format(__VA_ARGS__)); \
    }                                                                          \
  } while (0)

// Propagates a failed Status (or the Status of a failed Result).
#define KILN_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::kiln::Status kiln_status_ = (expr);           \
    if (!kiln_status_.is_ok()) return kiln_status_; \
  } while (0)
