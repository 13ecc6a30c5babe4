// One place that maps an instruction-set level to the microkernels built for it.
//
// Each microkernel family (microkernels/<family>.inc) is compiled once per
// level of the target architecture, in namespace
// kiln::kernels::optimized::<level>, with that level's compiler flags
// (kernels/optimized/CMakeLists.txt). A family describes what it provides as a
// table type and names one table per level with KILN_ISA_TABLE; operators call
// <name>_for(ctx.isa) and never test CPU features themselves.
#pragma once

#include "kiln/cpu.h"

#if defined(__x86_64__)
#define KILN_ISA_DECLARE_X86_(Type, name)   \
  namespace avx2 { extern const Type name; } \
  namespace avx512 { extern const Type name; }
#define KILN_ISA_CASES_X86_(name) \
  case Isa::Avx2: return avx2::name; \
  case Isa::Avx512: return avx512::name;
#else
#define KILN_ISA_DECLARE_X86_(Type, name)
#define KILN_ISA_CASES_X86_(name)
#endif

#if defined(__aarch64__)
#define KILN_ISA_DECLARE_ARM_(Type, name) namespace neon { extern const Type name; }
#define KILN_ISA_CASES_ARM_(name) case Isa::Neon: return neon::name;
#else
#define KILN_ISA_DECLARE_ARM_(Type, name)
#define KILN_ISA_CASES_ARM_(name)
#endif

// Declares `name` in every level's namespace and defines `name_for(Isa)`,
// which returns the table of that level (the baseline one for a level this
// architecture does not build). Use inside namespace kiln::kernels::optimized.
#define KILN_ISA_TABLE(Type, name)                  \
  namespace baseline { extern const Type name; }    \
  KILN_ISA_DECLARE_X86_(Type, name)                 \
  KILN_ISA_DECLARE_ARM_(Type, name)                 \
  inline const Type& name##_for(::kiln::Isa isa) {  \
    using ::kiln::Isa;                              \
    switch (isa) {                                  \
      KILN_ISA_CASES_X86_(name)                     \
      KILN_ISA_CASES_ARM_(name)                     \
      default: return baseline::name;               \
    }                                               \
  }
