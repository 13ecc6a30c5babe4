// aten::max_pool2d.default: windowed maximum with padding, dilation and ceil_mode (values only).
#include <cmath>
#include <limits>

#include "kernel_util.h"
#include "portable_ops.h"

namespace kiln {
namespace portable {

Status max_pool2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::max_pool2d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  const Tensor* x;
  int64_t k[2], s[2], pad[2], dil[2];
  bool stride_empty, ceil_mode;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 1, "kernel_size", k));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 2, "stride", s, /*empty_ok=*/true, &stride_empty));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 3, "padding", pad));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 4, "dilation", dil));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "ceil_mode", &ceil_mode));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  PoolInput pi;
  KILN_RETURN_IF_ERROR(pool_input(op, *x, &pi));
  if (stride_empty) s[0] = k[0], s[1] = k[1];
  KILN_CHECK_OR_RETURN(k[0] > 0 && k[1] > 0, KernelFailure, "%s: kernel_size must be positive", op);
  KILN_CHECK_OR_RETURN(s[0] > 0 && s[1] > 0, KernelFailure, "%s: stride must be positive", op);
  KILN_CHECK_OR_RETURN(dil[0] > 0 && dil[1] > 0, KernelFailure, "%s: dilation must be positive", op);
  KILN_CHECK_OR_RETURN(pad[0] >= 0 && pad[1] >= 0 && pad[0] <= k[0] / 2 && pad[1] <= k[1] / 2, KernelFailure,
                       "%s: padding must be between 0 and half the kernel size", op);
  const int64_t oh = pooling_output_size(pi.h, k[0], pad[0], s[0], dil[0], ceil_mode);
  const int64_t ow = pooling_output_size(pi.w, k[1], pad[1], s[1], dil[1], ceil_mode);
  KILN_CHECK_OR_RETURN(oh >= 1 && ow >= 1, KernelFailure, "%s: output size %lldx%lld is too small for input %s", op,
                       static_cast<long long>(oh), static_cast<long long>(ow), describe(*x).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, pool_output_sizes(*x, oh, ow).span()));

  const float* xp = x->data_as<const float>();
  float* yp = y.data_as<float>();
  const int64_t h = pi.h, w = pi.w;
  parallel_for(pi.planes, std::max<int64_t>(1, kElementwiseGrain / (oh * ow * k[0] * k[1])), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = xp + p * h * w;
      float* yo = yp + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t h0 = i * s[0] - pad[0];
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t w0 = j * s[1] - pad[1];
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t a = 0; a < k[0]; ++a) {
            const int64_t ih = h0 + a * dil[0];
            if (ih < 0 || ih >= h) continue;
            for (int64_t b = 0; b < k[1]; ++b) {
              const int64_t iw = w0 + b * dil[1];
              if (iw < 0 || iw >= w) continue;
              const float v = plane[ih * w + iw];
              if (v > best || std::isnan(v)) best = v;  // NaN wins, as in PyTorch
            }
          }
          yo[i * ow + j] = best;
        }
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::max_pool2d.default", "f32", max_pool2d_run);

}  // namespace portable
}  // namespace kiln
