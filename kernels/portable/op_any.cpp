// any: is some element nonzero (NaN counts, as in PyTorch), over one dim, some dims or all of them.
#include "common/dtype_dispatch.h"
#include "common/reduction.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// `dims` empty with `all` set reduces every dim (any.default, any.dims with dim=None).
Status any_over(const char* op, const Tensor& x, Span<const int64_t> dims, bool all, bool keepdim, Tensor& y) {
  KILN_CHECK_OR_RETURN(y.dtype() == ScalarType::Bool || y.dtype() == ScalarType::UInt8, KernelFailure,
                       "%s: output must be bool (uint8 for a uint8 input), got %s", op, describe(y).c_str());
  ReductionPlan plan;
  KILN_RETURN_IF_ERROR(plan_reduction(op, x, dims, all, keepdim, &plan));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, plan.out_sizes.span()));
  const int64_t outputs = y.numel();
  uint8_t* yp = y.data_as<uint8_t>();  // bool and uint8 are both one byte of 0 or 1
  const bool ok = dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_as<const T>();
    for (int64_t o = 0; o < outputs; ++o) {
      bool any = false;
      plan.walk(xp + plan.offset_of(o), [&](double v) { any = any || v != 0.0 || v != v; });
      yp[o] = any ? 1 : 0;
    }
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(x).c_str());
  return Status::ok();
}

}  // namespace

// any.dim(self, int dim, bool keepdim)
Status any_dim_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::any.dim";
  const Tensor* x;
  int64_t dim;
  bool keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  return any_over(op, *x, Span<const int64_t>(&dim, 1), false, keepdim, *out[0]);
}

// any.dims(self, int[]? dim, bool keepdim): dim None (or []) reduces every dim.
Status any_dims_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::any.dims";
  const Tensor* x;
  Span<const int64_t> dims;
  bool present, keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_int_list_arg(op, in, 1, "dim", &dims, &present));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  return any_over(op, *x, dims, !present || dims.empty(), keepdim, *out[0]);
}

// any(self): every dim.
Status any_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::any.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 1, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  return any_over(op, *x, Span<const int64_t>(), true, false, *out[0]);
}

KILN_REGISTER_KERNEL("aten::any.dim", "*", any_dim_run);
KILN_REGISTER_KERNEL("aten::any.dims", "*", any_dims_run);
KILN_REGISTER_KERNEL("aten::any.default", "*", any_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
