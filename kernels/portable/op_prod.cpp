// prod: the product over one dim or all of them. The exporter casts self to the output dtype
// (integers and bools multiply in int64, as in PyTorch); integers wrap like PyTorch's.
#include <type_traits>

#include "common/dtype_dispatch.h"
#include "common/reduction.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

Status prod_over(const char* op, const Tensor& x, Span<const int64_t> dims, bool keepdim, Tensor& y) {
  KILN_RETURN_IF_ERROR(check_same_dtype(op, x, "self", y, "output"));
  ReductionPlan plan;
  KILN_RETURN_IF_ERROR(plan_reduction(op, x, dims, true, keepdim, &plan));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, plan.out_sizes.span()));
  const int64_t outputs = y.numel();
  const ScalarType t = x.dtype();
  KILN_CHECK_OR_RETURN(
      t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Int64 || t == ScalarType::Int32,
      KernelFailure, "%s: unsupported dtype %s", op, describe(x).c_str());
  dispatch_real(t, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_as<const T>();
    T* yp = y.data_as<T>();
    for (int64_t o = 0; o < outputs; ++o) {
      const T* base = xp + plan.offset_of(o);
      if constexpr (std::is_floating_point_v<T>) {
        double acc = 1.0;  // walk hands out doubles: exact for f32 and f64 values
        plan.walk(base, [&](double v) { acc *= v; });
        yp[o] = static_cast<T>(acc);
      } else {
        // Integers are multiplied as integers (a double would round above 2^53), wrapping.
        using U = std::make_unsigned_t<T>;
        U acc = 1;
        int64_t idx[kMaxDims] = {}, off = 0;
        for (int64_t q = 0; q < plan.count; ++q) {
          acc = static_cast<U>(acc * static_cast<U>(base[off]));
          for (int d = plan.n_reduced - 1; d >= 0; --d) {
            off += plan.reduced_strides[d];
            if (++idx[d] < plan.reduced_sizes[d]) break;
            off -= plan.reduced_sizes[d] * plan.reduced_strides[d];
            idx[d] = 0;
          }
        }
        yp[o] = static_cast<T>(acc);
      }
    }
  });
  return Status::ok();
}

}  // namespace

// prod.dim_int(self, int dim, bool keepdim, ScalarType? dtype)
Status prod_dim_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::prod.dim_int";
  const Tensor* x;
  int64_t dim;
  bool keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 4, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  return prod_over(op, *x, Span<const int64_t>(&dim, 1), keepdim, *out[0]);
}

// prod(self, ScalarType? dtype): every dim.
Status prod_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::prod.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  return prod_over(op, *x, Span<const int64_t>(), false, *out[0]);
}

KILN_REGISTER_KERNEL("aten::prod.dim_int", "f32|f64|i64|i32", prod_dim_run);
KILN_REGISTER_KERNEL("aten::prod.default", "f32|f64|i64|i32", prod_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
