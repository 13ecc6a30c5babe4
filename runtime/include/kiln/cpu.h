// Instruction-set levels: what the CPU supports, and what optimized kernels may use.
#pragma once

#include <cstdint>

#include "kiln/api.h"

namespace kiln {

// Ordered within an architecture: a kernel written for a level runs on every
// higher one. Baseline is what the compiler targets by default (SSE2 on
// x86-64, plain C++ elsewhere).
enum class Isa : uint8_t {
  Baseline = 0,
  Avx2 = 1,    // x86-64: AVX2 and FMA3
  Avx512 = 2,  // x86-64: AVX-512 F, BW, DQ and VL
  Neon = 3,    // aarch64: Advanced SIMD with FMA (every aarch64 CPU)
};

// "baseline", "avx2", "avx512", "neon".
KILN_API const char* isa_name(Isa isa) noexcept;
// Inverse of isa_name; false for an unknown name.
KILN_API bool parse_isa(const char* name, Isa* out) noexcept;
// The highest level this CPU and operating system support.
KILN_API Isa detected_isa() noexcept;
// True if code for `isa` can run here (Baseline always can).
KILN_API bool isa_supported(Isa isa) noexcept;

}  // namespace kiln
