// aten::max_pool2d.default: windowed maximum with padding, dilation and ceil_mode (values only).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/kernel_args.h"
#include "common/window.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
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
  Window wh, ww;
  KILN_RETURN_IF_ERROR(window_geometry(op, "height", pi.h, k[0], s[0], pad[0], dil[0], ceil_mode, true, &wh));
  KILN_RETURN_IF_ERROR(window_geometry(op, "width", pi.w, k[1], s[1], pad[1], dil[1], ceil_mode, true, &ww));
  const int64_t oh = wh.out, ow = ww.out;
  KILN_RETURN_IF_ERROR(resize_output(op, &y, pool_output_sizes(*x, oh, ow).span()));

  const float* xp = x->data_as<const float>();
  float* yp = y.data_as<float>();
  const int64_t h = pi.h, w = pi.w;
  // Only the taps that land inside the input are visited, so the work per
  // output is bounded by the input, whatever the kernel size.
  const int64_t taps = sat_mul(std::min(k[0], h), std::min(k[1], w));
  parallel_for(pi.planes, grain_for(sat_mul(oh * ow, taps)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = xp + p * h * w;
      float* yo = yp + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t h0 = i * wh.stride - wh.pad;
        int64_t a0, a1;
        window_taps(wh, h0, &a0, &a1);
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t w0 = j * ww.stride - ww.pad;
          int64_t b0, b1;
          window_taps(ww, w0, &b0, &b1);
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t a = a0; a < a1; ++a) {
            const float* row = plane + (h0 + a * wh.dilation) * w;
            for (int64_t b = b0; b < b1; ++b) {
              const float v = row[w0 + b * ww.dilation];
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
}  // namespace kernels
}  // namespace kiln
