// aten::linear.default (y = x @ W^T + b) and kiln::fused_linear.default (act(linear + residual), the
// operator the exporter's fusion passes produce) through the shared GEMM; under
// GemmPrecision::Bfloat16 with a constant weight, the reference of the bfloat16 GEMM.
#include <algorithm>
#include <cstring>

#include "common/linear_args.h"
#include "portable/gemm.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// y (resized by linear_args) onto bias and residual, then the activation.
void linear_forward(const LinearArgs& a, Tensor& y) {
  const Tensor *bias = a.bias, *residual = a.residual;
  const int64_t m = a.m, n = a.n, k = a.k;
  // C starts as residual + bias (when given); the GEMM accumulates onto it.
  float* c = y.data_as<float>();
  const float* b = bias != nullptr ? bias->data_as<const float>() : nullptr;
  const bool bias_vec = bias != nullptr && bias->numel() == n && n != 1;
  const float* r = residual != nullptr ? residual->data_as<const float>() : nullptr;
  if (b != nullptr || r != nullptr) {
    parallel_for(m, grain_for(n), [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        float* row = c + i * n;
        if (r == nullptr) {
          std::fill(row, row + n, 0.0f);
        } else {
          std::memcpy(row, r + i * n, static_cast<size_t>(n) * sizeof(float));
        }
        if (bias_vec) {
          for (int64_t j = 0; j < n; ++j) row[j] += b[j];
        } else if (b != nullptr) {
          for (int64_t j = 0; j < n; ++j) row[j] += b[0];
        }
      }
    });
  }

  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = a.x->data_as<const float>(), p.a_rs = k, p.a_cs = 1;
  p.b = a.weight->data_as<const float>(), p.b_rs = 1, p.b_cs = k;  // B = W^T
  p.c = c, p.c_rs = n;
  p.overwrite = b == nullptr && r == nullptr;
  gemm(p);
  apply_activation(a.act, c, y.numel());
}

// x and W rounded to bfloat16, the sums of optimized/bf16_gemm.h (gemm_bf16), then bias, residual
// and the activation, each added as the optimized epilogue adds them.
void linear_forward_bf16(const LinearArgs& a, Tensor& y) {
  const int64_t m = a.m, n = a.n, k = a.k;
  float* c = y.data_as<float>();
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = a.x->data_as<const float>(), p.a_rs = k, p.a_cs = 1;
  p.b = a.weight->data_as<const float>(), p.b_rs = 1, p.b_cs = k;  // B = W^T
  p.c = c, p.c_rs = n;
  p.overwrite = true;
  gemm_bf16(p);
  const float* b = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  const bool bias_vec = a.bias != nullptr && a.bias->numel() == n && n != 1;
  const float* r = a.residual != nullptr ? a.residual->data_as<const float>() : nullptr;
  if (b != nullptr || r != nullptr) {
    parallel_for(m, grain_for(n), [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          float& out = c[i * n + j];
          if (b != nullptr) out += bias_vec ? b[j] : b[0];
          if (r != nullptr) out += r[i * n + j];
        }
      }
    });
  }
  apply_activation(a.act, c, y.numel());
}

Status linear(const char* op, bool fused, const KernelContext& ctx, Inputs in, Outputs out) {
  LinearArgs a;
  KILN_RETURN_IF_ERROR(linear_args(op, fused, /*at_prepare=*/false, in, out, &a));
  if (ctx.gemm_precision == GemmPrecision::Bfloat16 && a.weight->is_constant()) {
    linear_forward_bf16(a, *out[0]);
  } else {
    linear_forward(a, *out[0]);
  }
  return Status::ok();
}

}  // namespace

Status linear_run(KernelContext& ctx, Inputs in, Outputs out) {
  return linear("aten::linear.default", false, ctx, in, out);
}
// (input, weight, bias?, residual?, activation, act_min, act_max)
Status fused_linear_run(KernelContext& ctx, Inputs in, Outputs out) {
  return linear("kiln::fused_linear.default", true, ctx, in, out);
}

KILN_REGISTER_KERNEL("aten::linear.default", "f32,f32|f32,f32,f32", linear_run);
// The dtypes of the tensors present: input and weight, then bias and/or residual.
KILN_REGISTER_KERNEL("kiln::fused_linear.default", "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_linear_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
