// What the project's extension libraries share with the C API to offer C tables of their own
// (libkiln_llm.so.0's kiln/llm/c_api.h): statuses the core's status_free frees, the options a
// kiln_load_options handle holds, and the quarantine of freed handles. Exported under
// KILN_INTERNAL_0 (runtime/kiln.map), not API.
#pragma once

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "kiln/c_api.h"
#include "kiln/error.h"
#include "kiln/program.h"

namespace kiln::c_internal {

// A status of `status`'s code and message; nullptr for success. Never throws: without memory,
// the preallocated out-of-memory status.
KILN_API kiln_status* make_status(const Status& status) noexcept;
// The preallocated status for when memory for a status cannot be had (status_free ignores it).
KILN_API kiln_status* out_of_memory() noexcept;
// Keeps a freed handle's husk (its magic already marked freed, its contents released) among the
// most recently freed handles, so that its reuse reads live memory; destroy(husk) runs when it
// leaves the quarantine.
KILN_API void retire(void* husk, void (*destroy)(void*)) noexcept;
// An Internal status naming the function and the exception's what() (may be NULL).
KILN_API kiln_status* unexpected_exception(const char* function, const char* what) noexcept;
// `options`'s LoadOptions into *out (the defaults for NULL); a status for a bad or freed handle.
KILN_API kiln_status* read_load_options(const kiln_load_options* options, const char* function,
                                        LoadOptions* out) noexcept;

// Runs `body` (returning kiln_status*), turning any C++ exception into a status: every C entry
// point runs its body through this, so no exception reaches a C caller.
template <typename F>
kiln_status* guarded(const char* function, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (const std::exception& e) {
    return unexpected_exception(function, e.what());
  } catch (...) {
    return unexpected_exception(function, nullptr);
  }
}

// Copies a struct the library filled into the caller's, as far as the caller's struct_size
// reaches (kiln/c_api.h: a struct may grow in a later version, either side may be older).
template <typename S>
kiln_status* copy_prefix(const char* function, const S& filled, S* out) {
  if (out == nullptr)
    return make_status(Status(Error::InvalidArgument, std::string(function) + ": the struct is NULL"));
  size_t size = out->struct_size;
  if (size < sizeof(size_t)) {
    return make_status(Status(Error::InvalidArgument,
                              std::string(function) + ": struct_size is not set (set it to sizeof the struct)"));
  }
  size = std::min(size, sizeof(S));
  std::memcpy(static_cast<void*>(out), &filled, size);
  out->struct_size = size;  // what the library wrote
  return nullptr;
}

}  // namespace kiln::c_internal
