// Masked selection with broadcasting: where.self and masked_fill.Scalar.
#include "common/broadcast.h"
#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// Picks between two same-dtype operands element by element; T only fixes the width.
template <typename T>
void select_into(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y, const Dims& sizes) {
  const Tensor* ins[3] = {&cond, &a, &b};
  const BroadcastPlan<3> plan = make_broadcast_plan<3>(sizes, ins);
  // Bool bytes are read as bytes: a corrupt program may store any value there.
  const uint8_t* cp = cond.data_as<const uint8_t>();
  const T* ap = a.data_as<const T>();
  const T* bp = b.data_as<const T>();
  T* yp = y.data_as<T>();
  const int last = plan.ndim - 1;
  const int64_t sc = plan.strides[0][last], sa = plan.strides[1][last], sb = plan.strides[2][last];
  parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) yp[o + i] = cp[off[0] + i * sc] != 0 ? ap[off[1] + i * sa] : bp[off[2] + i * sb];
  });
}

void select_by_width(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y, const Dims& sizes) {
  switch (element_size(a.dtype())) {
    case 1: select_into<uint8_t>(cond, a, b, y, sizes); break;
    case 2: select_into<uint16_t>(cond, a, b, y, sizes); break;
    case 4: select_into<uint32_t>(cond, a, b, y, sizes); break;
    default: select_into<uint64_t>(cond, a, b, y, sizes); break;
  }
}

}  // namespace

Status where_self_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::where.self";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  const Tensor *cond, *a, *b;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "condition", &cond));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "other", &b));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *cond, "condition", ScalarType::Bool));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *a, "self", *b, "other"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *a, "self", y, "output"));
  KILN_CHECK_OR_RETURN(element_size(a->dtype()) > 0, KernelFailure, "%s: unknown dtype %s", op, describe(*a).c_str());
  const Tensor* ins[3] = {cond, a, b};
  Dims sizes;
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 3, &sizes));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  select_by_width(*cond, *a, *b, y, sizes);
  return Status::ok();
}

Status masked_fill_scalar_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::masked_fill.Scalar";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  const Tensor *x, *mask;
  double value;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "mask", &mask));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "value", &value));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *mask, "mask", ScalarType::Bool));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  const Tensor* ins[2] = {x, mask};
  Dims sizes;
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 2, &sizes));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T fill = saturate_cast<T>(value);
    const Tensor* ins2[2] = {x, mask};
    const BroadcastPlan<2> plan = make_broadcast_plan<2>(sizes, ins2);
    const T* xp = x->data_as<const T>();
    const uint8_t* mp = mask->data_as<const uint8_t>();  // any byte, see select_into
    T* yp = y.data_as<T>();
    const int64_t sx = plan.strides[0][plan.ndim - 1], sm = plan.strides[1][plan.ndim - 1];
    parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t n) {
      for (int64_t i = 0; i < n; ++i) yp[o + i] = mp[off[1] + i * sm] != 0 ? fill : load(xp + off[0] + i * sx);
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::where.self", "*", where_self_run);
KILN_REGISTER_KERNEL("aten::masked_fill.Scalar", "*", masked_fill_scalar_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
