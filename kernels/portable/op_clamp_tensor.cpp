// clamp.Tensor: clamp with broadcast tensor bounds (either may be None).
#include "common/broadcast.h"
#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// min(max(x, lo), hi) as ATen's CPU kernel: a NaN in x or in a given bound gives NaN; lo > hi gives hi.
template <typename T>
T clamp_value(T v, T lo, T hi, bool has_lo, bool has_hi) {
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v || (has_lo && lo != lo)) return has_lo && lo != lo ? lo : v;
    if (has_hi && hi != hi) return hi;
  }
  if (has_lo && v < lo) v = lo;
  if (has_hi && v > hi) v = hi;
  return v;
}

template <typename T>
void clamp_typed(const Tensor& x, const Tensor* lo, const Tensor* hi, Tensor& y, const Dims& sizes) {
  // A missing bound is replaced by x in the plan and never read.
  const Tensor* ins[3] = {&x, lo != nullptr ? lo : &x, hi != nullptr ? hi : &x};
  const BroadcastPlan<3> plan = make_broadcast_plan<3>(sizes, ins);
  const T* xp = x.data_as<const T>();
  const T* lp = ins[1]->data_as<const T>();
  const T* hp = ins[2]->data_as<const T>();
  T* yp = y.data_as<T>();
  const bool has_lo = lo != nullptr, has_hi = hi != nullptr;
  const int last = plan.ndim - 1;
  const int64_t sx = plan.strides[0][last], sl = plan.strides[1][last], sh = plan.strides[2][last];
  parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      yp[o + i] = clamp_value(xp[off[0] + i * sx], lp[off[1] + i * sl], hp[off[2] + i * sh], has_lo, has_hi);
  });
}

}  // namespace

// clamp.Tensor(self, min: Tensor?, max: Tensor?); the exporter casts every tensor to the output dtype.
Status clamp_tensor_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::clamp.Tensor";
  const Tensor *x, *lo, *hi;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 1, "min", &lo));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "max", &hi));
  KILN_CHECK_OR_RETURN(lo != nullptr || hi != nullptr, KernelFailure, "%s: min and max cannot both be None", op);
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  if (lo != nullptr) KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *lo, "min"));
  if (hi != nullptr) KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *hi, "max"));
  const Tensor* ins[3] = {x, lo != nullptr ? lo : x, hi != nullptr ? hi : x};
  Dims sizes;
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 3, &sizes));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (y.numel() == 0) return Status::ok();
  const bool ok = dispatch_real(x->dtype(), [&](auto tag) { clamp_typed<decltype(tag)>(*x, lo, hi, y, sizes); });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::clamp.Tensor", "*", clamp_tensor_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
