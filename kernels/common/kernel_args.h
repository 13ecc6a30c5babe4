// Kernel argument getters and checks: each failure is KernelFailure naming the operator and argument.
#pragma once

#include <cstdint>
#include <string>

#include "common/internal_api.h"
#include "kiln/kernel.h"
#include "shape_math.h"

namespace kiln {
namespace kernels {

using Inputs = Span<const Value* const>;
using Outputs = Span<Tensor* const>;

// ---- argument checks: each returns KernelFailure naming `op` and the argument.

// Also rejects outputs that share memory with a tensor argument (see check_no_alias).
KILN_INTERNAL_API Status check_arity(const char* op, Inputs in, Outputs out, size_t n_in, size_t n_out,
                                     bool extra_outputs_ok = false);
// Outputs may not share a byte with any tensor argument (tensor lists included),
// nor be the same Tensor. The memory planner never lets them (an instruction's
// inputs and outputs have overlapping lifetimes), so only a corrupt program
// does; a kernel resizing such an output would change its own input under it.
KILN_INTERNAL_API Status check_no_alias(const char* op, Inputs in, Outputs out);
// check_arity for kernels that may update `self` (argument 0) in place: output 0
// may be exactly self (same data pointer and dtype; the runtime aliases them to
// update state such as a KV cache without a copy). Any other sharing, and any
// partial overlap with self, is still refused. *in_place tells which case it is.
KILN_INTERNAL_API Status check_arity_inplace(const char* op, Inputs in, Outputs out, size_t n_in, size_t n_out,
                                             bool* in_place);
// Tensor arguments are checked with check_tensor.
KILN_INTERNAL_API Status tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out);
// For prepare: a tensor argument whose sizes are checked but not its storage. At method load a
// method input has its largest sizes and no data yet, so prepare reads only dtypes and sizes of
// non-constant tensors (run checks them with tensor_arg).
KILN_INTERNAL_API Status prepare_tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out);
// None -> *out = nullptr.
KILN_INTERNAL_API Status optional_tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out);
// For argument readers that both prepare and run call: prepare_tensor_arg when `at_prepare`, else
// tensor_arg (optional_tensor_arg).
KILN_INTERNAL_API Status tensor_arg(bool at_prepare, const char* op, Inputs in, size_t i, const char* name,
                                    const Tensor** out);
KILN_INTERNAL_API Status optional_tensor_arg(bool at_prepare, const char* op, Inputs in, size_t i, const char* name,
                                             const Tensor** out);
KILN_INTERNAL_API Status int_arg(const char* op, Inputs in, size_t i, const char* name, int64_t* out);
// None -> *present = false.
KILN_INTERNAL_API Status optional_int_arg(const char* op, Inputs in, size_t i, const char* name, int64_t* out,
                                          bool* present);
KILN_INTERNAL_API Status bool_arg(const char* op, Inputs in, size_t i, const char* name, bool* out);
// Int, Double or Bool as a double.
KILN_INTERNAL_API Status scalar_arg(const char* op, Inputs in, size_t i, const char* name, double* out);
KILN_INTERNAL_API Status optional_scalar_arg(const char* op, Inputs in, size_t i, const char* name, double* out,
                                             bool* present);
KILN_INTERNAL_API Status int_list_arg(const char* op, Inputs in, size_t i, const char* name, Span<const int64_t>* out);
// None -> *present = false.
KILN_INTERNAL_API Status optional_int_list_arg(const char* op, Inputs in, size_t i, const char* name,
                                               Span<const int64_t>* out, bool* present);
// An int[2] parameter (kernel_size, stride, ...): length 1 is repeated, a bare
// Int is accepted too; length 0 is allowed only when `empty_ok` (then *empty = true).
KILN_INTERNAL_API Status pair_arg(const char* op, Inputs in, size_t i, const char* name, int64_t out[2],
                                  bool empty_ok = false, bool* empty = nullptr);
KILN_INTERNAL_API Status string_arg(const char* op, Inputs in, size_t i, const char* name, const char** data,
                                    size_t* size);
// An optional ScalarType argument (None or Int holding a kiln ScalarType code).
KILN_INTERNAL_API Status optional_dtype_arg(const char* op, Inputs in, size_t i, const char* name, ScalarType* out,
                                            bool* present);

KILN_INTERNAL_API Status check_dtype(const char* op, const Tensor& t, const char* name, ScalarType expected);
KILN_INTERNAL_API Status check_same_dtype(const char* op, const Tensor& a, const char* an, const Tensor& b,
                                          const char* bn);
// Equal shapes.
inline bool same_sizes(Span<const int64_t> a, Span<const int64_t> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}
// Wraps a possibly negative dim into [0, rank); rank 0 accepts 0 and -1 like PyTorch.
KILN_INTERNAL_API Status wrap_dim(const char* op, int64_t dim, int rank, int64_t* out);
// The residual of a fused operator (kiln::fused_linear, kiln::fused_conv2d): None (null) or an f32
// tensor of exactly the output's shape.
KILN_INTERNAL_API Status check_residual(const char* op, const Tensor* residual, const Tensor& y);
// Resizes an output after check_shape (so no product of its sizes overflows),
// naming the op when it does not fit.
KILN_INTERNAL_API Status resize_output(const char* op, Tensor* out, Span<const int64_t> sizes);
// resize_output for an output whose size depends on the data (nonzero, masked_select, x[mask], unique):
// the exporter planned it for a bound, and a count beyond it is refused with a message that says so.
KILN_INTERNAL_API Status resize_data_dependent(const char* op, const char* what, Tensor* out,
                                               Span<const int64_t> sizes);

// Common prologue of dtype-agnostic copy kernels: self is a tensor, the output
// has its dtype, and the dtype has a known element size.
KILN_INTERNAL_API Status copy_setup(const char* op, Inputs in, Outputs out, size_t n_in, const Tensor** x);

// Common prologue of `y = f(x)` kernels: arity, x is a tensor of one of the
// dtypes `dispatch` accepts (checked by the caller), y has x's dtype and shape.
KILN_INTERNAL_API Status unary_setup(const char* op, Inputs in, Outputs out, size_t n_in, const Tensor** x);

}  // namespace kernels
}  // namespace kiln
