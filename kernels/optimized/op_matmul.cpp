// Optimized aten::mm, aten::addmm, aten::bmm and aten::matmul (f32) on the GEMM driver.
//
// The second operand is B. A constant 2-D B (a weight used through mm or
// matmul) is packed once at method load; any other B (activations: attention
// scores and values, batched operands) is packed per block into worker scratch.
// Under GemmPrecision::Bfloat16 a constant B of an unbatched product is packed in
// bfloat16 pairs and runs on the bfloat16 tiles (bf16_gemm.h), as the portable
// kernels compute it (portable/gemm.h, matmul_product; addmm).
#include <algorithm>
#include <memory>

#include "common/kernel_args.h"
#include "common/matmul_args.h"
#include "optimized/bf16_gemm.h"
#include "optimized/gemm_driver.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

// The product an instruction asks for, checked as the portable kernels check it
// (common/matmul_args.h) and with the output resized. `b` is the tensor behind p.b.
struct Product {
  GemmProblem p;
  const Tensor* b = nullptr;
};
// `prepare`: at method load (tensor arguments without storage, see kernel_args.h).
using BuildFn = Status (*)(const char* op, bool prepare, Inputs in, Outputs out, Product* r);

// The product of contiguous a and b that `s` describes, into y resized to its shape.
Status contiguous_product(const char* op, const Tensor& a, const Tensor& b, Tensor& y, const MatmulShapes& s,
                          Product* r) {
  KILN_RETURN_IF_ERROR(resize_output(op, &y, s.out_sizes.span()));
  GemmProblem& p = r->p;
  p.m = s.m, p.n = s.n, p.k = s.k;
  p.a = a.data_as<const float>(), p.lda = s.k;
  p.b = b.data_as<const float>(), p.b_rs = s.n, p.b_cs = 1;
  p.c = y.data_as<float>(), p.ldc = s.n;
  p.batches.ndim = s.batch_ndim;
  std::copy(s.batch_sizes, s.batch_sizes + s.batch_ndim, p.batches.sizes);
  std::copy(s.a_batch_strides, s.a_batch_strides + s.batch_ndim, p.batches.a_strides);
  std::copy(s.b_batch_strides, s.b_batch_strides + s.batch_ndim, p.batches.b_strides);
  p.batches.c_stride = s.c_batch_stride;
  r->b = &b;
  return Status::ok();
}

// mm, bmm and matmul (1-D operands and broadcast batch dims, as the portable kernel).
template <MatmulArgsFn kReadArgs>
Status build_product(const char* op, bool prepare, Inputs in, Outputs out, Product* r) {
  const Tensor *a, *b;
  MatmulShapes s;
  KILN_RETURN_IF_ERROR(kReadArgs(op, prepare, in, out, &a, &b, &s));
  return contiguous_product(op, *a, *b, *out[0], s, r);
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
  MatmulShapes shapes;
  KILN_RETURN_IF_ERROR(mm_shapes(op, *a, "mat1", *b, "mat2", *out[0], &shapes));
  KILN_RETURN_IF_ERROR(contiguous_product(op, *a, *b, *out[0], shapes, r));
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
  const Bf16GemmKernels* bf16 = nullptr;  // set: the bfloat16 product (then `packed` holds pairs)
  const float* packed = nullptr;          // B in panels, or null: packed per block at run
  const void* packed_from = nullptr;      // the data of the constant B that `packed` holds
  size_t scratch = 0;                     // per worker
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
  if (r.b->is_constant() && p.batches.ndim == 0 && p.k > 0 && p.n > 0 &&
      ctx.gemm_precision == GemmPrecision::Bfloat16) {
    s->bf16 = &bf16_gemm_kernels_for(ctx.isa);
    s->kernels = &s->bf16->gemm;
    Result<const float*> packed = prepack_b_bf16(ctx, *s->bf16, *r.b, p.b_rs, p.b_cs, p.k, p.n);
    if (!packed.ok()) return packed.status();
    s->packed = packed.value();
    s->packed_from = r.b->data();
  } else if (r.b->is_constant() && !b_batched && p.k > 0 && p.n > 0) {
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
  if (s.bf16 != nullptr) return gemm_bf16(*s.bf16, r.p, ctx, s.scratch);
  return gemm(*s.kernels, r.p, ctx, s.scratch);
}

void release(void* state) { delete static_cast<MatmulState*>(state); }

constexpr const char* kMm = "aten::mm.default";
constexpr const char* kBmm = "aten::bmm.default";
constexpr const char* kMatmul = "aten::matmul.default";
constexpr const char* kAddmm = "aten::addmm.default";

Status mm_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kMm, build_product<mm_args>, ctx, in, out, state);
}
Status mm_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kMm, build_product<mm_args>, ctx, in, out); }
Status bmm_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kBmm, build_product<bmm_args>, ctx, in, out, state);
}
Status bmm_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kBmm, build_product<bmm_args>, ctx, in, out); }
Status matmul_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kMatmul, build_product<matmul_args>, ctx, in, out, state);
}
Status matmul_run(KernelContext& ctx, Inputs in, Outputs out) {
  return run(kMatmul, build_product<matmul_args>, ctx, in, out);
}
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
