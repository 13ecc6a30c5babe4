// One place that maps an instruction-set level to the microkernels built for it.
//
// Each microkernel family (microkernels/<family>.inc) is compiled once per
// level of the target architecture (the levels of kiln/cpu_list.h), in namespace
// kiln::kernels::optimized::<level>, with that level's compiler flags
// (cmake/KilnKernels.cmake). A family describes what it provides as a table type and
// names one table per level with KILN_ISA_TABLE; operators call
// <name>_for(ctx.isa) and never test CPU features themselves.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/internal_api.h"
#include "kiln/cpu.h"

namespace kiln::kernels {
// Bit v is set once a <name>_for call has returned the tables of the level whose Isa value is v:
// what the kernel test harness reads to prove which levels' code ran, so that a dispatch that
// falls back to another level fails it (tests/cpp/kernels/harness.cpp). One word for the whole
// process, libkiln.so.0's (isa_dispatch.cpp); it is only written the first time a bit is set.
KILN_INTERNAL_API extern std::atomic<uint64_t> g_isa_dispatch_log;
inline void log_isa_dispatch(Isa isa) noexcept {
  const uint64_t bit = uint64_t{1} << static_cast<unsigned>(isa);
  if ((g_isa_dispatch_log.load(std::memory_order_relaxed) & bit) == 0) {
    g_isa_dispatch_log.fetch_or(bit, std::memory_order_relaxed);
  }
}
}  // namespace kiln::kernels

// Per level of the list (cpu_list.h): `t` is the table's (Type, name, attribute).
#define KILN_ISA_EXTERN_(Type, name, attr) attr extern const Type name;
#define KILN_ISA_NAME_(Type, name, attr) name
#define KILN_ISA_DECLARE_LEVEL_(t, Enum, level, arch, value, features, flags) \
  KILN_ISA_IF_BUILT(level, arch, namespace level{KILN_ISA_EXTERN_ t})
#define KILN_ISA_CASE_LEVEL_(t, Enum, level, arch, value, features, flags)                                      \
  KILN_ISA_IF_BUILT(level, arch, case ::kiln::Isa::Enum : ::kiln::kernels::log_isa_dispatch(::kiln::Isa::Enum); \
                    return level::KILN_ISA_NAME_ t;)

// Declares `name` in every level's namespace and defines `name_for(Isa)`,
// which returns the table of that level (the baseline one for a level this
// build does not compile). Use inside namespace kiln::kernels::optimized.
#define KILN_ISA_TABLE(Type, name) KILN_ISA_TABLE_WITH_(Type, name, )
// The same, exported to extension libraries (KILN_INTERNAL_API).
#define KILN_INTERNAL_ISA_TABLE(Type, name) KILN_ISA_TABLE_WITH_(Type, name, KILN_INTERNAL_API)

#define KILN_ISA_TABLE_WITH_(Type, name, attr)                                                  \
  KILN_ISA_LEVEL_LIST(KILN_ISA_DECLARE_LEVEL_, (Type, name, attr))                              \
  inline const Type& name##_for(::kiln::Isa isa) {                                              \
    switch (isa) {                                                                              \
      KILN_ISA_LEVEL_LIST(KILN_ISA_CASE_LEVEL_, (Type, name, attr))                             \
      default: ::kiln::kernels::log_isa_dispatch(::kiln::Isa::Baseline); return baseline::name; \
    }                                                                                           \
  }
