// aten::linear.default: y = x @ W^T + b through the shared GEMM.
#include "portable/linear.h"

#include <algorithm>
#include <cstring>

#include "common/kernel_args.h"
#include "portable/gemm.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {

Status linear_forward(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      Tensor& y) {
  KILN_RETURN_IF_ERROR(check_dtype(op, x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, w, "weight", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x.dim() >= 1, KernelFailure, "%s: input must be at least 1-D, got %s", op, describe(x).c_str());
  KILN_CHECK_OR_RETURN(w.dim() == 2, KernelFailure, "%s: weight must be 2-D, got %s", op, describe(w).c_str());
  const int64_t n = w.size(0), k = w.size(1);
  KILN_CHECK_OR_RETURN(x.size(-1) == k, KernelFailure, "%s: input %s and weight %s have different in_features", op,
                       describe(x).c_str(), describe(w).c_str());
  if (bias != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *bias, "bias", ScalarType::Float32));
    // A bias broadcasts against [.., N]: [N], or a single element.
    KILN_CHECK_OR_RETURN((bias->dim() == 1 && (bias->size(0) == n || bias->size(0) == 1)) || (bias->dim() == 0),
                         KernelFailure, "%s: bias must be [%lld], got %s", op, static_cast<long long>(n),
                         describe(*bias).c_str());
  }

  Dims sizes(x.sizes());
  sizes[sizes.n - 1] = n;
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (residual != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *residual, "residual", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(same_sizes(residual->sizes(), y.sizes()), KernelFailure,
                         "%s: residual must have the output's shape %s, got %s", op,
                         describe_sizes(y.sizes()).c_str(), describe(*residual).c_str());
  }

  // C starts as residual + bias (when given); the GEMM accumulates onto it.
  const int64_t m = prod(x.sizes(), 0, x.dim() - 1);
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
  p.a = x.data_as<const float>(), p.a_rs = k, p.a_cs = 1;
  p.b = w.data_as<const float>(), p.b_rs = 1, p.b_cs = k;  // B = W^T
  p.c = c, p.c_rs = n;
  p.overwrite = b == nullptr && r == nullptr;
  gemm(p);
  return Status::ok();
}

Status linear_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::linear.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  const Tensor *x, *w, *bias;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "bias", &bias));
  return linear_forward(op, *x, *w, bias, nullptr, *out[0]);
}

KILN_REGISTER_KERNEL("aten::linear.default", "f32,f32|f32,f32,f32", linear_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
