// CPU feature detection and the instruction-set levels of kiln/cpu.h, derived from kiln/cpu_list.h.
#include "kiln/cpu.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace kiln {
namespace {

struct LevelInfo {
  Isa isa;
  const char* name;
  bool this_arch;
  CpuFeatures features;
};

// this_arch: a level of this architecture that this build compiled (KILN_ISA_LEVELS_BUILT).
constexpr LevelInfo kLevels[] = {
#define KILN_LEVEL_INFO_(ctx, Enum, name, arch, value, features, flags) \
  {Isa::Enum, #name, KILN_ISA_LEVEL_BUILT(name, arch), features},
    KILN_ISA_LEVEL_LIST(KILN_LEVEL_INFO_, )
#undef KILN_LEVEL_INFO_
};

struct FeatureInfo {
  CpuFeature feature;
  const char* name;
  bool this_arch;
};

constexpr FeatureInfo kFeatures[] = {
#define KILN_FEATURE_INFO_(Enum, name, arch) {CpuFeature::Enum, name, KILN_ISA_ARCH_##arch == 1},
    KILN_CPU_FEATURE_LIST(KILN_FEATURE_INFO_)
#undef KILN_FEATURE_INFO_
};
static_assert(sizeof(kFeatures) / sizeof(kFeatures[0]) <= 64, "CpuFeatures holds 64 features");

const LevelInfo* level_info(Isa isa) {
  for (const LevelInfo& l : kLevels) {
    if (l.isa == isa) return &l;
  }
  return nullptr;
}

constexpr CpuFeatures bit(CpuFeature f) { return CpuFeatures{1} << static_cast<unsigned>(f); }

#if defined(__x86_64__)
// XCR0: which register state the operating system saves on a context switch. CPUID says what the
// CPU has; without the OS saving the registers, using them corrupts other threads' values.
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  CpuFeatures f = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return bit(CpuFeature::Sse2);  // x86-64 always has SSE2
  const unsigned c1 = c, d1 = d;
  if (d1 & (1u << 26)) f |= bit(CpuFeature::Sse2);
  const bool osxsave = (c1 & (1u << 27)) != 0;
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool avx_state = (xcr0 & 0x6) == 0x6;                    // XMM and YMM
  const bool avx512_state = avx_state && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM0-15 upper halves, ZMM16-31
  if (!avx_state) return f;
  if (c1 & (1u << 28)) f |= bit(CpuFeature::Avx);
  if (c1 & (1u << 12)) f |= bit(CpuFeature::Fma);
  if (c1 & (1u << 29)) f |= bit(CpuFeature::F16c);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned max_sub = a, b7 = b, c7 = c, d7 = d;
  unsigned a71 = 0;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    a71 = a;
  }
  if (b7 & (1u << 5)) f |= bit(CpuFeature::Avx2);
  if (a71 & (1u << 4)) f |= bit(CpuFeature::AvxVnni);
  if (!avx512_state) return f;
  if (b7 & (1u << 16)) f |= bit(CpuFeature::Avx512f);
  if (b7 & (1u << 17)) f |= bit(CpuFeature::Avx512dq);
  if (b7 & (1u << 30)) f |= bit(CpuFeature::Avx512bw);
  if (b7 & (1u << 31)) f |= bit(CpuFeature::Avx512vl);
  if (c7 & (1u << 11)) f |= bit(CpuFeature::Avx512Vnni);
  if (d7 & (1u << 23)) f |= bit(CpuFeature::Avx512Fp16);
  if (a71 & (1u << 5)) f |= bit(CpuFeature::Avx512Bf16);
  return f;
}
#elif defined(__aarch64__)
CpuFeatures detect() {
  CpuFeatures f = bit(CpuFeature::Neon);  // Advanced SIMD is part of every aarch64 CPU
#if defined(__linux__)
  // Bit numbers of the Linux aarch64 ABI (asm/hwcap.h), spelled out for old kernel headers.
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  if (hwcap & (1ul << 10)) f |= bit(CpuFeature::Fp16);     // HWCAP_ASIMDHP
  if (hwcap & (1ul << 20)) f |= bit(CpuFeature::Dotprod);  // HWCAP_ASIMDDP
  if (hwcap2 & (1ul << 13)) f |= bit(CpuFeature::I8mm);    // HWCAP2_I8MM
  if (hwcap2 & (1ul << 14)) f |= bit(CpuFeature::Bf16);    // HWCAP2_BF16
#endif
  return f;
}
#else
CpuFeatures detect() { return 0; }
#endif

}  // namespace

const char* isa_name(Isa isa) noexcept {
  const LevelInfo* l = level_info(isa);
  return l != nullptr ? l->name : "unknown";
}

bool parse_isa(const char* name, Isa* out) noexcept {
  if (name == nullptr) return false;
  for (const LevelInfo& l : kLevels) {
    if (std::strcmp(name, l.name) == 0) {
      *out = l.isa;
      return true;
    }
  }
  return false;
}

CpuFeatures isa_features(Isa isa) noexcept {
  const LevelInfo* l = level_info(isa);
  return l != nullptr ? l->features : 0;
}

bool isa_of_this_architecture(Isa isa) noexcept {
  const LevelInfo* l = level_info(isa);
  return l != nullptr && l->this_arch;
}

std::vector<Isa> isa_levels() {
  std::vector<Isa> out;
  for (const LevelInfo& l : kLevels) {
    if (l.this_arch) out.push_back(l.isa);
  }
  return out;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  const CpuFeatures have = detected_cpu_features();
  for (const LevelInfo& l : kLevels) {
    if (l.this_arch && (l.features & ~have) == 0) out.push_back(l.isa);
  }
  return out;
}

Isa best_isa(CpuFeatures available) noexcept {
  Isa best = Isa::Baseline;
  for (const LevelInfo& l : kLevels) {
    if (l.this_arch && (l.features & ~available) == 0) best = l.isa;
  }
  return best;
}

Isa detected_isa() noexcept { return best_isa(detected_cpu_features()); }

bool isa_supported(Isa isa) noexcept {
  const LevelInfo* l = level_info(isa);
  return l != nullptr && l->this_arch && (l->features & ~detected_cpu_features()) == 0;
}

const char* cpu_feature_name(CpuFeature feature) noexcept {
  for (const FeatureInfo& f : kFeatures) {
    if (f.feature == feature) return f.name;
  }
  return "unknown";
}

bool parse_cpu_feature(const char* name, CpuFeature* out) noexcept {
  if (name == nullptr) return false;
  for (const FeatureInfo& f : kFeatures) {
    if (std::strcmp(name, f.name) == 0) {
      *out = f.feature;
      return true;
    }
  }
  return false;
}

std::vector<CpuFeature> cpu_feature_list() {
  std::vector<CpuFeature> out;
  for (const FeatureInfo& f : kFeatures) {
    if (f.this_arch) out.push_back(f.feature);
  }
  return out;
}

CpuFeatures detected_cpu_features() noexcept {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace kiln
