// aten::adaptive_avg_pool2d.default: mean over floor/ceil-split regions to a fixed output size.
#include "common/pool2d_args.h"

namespace kiln {
namespace kernels {
namespace portable {

Status adaptive_avg_pool2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::adaptive_avg_pool2d.default";
  AdaptivePool2dArgs args;
  KILN_RETURN_IF_ERROR(adaptive_avg_pool2d_args(op, in, out, &args));
  Tensor& y = *out[0];
  if (y.numel() == 0) return Status::ok();
  const PoolInput& pi = args.input;
  const int64_t oh = args.oh, ow = args.ow, h = pi.h, w = pi.w;

  const float* xp = args.x->data_as<const float>();
  float* yp = y.data_as<float>();
  // Region bounds are floor(i * h / oh) and ceil((i + 1) * h / oh); the
  // products are formed without overflow (output_size comes from the file).
  auto start = [](int64_t i, int64_t in, int64_t n) { return mul_div(i, in, n, false); };
  auto end = [](int64_t i, int64_t in, int64_t n) { return mul_div(i + 1, in, n, true); };
  // Regions overlap by at most one row/column, so the work per plane is about
  // (h + oh) * (w + ow).
  parallel_for(pi.planes, grain_for(sat_mul(h + oh, w + ow)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = xp + p * h * w;
      float* yo = yp + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t h0 = start(i, h, oh), h1 = end(i, h, oh);
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t w0 = start(j, w, ow), w1 = end(j, w, ow);
          double sum = 0.0;
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b) sum += plane[a * w + b];
          yo[i * ow + j] = static_cast<float>(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::adaptive_avg_pool2d.default", "f32", adaptive_avg_pool2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
