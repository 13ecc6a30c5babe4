// Shape checks of the matrix products (matmul_args.h).
#include "matmul_args.h"

#include <algorithm>

namespace kiln {
namespace kernels {

namespace {

Status check_f32(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn, const Tensor& y) {
  KILN_RETURN_IF_ERROR(check_dtype(op, a, an, ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, b, bn, ScalarType::Float32));
  return check_dtype(op, y, "output", ScalarType::Float32);
}

}  // namespace

Status mm_shapes(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn, const Tensor& y,
                 MatmulShapes* s) {
  KILN_RETURN_IF_ERROR(check_f32(op, a, an, b, bn, y));
  KILN_CHECK_OR_RETURN(a.dim() == 2, KernelFailure, "%s: %s must be 2-D, got %s", op, an, describe(a).c_str());
  KILN_CHECK_OR_RETURN(b.dim() == 2, KernelFailure, "%s: %s must be 2-D, got %s", op, bn, describe(b).c_str());
  KILN_CHECK_OR_RETURN(a.size(1) == b.size(0), KernelFailure, "%s: cannot multiply %s by %s", op, describe(a).c_str(),
                       describe(b).c_str());
  *s = MatmulShapes();
  s->m = a.size(0), s->k = a.size(1), s->n = b.size(1);
  KILN_RETURN_IF_ERROR(checked_mul(op, "the output's rows times columns", s->m, s->n, &s->c_batch_stride));
  s->out_sizes.push(s->m);
  s->out_sizes.push(s->n);
  return Status::ok();
}

namespace {

Status bmm_shapes(const char* op, const Tensor& a, const Tensor& b, const Tensor& y, MatmulShapes* s) {
  KILN_RETURN_IF_ERROR(check_f32(op, a, "self", b, "mat2", y));
  KILN_CHECK_OR_RETURN(a.dim() == 3, KernelFailure, "%s: self must be 3-D, got %s", op, describe(a).c_str());
  KILN_CHECK_OR_RETURN(b.dim() == 3, KernelFailure, "%s: mat2 must be 3-D, got %s", op, describe(b).c_str());
  KILN_CHECK_OR_RETURN(a.size(0) == b.size(0) && a.size(2) == b.size(1), KernelFailure, "%s: cannot multiply %s by %s",
                       op, describe(a).c_str(), describe(b).c_str());
  *s = MatmulShapes();
  s->m = a.size(1), s->k = a.size(2), s->n = b.size(2);
  s->batch_ndim = 1;
  s->batch_sizes[0] = a.size(0);
  // Saturating operand strides: only a batch of 0 can make them overflow, and then nothing is read.
  s->a_batch_strides[0] = sat_mul(s->m, s->k);
  s->b_batch_strides[0] = sat_mul(s->k, s->n);
  KILN_RETURN_IF_ERROR(checked_mul(op, "the output's rows times columns", s->m, s->n, &s->c_batch_stride));
  s->out_sizes.push(a.size(0));
  s->out_sizes.push(s->m);
  s->out_sizes.push(s->n);
  return Status::ok();
}

Status matmul_shapes(const char* op, const Tensor& a, const Tensor& b, const Tensor& y, MatmulShapes* s) {
  KILN_RETURN_IF_ERROR(check_f32(op, a, "self", b, "other", y));
  const int ad = a.dim(), bd = b.dim();
  KILN_CHECK_OR_RETURN(ad >= 1 && bd >= 1, KernelFailure, "%s: both arguments must be at least 1-D, got %s and %s", op,
                       describe(a).c_str(), describe(b).c_str());
  const int64_t m = ad == 1 ? 1 : a.size(-2), k = a.size(-1);
  const int64_t kb = bd == 1 ? b.size(0) : b.size(-2), n = bd == 1 ? 1 : b.size(-1);
  KILN_CHECK_OR_RETURN(k == kb, KernelFailure, "%s: cannot multiply %s by %s", op, describe(a).c_str(),
                       describe(b).c_str());
  *s = MatmulShapes();
  // Broadcast the batch dims (everything before the last two).
  const int a_batch = std::max(ad - 2, 0), b_batch = std::max(bd - 2, 0);
  const int nb = std::max(a_batch, b_batch);
  // The output's rows times columns must fit; the operands' strides may saturate only where a
  // size is 0 (no element is then read), so saturating arithmetic is exact where it matters.
  int64_t c_stride;
  KILN_RETURN_IF_ERROR(checked_mul(op, "the output's rows times columns", m, n, &c_stride));
  int64_t a_stride = sat_mul(m, k), b_stride = sat_mul(k, n);  // strides of the innermost batch dim
  for (int d = nb - 1; d >= 0; --d) {
    const int da = d - (nb - a_batch), db = d - (nb - b_batch);
    const int64_t sa = da >= 0 ? a.sizes()[da] : 1, sb = db >= 0 ? b.sizes()[db] : 1;
    KILN_CHECK_OR_RETURN(sa == sb || sa == 1 || sb == 1, KernelFailure,
                         "%s: batch dims of %s and %s are not broadcastable", op, describe(a).c_str(),
                         describe(b).c_str());
    s->batch_sizes[d] = sa == 0 || sb == 0 ? 0 : std::max(sa, sb);
    s->a_batch_strides[d] = sa == 1 ? 0 : a_stride;
    s->b_batch_strides[d] = sb == 1 ? 0 : b_stride;
    a_stride = sat_mul(a_stride, sa);
    b_stride = sat_mul(b_stride, sb);
  }
  for (int d = 0; d < nb; ++d) s->out_sizes.push(s->batch_sizes[d]);
  if (ad >= 2) s->out_sizes.push(m);
  if (bd >= 2) s->out_sizes.push(n);
  s->batch_ndim = nb;
  s->c_batch_stride = c_stride;
  s->m = m, s->n = n, s->k = k;
  if (bd <= 2 && ad >= 3) {
    // [..., M, K] @ [K, N]: the batch dims of self are just more rows.
    s->batch_ndim = 0;
    KILN_RETURN_IF_ERROR(checked_mul(op, "the rows of self", m, prod(a.sizes(), 0, ad - 2), &s->m));
  }
  return Status::ok();
}

// The (self, second) tensor arguments of a product.
Status operands(const char* op, bool at_prepare, Inputs in, Outputs out, const char* second, const Tensor** a,
                const Tensor** b) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(at_prepare, op, in, 0, "self", a));
  return tensor_arg(at_prepare, op, in, 1, second, b);
}

}  // namespace

Status mm_args(const char* op, bool at_prepare, Inputs in, Outputs out, const Tensor** a, const Tensor** b,
               MatmulShapes* s) {
  KILN_RETURN_IF_ERROR(operands(op, at_prepare, in, out, "mat2", a, b));
  return mm_shapes(op, **a, "self", **b, "mat2", *out[0], s);
}

Status bmm_args(const char* op, bool at_prepare, Inputs in, Outputs out, const Tensor** a, const Tensor** b,
                MatmulShapes* s) {
  KILN_RETURN_IF_ERROR(operands(op, at_prepare, in, out, "mat2", a, b));
  return bmm_shapes(op, **a, **b, *out[0], s);
}

Status matmul_args(const char* op, bool at_prepare, Inputs in, Outputs out, const Tensor** a, const Tensor** b,
                   MatmulShapes* s) {
  KILN_RETURN_IF_ERROR(operands(op, at_prepare, in, out, "other", a, b));
  return matmul_shapes(op, **a, **b, *out[0], s);
}

}  // namespace kernels
}  // namespace kiln
