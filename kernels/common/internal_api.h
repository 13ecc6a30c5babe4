// KILN_INTERNAL_API: the kernel helpers libkiln.so.0 exports to the project's extension libraries.
//
// The runtime exports its public API (KILN_API, version node KILN_0). Extension libraries of this
// project (extensions/quantized) also build on a few kernel helpers (argument readers, checked
// shape arithmetic, the f32 GEMM and its microkernel tables): those are exported under the version
// node KILN_INTERNAL_0 (runtime/kiln.map), so that each is compiled once, into the runtime, and
// every library of the process runs the same copy. They are not public API: their headers stay in
// the source tree (kernels/), and only libraries built with the runtime, from the same commit, may
// use them (docs/architecture.md). In a static build nothing is exported.
#pragma once

#if defined(KILN_STATIC)
#define KILN_INTERNAL_API
#else
#define KILN_INTERNAL_API [[gnu::visibility("default")]]
#endif

#include <cstdint>

// An ELF note (owner "kiln", type "KLN2", the tag as its description) in every object that holds
// kernel code the process must have once: the runtime's detection ignores it, but
// tools/check_single_runtime.py finds a second copy by it, in a stripped library with hidden
// symbols too (the runtime's own note, single_runtime.cpp, does the same for the registries).
namespace kiln::kernels {
struct KernelCodeNote {
  uint32_t name_size;
  uint32_t desc_size;
  uint32_t type;
  char name[8];   // "kiln\0", padded to a multiple of 4
  char desc[16];  // the tag, NUL-padded
};
constexpr uint32_t kKernelCodeNoteType = 0x4b4c4e32;  // "KLN2"
}  // namespace kiln::kernels

// At namespace scope of one .cpp file; `tag` (at most 15 characters) names the code in reports.
#define KILN_KERNEL_CODE_NOTE(tag)                                                                                    \
  namespace {                                                                                                         \
  __attribute__((used, section(".note.kiln.kernels"), aligned(4)))                                                    \
  const ::kiln::kernels::KernelCodeNote kiln_kernel_code_note = {5, 16, ::kiln::kernels::kKernelCodeNoteType, "kiln", \
                                                                 tag};                                                \
  static_assert(sizeof(tag) <= 16, "a kernel code note's tag has at most 15 characters");                             \
  }
