// The backend interface: a named executor for subgraphs delegated at export time.
#pragma once

#include <cstdint>

#include "kiln/api.h"
#include "kiln/error.h"
#include "kiln/span.h"
#include "kiln/tensor.h"
#include "kiln/value.h"

namespace kiln {

struct CompileSpecView {
  const char* key;
  Span<const uint8_t> value;
};

// A backend is a table of functions. init receives the processed blob written
// at export time (it lives in the mapped program: copy or prepack what must
// outlive the program) and returns a handle; execute runs it; destroy frees it.
struct BackendDef {
  uint32_t abi_version = KILN_ABI_VERSION;
  const char* name = nullptr;
  Status (*init)(Span<const uint8_t> processed, Span<const CompileSpecView> specs, void** handle) = nullptr;
  Status (*execute)(void* handle, Span<const Value* const> inputs, Span<Tensor* const> outputs) = nullptr;
  void (*destroy)(void* handle) = nullptr;
};

// Registers into the process-wide backend registry. A name that is taken is a
// RegistrationConflict naming both libraries; the first registration stays.
KILN_API Status register_backend(const BackendDef& def) noexcept;

namespace internal {
struct BackendRegistrar {
  explicit BackendRegistrar(const BackendDef& def) noexcept { (void)register_backend(def); }
};
}  // namespace internal

}  // namespace kiln

// KILN_REGISTER_BACKEND("my_backend", my_init, my_execute, my_destroy);
#define KILN_REGISTER_BACKEND(name, init, execute, destroy)     \
  static const ::kiln::internal::BackendRegistrar KILN_CONCAT_( \
      kiln_backend_registrar_, __COUNTER__)(::kiln::BackendDef{KILN_ABI_VERSION, name, init, execute, destroy})
