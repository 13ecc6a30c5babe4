// Optimized aten::mm, aten::addmm, aten::bmm and aten::matmul (f32) on the GEMM driver.
//
// The second operand is B. A constant 2-D B (a weight used through mm or
// matmul) is packed once at method load; any other B (activations: attention
// scores and values, batched operands) is packed per block into worker scratch.
#include <algorithm>
#include <memory>

#include "common/kernel_args.h"
#include "optimized/gemm_driver.h"
#include "optimized/op_args.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

// The product an instruction asks for, checked like the portable kernels and
// with the output resized. `b` is the tensor behind p.b (strided B).
struct Product {
  GemmProblem p;
  const Tensor* b = nullptr;
};
// `prepare`: at method load (see op_args.h).
using BuildFn = Status (*)(const char* op, bool prepare, Inputs in, Outputs out, Product* r);

Status check_f32(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn, const Tensor& y) {
  KILN_RETURN_IF_ERROR(check_dtype(op, a, an, ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, b, bn, ScalarType::Float32));
  return check_dtype(op, y, "output", ScalarType::Float32);
}

// C[m, n] = A[m, k] @ B[k, n] for contiguous operands, `batch` of them one after the other.
void contiguous_product(const Tensor& a, const Tensor& b, Tensor& y, int64_t batch, int64_t m, int64_t k, int64_t n,
                        Product* r) {
  GemmProblem& p = r->p;
  p.m = m, p.n = n, p.k = k;
  p.a = a.data_as<const float>(), p.lda = k;
  p.b = b.data_as<const float>(), p.b_rs = n, p.b_cs = 1;
  p.c = y.data_as<float>(), p.ldc = n;
  if (batch != 1) {
    p.batches.ndim = 1;
    p.batches.sizes[0] = batch;
    p.batches.a_strides[0] = m * k;
    p.batches.b_strides[0] = k * n;
    p.batches.c_stride = m * n;
  }
  r->b = &b;
}

// [M, K] @ [K, N] of the tensor arguments a and b (named an, bn), into the resized output.
Status matrix_product(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn, Tensor& y,
                      Product* r) {
  KILN_RETURN_IF_ERROR(check_f32(op, a, an, b, bn, y));
  KILN_CHECK_OR_RETURN(a.dim() == 2, KernelFailure, "%s: %s must be 2-D, got %s", op, an, describe(a).c_str());
  KILN_CHECK_OR_RETURN(b.dim() == 2, KernelFailure, "%s: %s must be 2-D, got %s", op, bn, describe(b).c_str());
  KILN_CHECK_OR_RETURN(a.size(1) == b.size(0), KernelFailure, "%s: cannot multiply %s by %s", op, describe(a).c_str(),
                       describe(b).c_str());
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const int64_t sizes[2] = {m, n};
  KILN_RETURN_IF_ERROR(resize_output(op, &y, {sizes, 2}));
  contiguous_product(a, b, y, 1, m, k, n, r);
  return Status::ok();
}

Status build_mm(const char* op, bool prepare, Inputs in, Outputs out, Product* r) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 1, "mat2", &b));
  return matrix_product(op, *a, "self", *b, "mat2", *out[0], r);
}

Status build_bmm(const char* op, bool prepare, Inputs in, Outputs out, Product* r) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 1, "mat2", &b));
  KILN_RETURN_IF_ERROR(check_f32(op, *a, "self", *b, "mat2", *out[0]));
  KILN_CHECK_OR_RETURN(a->dim() == 3, KernelFailure, "%s: self must be 3-D, got %s", op, describe(*a).c_str());
  KILN_CHECK_OR_RETURN(b->dim() == 3, KernelFailure, "%s: mat2 must be 3-D, got %s", op, describe(*b).c_str());
  KILN_CHECK_OR_RETURN(a->size(0) == b->size(0) && a->size(2) == b->size(1), KernelFailure,
                       "%s: cannot multiply %s by %s", op, describe(*a).c_str(), describe(*b).c_str());
  const int64_t batch = a->size(0), m = a->size(1), k = a->size(2), n = b->size(2);
  const int64_t sizes[3] = {batch, m, n};
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], {sizes, 3}));
  contiguous_product(*a, *b, *out[0], batch, m, k, n, r);
  return Status::ok();
}

// torch.matmul: 1-D operands (a row vector [1, K] / a column [K, 1], the unit
// dim dropped again) and broadcast batch dims, as the portable kernel.
Status build_matmul(const char* op, bool prepare, Inputs in, Outputs out, Product* r) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Tensor *a, *b;
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 0, "self", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 1, "other", &b));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_f32(op, *a, "self", *b, "other", y));
  const int ad = a->dim(), bd = b->dim();
  KILN_CHECK_OR_RETURN(ad >= 1 && bd >= 1, KernelFailure, "%s: both arguments must be at least 1-D, got %s and %s",
                       op, describe(*a).c_str(), describe(*b).c_str());
  const int64_t m = ad == 1 ? 1 : a->size(-2), k = a->size(-1);
  const int64_t kb = bd == 1 ? b->size(0) : b->size(-2), n = bd == 1 ? 1 : b->size(-1);
  KILN_CHECK_OR_RETURN(k == kb, KernelFailure, "%s: cannot multiply %s by %s", op, describe(*a).c_str(),
                       describe(*b).c_str());
  GemmProblem& p = r->p;
  const int a_batch = std::max(ad - 2, 0), b_batch = std::max(bd - 2, 0);
  const int nb = std::max(a_batch, b_batch);
  Dims sizes;
  int64_t a_stride = m * k, b_stride = k * n;  // strides of the innermost batch dim
  for (int d = nb - 1; d >= 0; --d) {
    const int da = d - (nb - a_batch), db = d - (nb - b_batch);
    const int64_t sa = da >= 0 ? a->sizes()[da] : 1, sb = db >= 0 ? b->sizes()[db] : 1;
    KILN_CHECK_OR_RETURN(sa == sb || sa == 1 || sb == 1, KernelFailure,
                         "%s: batch dims of %s and %s are not broadcastable", op, describe(*a).c_str(),
                         describe(*b).c_str());
    p.batches.sizes[d] = sa == 0 || sb == 0 ? 0 : std::max(sa, sb);
    p.batches.a_strides[d] = sa == 1 ? 0 : a_stride;
    p.batches.b_strides[d] = sb == 1 ? 0 : b_stride;
    a_stride *= sa;
    b_stride *= sb;
  }
  for (int d = 0; d < nb; ++d) sizes.push(p.batches.sizes[d]);
  if (ad >= 2) sizes.push(m);
  if (bd >= 2) sizes.push(n);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));

  p.batches.ndim = nb;
  p.batches.c_stride = m * n;
  p.m = m, p.n = n, p.k = k;
  if (bd <= 2 && ad >= 3) {
    // [..., M, K] @ [K, N]: the batch dims of self are just more rows.
    p.batches.ndim = 0;
    p.m = m * prod(a->sizes(), 0, ad - 2);
  }
  p.a = a->data_as<const float>(), p.lda = k;
  p.b = b->data_as<const float>(), p.b_rs = n, p.b_cs = 1;
  p.c = y.data_as<float>(), p.ldc = n;
  r->b = b;
  return Status::ok();
}

// beta * self + alpha * (mat1 @ mat2): self joins the epilogue as a residual
// ([M, N]), a bias per column ([N], [1, N]) or per row ([M, 1]), for beta 1
// (or is ignored for beta 0, NaN included, as in PyTorch). Other forms are
// declined at prepare and served by the portable kernel.
Status build_addmm(const char* op, bool prepare, Inputs in, Outputs out, Product* r) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 1));
  const Tensor *self, *a, *b;
  double beta, alpha;
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 0, "self", &self));
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 1, "mat1", &a));
  KILN_RETURN_IF_ERROR(tensor_arg(prepare, op, in, 2, "mat2", &b));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 3, "beta", &beta));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 4, "alpha", &alpha));
  KILN_RETURN_IF_ERROR(check_dtype(op, *self, "self", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(matrix_product(op, *a, "mat1", *b, "mat2", *out[0], r));
  GemmProblem& p = r->p;
  p.alpha = static_cast<float>(alpha);
  if (beta == 0.0) return Status::ok();
  KILN_CHECK_OR_RETURN(beta == 1.0, NotSupported, "%s: beta %g", op, beta);
  const auto s = self->sizes();
  const float* data = self->data_as<const float>();
  if (self->dim() == 2 && s[0] == p.m && s[1] == p.n) {
    p.residual = data;
  } else if ((self->dim() == 1 && s[0] == p.n) || (self->dim() == 2 && s[0] == 1 && s[1] == p.n)) {
    p.bias = data;
  } else if (self->dim() == 2 && s[0] == p.m && s[1] == 1) {
    p.bias = data, p.bias_per_row = true;
  } else {
    return Status(Error::NotSupported, format("%s: self %s for a [%lld, %lld] product", op, describe(*self).c_str(),
                                              static_cast<long long>(p.m), static_cast<long long>(p.n)));
  }
  return Status::ok();
}

struct MatmulState {
  const F32GemmKernels* kernels = nullptr;
  const float* packed = nullptr;     // B in panels, or null: packed per block at run
  const void* packed_from = nullptr;  // the data of the constant B that `packed` holds
  size_t scratch = 0;                 // per worker
};

Status prepare(const char* op, BuildFn build, KernelContext& ctx, Inputs in, Outputs out, void** state) {
  Product r;
  Status st = build(op, true, in, out, &r);
  // Malformed arguments or an unsupported form: the portable kernel serves (and reports errors at run).
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  auto s = std::make_unique<MatmulState>();
  s->kernels = &f32_gemm_for(ctx.isa);
  const GemmProblem& p = r.p;
  bool b_batched = false;
  for (int d = 0; d < p.batches.ndim; ++d) b_batched |= p.batches.b_strides[d] != 0 && p.batches.sizes[d] > 1;
  if (r.b->is_constant() && !b_batched && p.k > 0 && p.n > 0) {
    Result<const float*> packed = prepack_b(ctx, *s->kernels, *r.b, p.b_rs, p.b_cs, p.k, p.n);
    if (!packed.ok()) return packed.status();
    s->packed = packed.value();
    s->packed_from = r.b->data();
  }
  s->scratch = gemm_worker_scratch_bytes(*s->kernels, p.n, s->packed != nullptr);
  ctx.worker_scratch_bytes = s->scratch;
  *state = s.release();
  return Status::ok();
}

Status run(const char* op, BuildFn build, KernelContext& ctx, Inputs in, Outputs out) {
  const auto& s = *static_cast<const MatmulState*>(ctx.state);
  Product r;
  KILN_RETURN_IF_ERROR(build(op, false, in, out, &r));
  if (s.packed != nullptr) {
    KILN_CHECK_OR_RETURN(r.b->data() == s.packed_from, KernelFailure, "%s: B is not the constant packed at load", op);
    r.p.packed_b = s.packed;
  }
  return gemm(*s.kernels, r.p, ctx, s.scratch);
}

void release(void* state) { delete static_cast<MatmulState*>(state); }

constexpr const char* kMm = "aten::mm.default";
constexpr const char* kBmm = "aten::bmm.default";
constexpr const char* kMatmul = "aten::matmul.default";
constexpr const char* kAddmm = "aten::addmm.default";

Status mm_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kMm, build_mm, ctx, in, out, state);
}
Status mm_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kMm, build_mm, ctx, in, out); }
Status bmm_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kBmm, build_bmm, ctx, in, out, state);
}
Status bmm_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kBmm, build_bmm, ctx, in, out); }
Status matmul_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kMatmul, build_matmul, ctx, in, out, state);
}
Status matmul_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kMatmul, build_matmul, ctx, in, out); }
Status addmm_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kAddmm, build_addmm, ctx, in, out, state);
}
Status addmm_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kAddmm, build_addmm, ctx, in, out); }

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kMm, "f32,f32", mm_run, mm_prepare, release);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kBmm, "f32,f32", bmm_run, bmm_prepare, release);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kMatmul, "f32,f32", matmul_run, matmul_prepare, release);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kAddmm, "f32,f32,f32", addmm_run, addmm_prepare, release);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
