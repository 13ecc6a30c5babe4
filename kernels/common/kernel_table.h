// Kernels registered from a table, so that each operator's name is written once: its table entry
// holds the name, and the kernel for entry I (a template on I) reads its name and function there.
//
//   constexpr UnaryOp kOps[] = {{"aten::exp.default", UnaryMath::Exp}, ...};
//   template <size_t I> Status table_run(KernelContext&, Inputs, Outputs);  // uses kOps[I]
//   [[maybe_unused]] const bool kRegistered = register_kernel_table<std::size(kOps)>([](auto i) {
//     return KernelDef{KILN_ABI_VERSION, kOps[i].name, "f32", table_run<i>};
//   });
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "kiln/kernel.h"

namespace kiln {
namespace kernels {
namespace internal_table {
template <typename MakeDef, size_t... I>
bool register_each(MakeDef make_def, std::index_sequence<I...>) noexcept {
  // Like KILN_REGISTER_KERNEL: a collision is recorded by the registry, the others still register.
  ((void)register_kernel(make_def(std::integral_constant<size_t, I>{})), ...);
  return true;
}
}  // namespace internal_table

// Registers make_def(i) for every i < N, i a std::integral_constant (a constant expression, so
// that make_def can name the kernel template instance of entry i). Call it from a static
// initializer.
template <size_t N, typename MakeDef>
bool register_kernel_table(MakeDef make_def) noexcept {
  return internal_table::register_each(make_def, std::make_index_sequence<N>{});
}

}  // namespace kernels
}  // namespace kiln
