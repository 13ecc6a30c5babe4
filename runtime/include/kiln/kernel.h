// The kernel interface: how an operator implementation is called and registered.
#pragma once

#include <cstdint>

#include "kiln/api.h"
#include "kiln/error.h"
#include "kiln/span.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"
#include "kiln/value.h"

namespace kiln {

// What a kernel sees besides its arguments. Kernels never reach into the executor.
struct KernelContext {
  // "aten::add.Tensor"
  const char* op_name = "";
  // The state returned by the kernel's prepare function, or nullptr.
  void* state = nullptr;
};

// Called once at method load with the argument values (tensors at their largest
// sizes; constant tensors hold their data). May validate dtypes and shapes and
// build state, e.g. prepacked constant weights. Optional.
using KernelPrepareFn = Status (*)(KernelContext& ctx, Span<const Value* const> inputs,
                                   Span<Tensor* const> outputs, void** state);
// Computes the outputs. Must resize each output (Tensor::resize) to its actual
// sizes, and must not allocate on the heap.
using KernelRunFn = Status (*)(KernelContext& ctx, Span<const Value* const> inputs,
                               Span<Tensor* const> outputs);
// Frees what prepare built. Optional.
using KernelReleaseFn = void (*)(void* state);

// A kernel registration. `dtypes` lists the dtype signatures it serves, one per
// '|'-separated alternative, each a ','-separated list of the dtypes of the
// tensor inputs in order (None and non-tensor inputs are skipped), e.g.
// "f32,f32|f32,f32,f32". "*" serves every signature: such a kernel checks
// dtypes itself, and an exact-signature kernel for the same operator wins.
struct KernelDef {
  uint32_t abi_version = KILN_ABI_VERSION;
  const char* op_name = nullptr;
  const char* dtypes = nullptr;
  KernelRunFn run = nullptr;
  KernelPrepareFn prepare = nullptr;
  KernelReleaseFn release = nullptr;
};

// Registers into the process-wide kernel registry. On a collision (same
// operator and signature) the first registration stays and the error names the
// library of each. Every outcome is also recorded for registration_log().
KILN_API Status register_kernel(const KernelDef& def) noexcept;

namespace internal {
struct KernelRegistrar {
  explicit KernelRegistrar(const KernelDef& def) noexcept { (void)register_kernel(def); }
};
}  // namespace internal

}  // namespace kiln

// Registers a kernel from a static initializer:
//   KILN_REGISTER_KERNEL("aten::relu.default", "f32", relu_run);
//   KILN_REGISTER_KERNEL("aten::linear.default", "f32,f32|f32,f32,f32", linear_run, linear_prepare, linear_release);
#define KILN_REGISTER_KERNEL(op_name, dtypes, ...)                                     \
  static const ::kiln::internal::KernelRegistrar KILN_CONCAT_(kiln_kernel_registrar_, \
                                                              __COUNTER__)(           \
      ::kiln::KernelDef{KILN_ABI_VERSION, op_name, dtypes, __VA_ARGS__})
