// Status formatting and error-kind names.
#include "kiln/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace kiln {

const char* error_name(Error e) noexcept {
  switch (e) {
    case Error::Ok: return "ok";
    case Error::InvalidArgument: return "invalid_argument";
    case Error::InvalidProgram: return "invalid_program";
    case Error::InvalidInput: return "invalid_input";
    case Error::MissingKernel: return "missing_kernel";
    case Error::MissingBackend: return "missing_backend";
    case Error::RegistrationConflict: return "registration_conflict";
    case Error::AbiMismatch: return "abi_mismatch";
    case Error::NotFound: return "not_found";
    case Error::NotSupported: return "not_supported";
    case Error::OutOfMemory: return "out_of_memory";
    case Error::IoError: return "io_error";
    case Error::KernelFailure: return "kernel_failure";
    case Error::Internal: return "internal";
    case Error::DuplicateRuntime: return "duplicate_runtime";
    case Error::Busy: return "busy";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(error_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) && {
  if (!is_ok()) message_ = context + ": " + message_;
  return std::move(*this);
}

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<size_t>(n));
    std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  }
  va_end(args);
  return out;
}

namespace detail {

void result_without_value(const Status& status) noexcept {
  std::fprintf(stderr, "kiln: a Result was used without a value (check ok() first): %s\n", status.to_string().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace detail

}  // namespace kiln
