// CPU feature detection for kiln/cpu.h.
#include "kiln/cpu.h"

#include <cstring>
#include <initializer_list>

namespace kiln {

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::Baseline: return "baseline";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Neon: return "neon";
  }
  return "unknown";
}

bool parse_isa(const char* name, Isa* out) noexcept {
  for (Isa isa : {Isa::Baseline, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (name != nullptr && std::strcmp(name, isa_name(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

Isa detected_isa() noexcept {
#if defined(__x86_64__)
  // libgcc's checks include the operating system's support (XGETBV) for the
  // AVX and AVX-512 register state, not only the CPUID bits.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return Isa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
  return Isa::Baseline;
#elif defined(__aarch64__)
  return Isa::Neon;
#else
  return Isa::Baseline;
#endif
}

bool isa_supported(Isa isa) noexcept {
  const Isa best = detected_isa();
  if (isa == Isa::Baseline) return true;
  if (isa == Isa::Neon) return best == Isa::Neon;
  return best != Isa::Neon && static_cast<uint8_t>(isa) <= static_cast<uint8_t>(best);
}

}  // namespace kiln
