// aten::matmul.default: torch.matmul with 1-D operands and broadcast batch dims.
#include <algorithm>

#include "portable/gemm.h"
#include "common/kernel_args.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {

Status matmul_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::matmul.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", &b));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *a, "self", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, *b, "other", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  const int ad = a->dim(), bd = b->dim();
  KILN_CHECK_OR_RETURN(ad >= 1 && bd >= 1, KernelFailure, "%s: both arguments must be at least 1-D, got %s and %s",
                       op, describe(*a).c_str(), describe(*b).c_str());

  // A 1-D self is a row vector [1, K] and a 1-D other a column [K, 1]; the
  // unit dim is dropped from the result again.
  const int64_t m = ad == 1 ? 1 : a->size(-2), k = a->size(-1);
  const int64_t kb = bd == 1 ? b->size(0) : b->size(-2), n = bd == 1 ? 1 : b->size(-1);
  KILN_CHECK_OR_RETURN(k == kb, KernelFailure, "%s: cannot multiply %s by %s", op, describe(*a).c_str(),
                       describe(*b).c_str());

  // Broadcast the batch dims (everything before the last two).
  const int a_batch = std::max(ad - 2, 0), b_batch = std::max(bd - 2, 0);
  const int nb = std::max(a_batch, b_batch);
  GemmProblem p;
  Dims sizes;
  int64_t a_stride = m * k, b_stride = k * n;  // strides of the innermost batch dim
  for (int d = nb - 1; d >= 0; --d) {
    const int da = d - (nb - a_batch), db = d - (nb - b_batch);
    const int64_t sa = da >= 0 ? a->sizes()[da] : 1, sb = db >= 0 ? b->sizes()[db] : 1;
    KILN_CHECK_OR_RETURN(sa == sb || sa == 1 || sb == 1, KernelFailure,
                         "%s: batch dims of %s and %s are not broadcastable", op, describe(*a).c_str(),
                         describe(*b).c_str());
    p.batch_sizes[d] = std::max(sa, sb);
    if (sa == 0 || sb == 0) p.batch_sizes[d] = 0;
    p.a_batch_strides[d] = sa == 1 ? 0 : a_stride;
    p.b_batch_strides[d] = sb == 1 ? 0 : b_stride;
    a_stride *= sa;
    b_stride *= sb;
  }
  for (int d = 0; d < nb; ++d) sizes.push(p.batch_sizes[d]);
  if (ad >= 2) sizes.push(m);
  if (bd >= 2) sizes.push(n);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));

  p.batch_ndim = nb;
  p.m = m, p.n = n, p.k = k;
  if (bd <= 2 && ad >= 3) {
    // [..., M, K] @ [K, N]: the batch dims of self are just more rows.
    p.batch_ndim = 0;
    p.m = m * prod(a->sizes(), 0, ad - 2);
  }
  p.a = a->data_as<const float>(), p.a_rs = k, p.a_cs = 1;
  p.b = b->data_as<const float>(), p.b_rs = n, p.b_cs = 1;
  p.c = y.data_as<float>(), p.c_rs = n;
  p.c_batch_stride = m * n;
  p.overwrite = true;
  gemm(p);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::matmul.default", "f32,f32", matmul_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
