// logsumexp.default: log(sum(exp(x))) over dims, shifted by the maximum as ATen does.
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
void logsumexp_typed(const Tensor& x, Tensor& y, const ReductionPlan& plan) {
  const T* xp = x.data_as<const T>();
  T* yp = y.data_as<T>();
  parallel_for(plan.kept.numel(), grain_for(plan.count), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      if (plan.count == 0) {  // the sum of no exponentials is 0
        yp[o] = -std::numeric_limits<T>::infinity();
        continue;
      }
      const T* base = xp + plan.offset_of(o);
      // Pass 1: the maximum (NaN wins); pass 2: the shifted sum, in double.
      double m = -std::numeric_limits<double>::infinity();
      plan.walk(base, [&](double v) {
        if (v != v)
          m = v;
        else if (m == m && v > m)
          m = v;
      });
      if (std::isinf(m)) m = 0;  // all -inf: log(0) = -inf; an inf: inf
      double sum = 0;
      plan.walk(base, [&](double v) { sum += std::exp(v - m); });
      yp[o] = static_cast<T>(std::log(sum) + m);
    }
  });
}

}  // namespace

// logsumexp(self, dim: int[], keepdim: bool); self is f32/f64 (the exporter casts integers).
Status logsumexp_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::logsumexp.default";
  const Tensor* x;
  Span<const int64_t> dims;
  bool keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *out[0], "output"));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "dim", &dims));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  const ScalarType t = x->dtype();
  KILN_CHECK_OR_RETURN(t == ScalarType::Float32 || t == ScalarType::Float64, KernelFailure,
                       "%s: self must be f32 or f64, got %s", op, describe(*x).c_str());
  // An empty dim list: ATen reduces a 0-d tensor's one element (the result is the element) and
  // fails for other ranks; refuse those rather than guess.
  KILN_CHECK_OR_RETURN(!dims.empty() || x->dim() == 0, KernelFailure,
                       "%s: dim must name at least one dim of a %lld-d tensor", op, static_cast<long long>(x->dim()));
  ReductionPlan plan;
  KILN_RETURN_IF_ERROR(plan_reduction(op, *x, dims, false, keepdim, &plan));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(resize_output(op, &y, plan.out_sizes.span()));
  if (y.numel() == 0) return Status::ok();
  if (t == ScalarType::Float32)
    logsumexp_typed<float>(*x, y, plan);
  else
    logsumexp_typed<double>(*x, y, plan);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::logsumexp.default", "f32|f64", logsumexp_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
