// aten::avg_pool2d.default: windowed mean with PyTorch's padding, ceil_mode and divisor rules.
#include <algorithm>

#include "common/pool2d_args.h"

namespace kiln {
namespace kernels {
namespace portable {

Status avg_pool2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::avg_pool2d.default";
  Pool2dArgs args;
  KILN_RETURN_IF_ERROR(pool2d_args(op, Pool2d::Avg, /*at_prepare=*/false, in, out, &args));
  const Window &wh = args.wh, &ww = args.ww;
  const int64_t oh = wh.out, ow = ww.out;
  const bool count_include_pad = args.count_include_pad, has_divisor = args.has_divisor;
  const int64_t divisor = args.divisor;

  const float* xp = args.x->data_as<const float>();
  float* yp = out[0]->data_as<float>();
  const int64_t h = args.input.h, w = args.input.w;
  // Windows are clipped to the input, so the work per output is bounded by the input.
  const int64_t taps = sat_mul(std::min(wh.kernel, h), std::min(ww.kernel, w));
  parallel_for(args.input.planes, grain_for(sat_mul(oh * ow, taps)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = xp + p * h * w;
      float* yo = yp + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        // The padded window is clipped to input+padding (it counts for
        // count_include_pad), then to the input (what is summed).
        int64_t h0 = i * wh.stride - wh.pad, h1 = std::min(h0 + wh.kernel, h + wh.pad);
        const int64_t ph = h1 - h0;
        h0 = std::max<int64_t>(h0, 0), h1 = std::min(h1, h);
        for (int64_t j = 0; j < ow; ++j) {
          int64_t w0 = j * ww.stride - ww.pad, w1 = std::min(w0 + ww.kernel, w + ww.pad);
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
