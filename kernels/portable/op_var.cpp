// var.correction: the variance over dims with a correction (Bessel's by default), two passes in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/kernel_args.h"
#include "common/reduction.h"
#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

template <typename T>
void var_typed(const Tensor& x, Tensor& y, const ReductionPlan& plan, double correction) {
  const T* xp = x.data_as<const T>();
  T* yp = y.data_as<T>();
  // sum / max(count - correction, 0), as ATen: a zero divisor gives inf or NaN.
  const double divisor = std::max(static_cast<double>(plan.count) - correction, 0.0);
  parallel_for(plan.kept.numel(), grain_for(2 * plan.count), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T* base = xp + plan.offset_of(o);
      double sum = 0;
      plan.walk(base, [&](double v) { sum += v; });
      const double mean = sum / static_cast<double>(plan.count);  // NaN for no elements
      double sq = 0;
      plan.walk(base, [&](double v) { sq += (v - mean) * (v - mean); });
      yp[o] = static_cast<T>(plan.count == 0 ? std::numeric_limits<double>::quiet_NaN() : sq / divisor);
    }
  });
}

}  // namespace

// var.correction(self, dim: int[]?, *, correction: Scalar?, keepdim: bool); no dims (None or []) reduces all.
Status var_correction_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::var.correction";
  const Tensor* x;
  Span<const int64_t> dims;
  bool has_dims, has_correction, keepdim;
  double correction = 1;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 4, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_int_list_arg(op, in, 1, "dim", &dims, &has_dims));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 2, "correction", &correction, &has_correction));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "keepdim", &keepdim));
  if (!has_correction) correction = 1;
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  const ScalarType t = x->dtype();
  KILN_CHECK_OR_RETURN(t == ScalarType::Float32 || t == ScalarType::Float64, KernelFailure,
                       "%s: self must be f32 or f64, got %s", op, describe(*x).c_str());
  KILN_CHECK_OR_RETURN(correction == correction, KernelFailure, "%s: correction is NaN", op);
  ReductionPlan plan;
  KILN_RETURN_IF_ERROR(plan_reduction(op, *x, dims, true, keepdim, &plan));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, plan.out_sizes.span()));
  if (y.numel() == 0) return Status::ok();
  if (t == ScalarType::Float32)
    var_typed<float>(*x, y, plan, correction);
  else
    var_typed<double>(*x, y, plan, correction);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::var.correction", "f32|f64", var_correction_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
