// aten::mm.default and aten::bmm.default: plain and batched matrix products.
#include "portable/gemm.h"
#include "common/kernel_args.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

Status check_f32(const char* op, const Tensor& a, const Tensor& b, const Tensor& y) {
  KILN_RETURN_IF_ERROR(check_dtype(op, a, "self", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, b, "mat2", ScalarType::Float32));
  return check_dtype(op, y, "output", ScalarType::Float32);
}

// C = A @ B for `batch` contiguous [m,k] x [k,n] products.
void batched_product(const Tensor& a, const Tensor& b, Tensor& y, int64_t batch, int64_t m, int64_t k, int64_t n) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = a.data_as<const float>(), p.a_rs = k, p.a_cs = 1;
  p.b = b.data_as<const float>(), p.b_rs = n, p.b_cs = 1;
  p.c = y.data_as<float>(), p.c_rs = n;
  p.overwrite = true;
  p.batch_ndim = 1;
  p.batch_sizes[0] = batch;
  p.a_batch_strides[0] = m * k;
  p.b_batch_strides[0] = k * n;
  p.c_batch_stride = m * n;
  gemm(p);
}

}  // namespace

Status mm_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::mm.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "mat2", &b));
  KILN_RETURN_IF_ERROR(check_f32(op, *a, *b, *out[0]));
  KILN_CHECK_OR_RETURN(a->dim() == 2, KernelFailure, "%s: self must be 2-D, got %s", op, describe(*a).c_str());
  KILN_CHECK_OR_RETURN(b->dim() == 2, KernelFailure, "%s: mat2 must be 2-D, got %s", op, describe(*b).c_str());
  KILN_CHECK_OR_RETURN(a->size(1) == b->size(0), KernelFailure, "%s: cannot multiply %s by %s", op,
                       describe(*a).c_str(), describe(*b).c_str());
  const int64_t m = a->size(0), k = a->size(1), n = b->size(1);
  const int64_t sizes[2] = {m, n};
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], {sizes, 2}));
  batched_product(*a, *b, *out[0], 1, m, k, n);
  return Status::ok();
}

Status bmm_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::bmm.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "mat2", &b));
  KILN_RETURN_IF_ERROR(check_f32(op, *a, *b, *out[0]));
  KILN_CHECK_OR_RETURN(a->dim() == 3, KernelFailure, "%s: self must be 3-D, got %s", op, describe(*a).c_str());
  KILN_CHECK_OR_RETURN(b->dim() == 3, KernelFailure, "%s: mat2 must be 3-D, got %s", op, describe(*b).c_str());
  KILN_CHECK_OR_RETURN(a->size(0) == b->size(0) && a->size(2) == b->size(1), KernelFailure,
                       "%s: cannot multiply %s by %s", op, describe(*a).c_str(), describe(*b).c_str());
  const int64_t batch = a->size(0), m = a->size(1), k = a->size(2), n = b->size(2);
  const int64_t sizes[3] = {batch, m, n};
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], {sizes, 3}));
  batched_product(*a, *b, *out[0], batch, m, k, n);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::mm.default", "f32,f32", mm_run);
KILN_REGISTER_KERNEL("aten::bmm.default", "f32,f32", bmm_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
