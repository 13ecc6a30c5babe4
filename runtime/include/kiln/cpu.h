// CPU features and instruction-set levels: what the CPU supports, and what optimized kernels may use
// (and how precisely they may compute: GemmPrecision).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/api.h"
#include "kiln/cpu_list.h"

namespace kiln {

// One feature of the CPU (and of the operating system: the AVX and AVX-512 features count only when
// it saves their register state). The list and the names are in kiln/cpu_list.h.
enum class CpuFeature : uint8_t {
#define KILN_CPU_FEATURE_ENUM_(Enum, name, arch) Enum,
  KILN_CPU_FEATURE_LIST(KILN_CPU_FEATURE_ENUM_)
#undef KILN_CPU_FEATURE_ENUM_
};

// A set of features: bit f is CpuFeature f.
using CpuFeatures = uint64_t;
#define KILN_CPU_FEATURE_BIT(f) (::kiln::CpuFeatures{1} << static_cast<unsigned>(::kiln::CpuFeature::f))

// A level that microkernels are compiled for: a named set of features (cpu_list.h). Baseline is what
// the compiler targets by default (SSE2 on x86-64, plain C++ elsewhere) and runs everywhere.
enum class Isa : uint8_t {
#define KILN_ISA_ENUM_(ctx, Enum, name, arch, value, features, flags) Enum = value,
  KILN_ISA_LEVEL_LIST(KILN_ISA_ENUM_, )
#undef KILN_ISA_ENUM_
};

// "baseline", "avx2", "avx512", "avx512_vnni", "neon" (cpu_list.h); "unknown" for a value no level has.
KILN_API const char* isa_name(Isa isa) noexcept;
// Inverse of isa_name over every level of every architecture; false for an unknown name.
KILN_API bool parse_isa(const char* name, Isa* out) noexcept;
// The features a level's microkernels are compiled with, 0 for an unknown value.
KILN_API CpuFeatures isa_features(Isa isa) noexcept;
// True if `isa` is a level of the architecture this library was built for, and the build compiled it
// (a build may leave levels out: KILN_ISA_LEVELS_BUILT in CMakeLists.txt).
KILN_API bool isa_of_this_architecture(Isa isa) noexcept;
// The levels of this architecture that this build compiled, lowest first.
KILN_API std::vector<Isa> isa_levels();
// The levels of this architecture whose features this CPU has, lowest first (Baseline always).
KILN_API std::vector<Isa> supported_isas();
// The highest level of this architecture whose features are all in `available`.
KILN_API Isa best_isa(CpuFeatures available) noexcept;
// The highest level this CPU and operating system support: best_isa(detected_cpu_features()).
KILN_API Isa detected_isa() noexcept;
// True if code for `isa` can run here (Baseline always can).
KILN_API bool isa_supported(Isa isa) noexcept;

// "avx512_vnni", "dotprod", ... (cpu_list.h); "unknown" for a value no feature has.
KILN_API const char* cpu_feature_name(CpuFeature feature) noexcept;
// Inverse of cpu_feature_name; false for an unknown name.
KILN_API bool parse_cpu_feature(const char* name, CpuFeature* out) noexcept;
// The features of this architecture that kiln knows, in list order.
KILN_API std::vector<CpuFeature> cpu_feature_list();
// What this CPU and operating system support (read once: CPUID and XGETBV on x86-64, the
// auxiliary vector's HWCAP words on aarch64).
KILN_API CpuFeatures detected_cpu_features() noexcept;

// What a program's products with a constant weight (linear, mm, addmm, matmul) may round their operands to
// (LoadOptions::gemm_precision):
// Float32 computes in float32; Bfloat16 rounds both operands of each product to bfloat16 and sums in
// float32 (docs/kernels.md, "bfloat16 GEMMs"). Kernels that do not implement a precision ignore it.
enum class GemmPrecision : uint8_t { Float32, Bfloat16 };

}  // namespace kiln
