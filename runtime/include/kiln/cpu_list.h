// The one list of CPU features and instruction-set levels: kiln/cpu.h, the runtime's detection, the
// microkernel tables (kernels/optimized/isa_dispatch.h) and the build (cmake/KilnKernels.cmake, which
// reads each level's compiler flags from the lines below) all derive from it.
#pragma once

// KILN_CPU_FEATURE_LIST(X): X(Enum, "name", arch) for every feature kiln detects. Names are those
// of /proc/cpuinfo where it has one. The position of a feature is its bit in kiln::CpuFeatures and
// part of the ABI: append new features at the end, never reorder.
#define KILN_CPU_FEATURE_LIST(X)       \
  X(Sse2, "sse2", x86_64)              \
  X(Avx, "avx", x86_64)                \
  X(Avx2, "avx2", x86_64)              \
  X(Fma, "fma", x86_64)                \
  X(F16c, "f16c", x86_64)              \
  X(Avx512f, "avx512f", x86_64)        \
  X(Avx512bw, "avx512bw", x86_64)      \
  X(Avx512dq, "avx512dq", x86_64)      \
  X(Avx512vl, "avx512vl", x86_64)      \
  X(Avx512Vnni, "avx512_vnni", x86_64) \
  X(Avx512Bf16, "avx512_bf16", x86_64) \
  X(Avx512Fp16, "avx512_fp16", x86_64) \
  X(AvxVnni, "avx_vnni", x86_64)       \
  X(Neon, "neon", aarch64)             \
  X(Dotprod, "dotprod", aarch64)       \
  X(Fp16, "fp16", aarch64)             \
  X(Bf16, "bf16", aarch64)             \
  X(I8mm, "i8mm", aarch64)

// KILN_ISA_LEVEL_LIST(X, ctx): X(ctx, Enum, name, arch, value, features, "compiler flags") for every level
// that microkernels are compiled for. Within an architecture the list is in order of preference,
// lowest first: a method uses the last level whose features (a KILN_CPU_FEATURE_BIT expression)
// the CPU has, after LoadOptions::isa / KILN_ISA took away the features of higher levels. `value`
// is the level's kiln::Isa value (ABI: KernelContext::isa), unique and never reused; `name` is its
// spelling (isa_name, KILN_ISA) and the namespace of its microkernels; arch is x86_64, aarch64 or
// any; `ctx` is passed through to X. cmake/KilnKernels.cmake parses this: flags in one string literal.
#define KILN_ISA_LEVEL_LIST(X, ctx)                                                                                  \
  X(ctx, Baseline, baseline, any, 0, 0, "")                                                                          \
  X(ctx, Avx2, avx2, x86_64, 1, KILN_CPU_FEATURE_BIT(Avx2) | KILN_CPU_FEATURE_BIT(Fma) | KILN_CPU_FEATURE_BIT(F16c), \
    "-mavx2 -mfma -mf16c")                                                                                           \
  X(ctx, Avx512, avx512, x86_64, 2,                                                                                  \
    KILN_CPU_FEATURE_BIT(Avx2) | KILN_CPU_FEATURE_BIT(Fma) | KILN_CPU_FEATURE_BIT(F16c) |                            \
        KILN_CPU_FEATURE_BIT(Avx512f) | KILN_CPU_FEATURE_BIT(Avx512bw) | KILN_CPU_FEATURE_BIT(Avx512dq) |            \
        KILN_CPU_FEATURE_BIT(Avx512vl),                                                                              \
    "-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c")                                                \
  X(ctx, Avx512Vnni, avx512_vnni, x86_64, 4,                                                                         \
    KILN_CPU_FEATURE_BIT(Avx2) | KILN_CPU_FEATURE_BIT(Fma) | KILN_CPU_FEATURE_BIT(F16c) |                            \
        KILN_CPU_FEATURE_BIT(Avx512f) | KILN_CPU_FEATURE_BIT(Avx512bw) | KILN_CPU_FEATURE_BIT(Avx512dq) |            \
        KILN_CPU_FEATURE_BIT(Avx512vl) | KILN_CPU_FEATURE_BIT(Avx512Vnni),                                           \
    "-mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c")                                   \
  X(ctx, Neon, neon, aarch64, 3, KILN_CPU_FEATURE_BIT(Neon), "")

// The architecture kiln is compiled for, as the list's arch names it.
#define KILN_ISA_ARCH_any 1
#if defined(__x86_64__)
#define KILN_ISA_ARCH_x86_64 1
#else
#define KILN_ISA_ARCH_x86_64 0
#endif
#if defined(__aarch64__)
#define KILN_ISA_ARCH_aarch64 1
#else
#define KILN_ISA_ARCH_aarch64 0
#endif

// KILN_ISA_IF_ARCH(arch, ...) expands to its other arguments when compiling for `arch`.
#define KILN_ISA_IF_ARCH_0(...)
#define KILN_ISA_IF_ARCH_1(...) __VA_ARGS__
#define KILN_ISA_IF_ARCH_SELECT_(on, ...) KILN_ISA_IF_ARCH_##on(__VA_ARGS__)
#define KILN_ISA_IF_ARCH_EVAL_(on, ...) KILN_ISA_IF_ARCH_SELECT_(on, __VA_ARGS__)
#define KILN_ISA_IF_ARCH(arch, ...) KILN_ISA_IF_ARCH_EVAL_(KILN_ISA_ARCH_##arch, __VA_ARGS__)

// KILN_ISA_IF_BUILT(level, arch, ...): the same for a level this build compiled. A build that leaves
// levels out (CMake's KILN_ISA_LEVELS_BUILT) defines KILN_ISA_LEVELS_LIMITED and KILN_ISA_BUILT_<level>
// as 1 or 0 for every level (cmake/KilnKernels.cmake); any other build has every level of its arch.
#ifdef KILN_ISA_LEVELS_LIMITED
#define KILN_ISA_IF_BUILT(level, arch, ...) KILN_ISA_IF_ARCH_EVAL_(KILN_ISA_BUILT_##level, __VA_ARGS__)
#define KILN_ISA_LEVEL_BUILT(level, arch) (KILN_ISA_BUILT_##level == 1)
#else
#define KILN_ISA_IF_BUILT(level, arch, ...) KILN_ISA_IF_ARCH(arch, __VA_ARGS__)
#define KILN_ISA_LEVEL_BUILT(level, arch) (KILN_ISA_ARCH_##arch == 1)
#endif
