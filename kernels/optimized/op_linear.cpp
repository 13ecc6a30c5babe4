// Optimized aten::linear.default and kiln::fused_linear.default: y = act(x @ W^T + bias + residual).
//
// A constant weight (every exported model's) is packed once at method load
// into panels of W^T; its decode step (one row of x) streams those panels once.
// A weight computed at run time is packed per block into worker scratch. Under
// GemmPrecision::Bfloat16 a constant weight is packed in bfloat16 pairs and the
// product runs on the bfloat16 tiles (bf16_gemm.h); a weight computed at run time
// stays float32, as in the portable kernel.
#include <memory>

#include "common/linear_args.h"
#include "optimized/bf16_gemm.h"
#include "optimized/gemm_driver.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr const char* kLinear = "aten::linear.default";
constexpr const char* kFusedLinear = "kiln::fused_linear.default";

// The arguments as the portable kernels check them (common/linear_args.h), and only the bias the
// epilogue takes (one per output feature): prepare declines the others, a broadcast single element,
// to the portable kernel. `prepare`: at method load (see tensor_arg).
Status gemm_linear_args(const char* op, bool fused, bool prepare, Inputs in, Outputs out, LinearArgs* a) {
  KILN_RETURN_IF_ERROR(linear_args(op, fused, prepare, in, out, a));
  KILN_CHECK_OR_RETURN(a->bias == nullptr || (a->bias->dim() == 1 && a->bias->size(0) == a->n), NotSupported,
                       "%s: bias %s is not one per output feature", op, describe(*a->bias).c_str());
  return Status::ok();
}

struct LinearState {
  const F32GemmKernels* kernels = nullptr;
  const Bf16GemmKernels* bf16 = nullptr;  // set: the bfloat16 product (then `packed` holds pairs)
  const float* packed = nullptr;          // W^T in panels, or null: packed per block at run
  const void* packed_from = nullptr;      // the weight's data that `packed` holds
  size_t scratch = 0;                     // per worker
};

Status prepare(const char* op, bool fused, KernelContext& ctx, Inputs in, Outputs out, void** state) {
  LinearArgs a;
  Status st = gemm_linear_args(op, fused, true, in, out, &a);
  // Malformed arguments: the portable kernel serves, and reports them at run.
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  KILN_CHECK_OR_RETURN(a.k > 0 && a.n > 0, NotSupported, "%s: empty weight %s", op, describe(*a.weight).c_str());
  auto s = std::make_unique<LinearState>();
  s->kernels = &f32_gemm_for(ctx.isa);
  if (a.weight->is_constant() && ctx.gemm_precision == GemmPrecision::Bfloat16) {
    s->bf16 = &bf16_gemm_kernels_for(ctx.isa);
    s->kernels = &s->bf16->gemm;
    Result<const float*> packed = prepack_b_bf16(ctx, *s->bf16, *a.weight, 1, a.k, a.k, a.n);
    if (!packed.ok()) return packed.status();
    s->packed = packed.value();
    s->packed_from = a.weight->data();
  } else if (a.weight->is_constant()) {
    // B[k][n] = W[n][k].
    Result<const float*> packed = prepack_b(ctx, *s->kernels, *a.weight, 1, a.k, a.k, a.n);
    if (!packed.ok()) return packed.status();
    s->packed = packed.value();
    s->packed_from = a.weight->data();
  }
  s->scratch = gemm_worker_scratch_bytes(*s->kernels, a.n, s->packed != nullptr);
  ctx.worker_scratch_bytes = s->scratch;
  *state = s.release();
  return Status::ok();
}

Status run(const char* op, bool fused, KernelContext& ctx, Inputs in, Outputs out) {
  const auto& s = *static_cast<const LinearState*>(ctx.state);
  LinearArgs a;
  KILN_RETURN_IF_ERROR(gemm_linear_args(op, fused, false, in, out, &a));
  KILN_CHECK_OR_RETURN(s.packed == nullptr || a.weight->data() == s.packed_from, KernelFailure,
                       "%s: the weight is not the constant packed at load", op);
  GemmProblem p;
  p.m = a.m, p.n = a.n, p.k = a.k;
  p.a = a.x->data_as<const float>(), p.lda = a.k;
  p.c = out[0]->data_as<float>(), p.ldc = a.n;
  if (s.packed != nullptr) {
    p.packed_b = s.packed;
  } else {
    p.b = a.weight->data_as<const float>(), p.b_rs = 1, p.b_cs = a.k;
  }
  p.bias = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  p.residual = a.residual != nullptr ? a.residual->data_as<const float>() : nullptr;
  p.act = a.act;
  if (s.bf16 != nullptr) return gemm_bf16(*s.bf16, p, ctx, s.scratch);
  return gemm(*s.kernels, p, ctx, s.scratch);
}

void release(void* state) { delete static_cast<LinearState*>(state); }

Status linear_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kLinear, false, ctx, in, out, state);
}
Status linear_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kLinear, false, ctx, in, out); }
Status fused_linear_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kFusedLinear, true, ctx, in, out, state);
}
Status fused_linear_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kFusedLinear, true, ctx, in, out); }

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kLinear, "f32,f32|f32,f32,f32", linear_run, linear_prepare, release);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kFusedLinear, "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_linear_run,
                            fused_linear_prepare, release);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
