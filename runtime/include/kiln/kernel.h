// The kernel interface: how an operator implementation is prepared, called and registered.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/api.h"
#include "kiln/cpu.h"
#include "kiln/error.h"
#include "kiln/span.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"
#include "kiln/value.h"

namespace kiln {

namespace internal {
struct KernelServices;
}  // namespace internal

// Kernel tiers. Several kernels may serve one operator and dtype signature, one
// per tier; at method load the highest tier whose prepare accepts the concrete
// instruction serves it. The portable kernels (the reference implementation)
// are the lowest tier and the optimized kernels sit above them; a plugin may
// register at any tier, e.g. above kTierOptimized to take precedence.
//
// KILN_KERNEL_TIER_LIST(X): X(Enum, "name", value) for every tier kiln names, lowest first: the
// one list of tier names (LoadOptions::kernels, KILN_KERNELS, kiln.kernel_tiers(), reports).
#define KILN_KERNEL_TIER_LIST(X) \
  X(Portable, "portable", 0)     \
  X(Optimized, "optimized", 100)
#define KILN_KERNEL_TIER_CONSTANT_(Enum, name, value) constexpr int32_t kTier##Enum = value;
KILN_KERNEL_TIER_LIST(KILN_KERNEL_TIER_CONSTANT_)
#undef KILN_KERNEL_TIER_CONSTANT_

// "portable", "optimized"; nullptr for a tier without a name (a plugin's own).
KILN_API const char* kernel_tier_name(int32_t tier) noexcept;

// What a kernel sees besides its arguments. Kernels never reach into the executor.
struct KernelContext {
  // "aten::add.Tensor"
  const char* op_name = "";
  // The state returned by the kernel's prepare function, or nullptr.
  void* state = nullptr;

  // Prepare: the instruction-set level optimized code may use (what the CPU
  // supports, lowered by LoadOptions::isa or KILN_ISA).
  Isa isa = Isa::Baseline;

  // Prepare sets these to the scratch memory run() needs: `scratch_bytes` for
  // the call, plus `worker_scratch_bytes` for each thread of the pool (see
  // worker_scratch()). The loaded method plans it once; run() never allocates.
  size_t scratch_bytes = 0;
  size_t worker_scratch_bytes = 0;

  // Run: the planned scratch, 64-byte aligned, valid during this call only and
  // shared with the method's other instructions (its contents do not persist).
  void* scratch = nullptr;
  uint8_t* worker_scratch_base = nullptr;
  size_t worker_scratch_stride = 0;

  // The runtime's services for prepare (packed constants); opaque to kernels.
  internal::KernelServices* services = nullptr;

  // Prepare and run: the program's GEMM precision (see GemmPrecision).
  GemmPrecision gemm_precision = GemmPrecision::Float32;
};

// Run, on any thread of a parallel_for: this thread's block of at least
// ctx.worker_scratch_bytes bytes, 64-byte aligned.
inline void* worker_scratch(const KernelContext& ctx) noexcept {
  return ctx.worker_scratch_base + static_cast<size_t>(worker_index()) * ctx.worker_scratch_stride;
}

// Called once at method load with the argument values (tensors at their largest
// sizes; constant tensors hold their data). Validates what it relies on and
// builds state, e.g. prepacked constant weights. Returning NotSupported
// declines the instruction: the next lower tier's kernel is tried. Any other
// error fails the method load. Optional (a kernel without prepare accepts
// every instruction).
using KernelPrepareFn = Status (*)(KernelContext& ctx, Span<const Value* const> inputs, Span<Tensor* const> outputs,
                                   void** state);
// Computes the outputs. Must resize each output (Tensor::resize) to its actual
// sizes, and must not allocate on the heap.
using KernelRunFn = Status (*)(KernelContext& ctx, Span<const Value* const> inputs, Span<Tensor* const> outputs);
// Frees what prepare built. Optional.
using KernelReleaseFn = void (*)(void* state);

// A kernel registration. `dtypes` lists the dtype signatures it serves, one per
// '|'-separated alternative, each a ','-separated list of the dtypes of the
// tensor inputs in order (None and non-tensor inputs are skipped), e.g.
// "f32,f32|f32,f32,f32". "*" serves every signature: such a kernel checks
// dtypes itself, and an exact-signature kernel of the same tier comes first.
struct KernelDef {
  uint32_t abi_version = KILN_ABI_VERSION;
  const char* op_name = nullptr;
  const char* dtypes = nullptr;
  KernelRunFn run = nullptr;
  KernelPrepareFn prepare = nullptr;
  KernelReleaseFn release = nullptr;
  int32_t tier = kTierPortable;
};

// Registers into the process-wide kernel registry. On a collision (same
// operator, signature and tier) the first registration stays and the error
// names the library of each. Every outcome is also recorded for
// registration_log().
KILN_API Status register_kernel(const KernelDef& def) noexcept;

// Packs a constant tensor once per loaded program, for prepare. The first call
// for (source's bytes, layout) allocates `bytes` bytes (64-byte aligned) owned
// by the program and calls pack(arg, dst); later calls with the same source and
// layout, from any method of the program, return the same bytes. `layout`
// names everything that determines the packed bytes besides the source (e.g.
// "f32-gemm-b-nr32-transposed"). The bytes count against
// LoadOptions::max_memory_bytes; when every byte of the source has been packed,
// the source's pages of a memory-mapped file are released (they are read back
// from the file if anything reads them again). With a packed-weight cache
// (LoadOptions::packed_cache, docs/memory.md) the packed bytes may come from a
// file written by another process, unpacked: so they must hold plain values (no
// pointers), depend only on the source bytes and what `layout` names, and the
// layout name (or the library's build id) must change when pack's output would.
using PackFn = void (*)(const void* arg, void* dst);
KILN_API Result<const void*> packed_constant(KernelContext& ctx, const Tensor& source, const char* layout, size_t bytes,
                                             PackFn pack, const void* arg) noexcept;

namespace internal {
struct KernelRegistrar {
  explicit KernelRegistrar(const KernelDef& def) noexcept { (void)register_kernel(def); }
};
inline KernelDef at_tier(int32_t tier, KernelDef def) noexcept {
  def.tier = tier;
  return def;
}
}  // namespace internal

}  // namespace kiln

// Registers a kernel from a static initializer, at the portable tier:
//   KILN_REGISTER_KERNEL("aten::relu.default", "f32", relu_run);
//   KILN_REGISTER_KERNEL("aten::linear.default", "f32,f32|f32,f32,f32", linear_run, linear_prepare, linear_release);
#define KILN_REGISTER_KERNEL(op_name, dtypes, ...)             \
  static const ::kiln::internal::KernelRegistrar KILN_CONCAT_( \
      kiln_kernel_registrar_, __COUNTER__)(::kiln::KernelDef{KILN_ABI_VERSION, op_name, dtypes, __VA_ARGS__})
// The same at a given tier:
//   KILN_REGISTER_TIERED_KERNEL(kiln::kTierOptimized, "aten::linear.default", "f32,f32", run, prepare, release);
#define KILN_REGISTER_TIERED_KERNEL(tier, op_name, dtypes, ...)                                     \
  static const ::kiln::internal::KernelRegistrar KILN_CONCAT_(kiln_kernel_registrar_, __COUNTER__)( \
      ::kiln::internal::at_tier(tier, ::kiln::KernelDef{KILN_ABI_VERSION, op_name, dtypes, __VA_ARGS__}))
