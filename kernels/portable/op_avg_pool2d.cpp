// aten::avg_pool2d.default: windowed mean with PyTorch's padding, ceil_mode and divisor rules.
#include <algorithm>

#include "common/kernel_args.h"
#include "common/window.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {

Status avg_pool2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::avg_pool2d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1));
  const Tensor* x;
  int64_t k[2], s[2], pad[2], divisor = 0;
  bool stride_empty, ceil_mode, count_include_pad, has_divisor;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 1, "kernel_size", k));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 2, "stride", s, /*empty_ok=*/true, &stride_empty));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 3, "padding", pad));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 4, "ceil_mode", &ceil_mode));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "count_include_pad", &count_include_pad));
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 6, "divisor_override", &divisor, &has_divisor));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  PoolInput pi;
  KILN_RETURN_IF_ERROR(pool_input(op, *x, &pi));
  if (stride_empty) s[0] = k[0], s[1] = k[1];
  KILN_CHECK_OR_RETURN(!has_divisor || divisor != 0, KernelFailure, "%s: divisor_override must not be zero", op);
  Window wh, ww;
  KILN_RETURN_IF_ERROR(window_geometry(op, "height", pi.h, k[0], s[0], pad[0], 1, ceil_mode, true, &wh));
  KILN_RETURN_IF_ERROR(window_geometry(op, "width", pi.w, k[1], s[1], pad[1], 1, ceil_mode, true, &ww));
  const int64_t oh = wh.out, ow = ww.out;
  KILN_RETURN_IF_ERROR(resize_output(op, &y, pool_output_sizes(*x, oh, ow).span()));

  const float* xp = x->data_as<const float>();
  float* yp = y.data_as<float>();
  const int64_t h = pi.h, w = pi.w;
  // Windows are clipped to the input, so the work per output is bounded by the input.
  const int64_t taps = sat_mul(std::min(k[0], h), std::min(k[1], w));
  parallel_for(pi.planes, grain_for(sat_mul(oh * ow, taps)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = xp + p * h * w;
      float* yo = yp + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        // The padded window is clipped to input+padding (it counts for
        // count_include_pad), then to the input (what is summed).
        int64_t h0 = i * s[0] - pad[0], h1 = std::min(h0 + k[0], h + pad[0]);
        const int64_t ph = h1 - h0;
        h0 = std::max<int64_t>(h0, 0), h1 = std::min(h1, h);
        for (int64_t j = 0; j < ow; ++j) {
          int64_t w0 = j * s[1] - pad[1], w1 = std::min(w0 + k[1], w + pad[1]);
          const int64_t pool_size = ph * (w1 - w0);
          w0 = std::max<int64_t>(w0, 0), w1 = std::min(w1, w);
          if (h0 >= h1 || w0 >= w1) {
            yo[i * ow + j] = 0.0f;
            continue;
          }
          double sum = 0.0;
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b) sum += plane[a * w + b];
          // Window areas are below 2^62: each side is at most kMaxWindowParam.
          const int64_t div = has_divisor ? divisor : count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
          yo[i * ow + j] = static_cast<float>(sum / static_cast<double>(div));
        }
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::avg_pool2d.default", "f32", avg_pool2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
