// aten::max_pool2d.default: windowed maximum with padding, dilation and ceil_mode (values only);
// aten::max_pool2d_with_indices.default: the same values and, like ATen, the index of each maximum
// as a flat position h * W + w in its (unpadded) input plane.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/pool2d_args.h"

namespace kiln {
namespace kernels {
namespace portable {

namespace {

// The windowed maxima of every plane into `yp`, and their flat input positions into `ip` when it
// is not null. Only the taps that land inside the input are visited, so the work per output is
// bounded by the input, whatever the kernel size.
void max_pool_planes(const Pool2dArgs& args, float* yp, int64_t* ip) {
  const Window &wh = args.wh, &ww = args.ww;
  const int64_t oh = wh.out, ow = ww.out, h = args.input.h, w = args.input.w;
  const float* xp = args.x->data_as<const float>();
  const int64_t taps = sat_mul(std::min(wh.kernel, h), std::min(ww.kernel, w));
  parallel_for(args.input.planes, grain_for(sat_mul(oh * ow, taps)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = xp + p * h * w;
      float* yo = yp + p * oh * ow;
      for_each_window(wh, ww, [&](int64_t o, const WindowSpan& hs, const WindowSpan& ws) {
        float best = -std::numeric_limits<float>::infinity();
        // ATen's index when nothing beats -inf: the first tap inside the input.
        int64_t where = (hs.start + hs.t0 * wh.dilation) * w + (ws.start + ws.t0 * ww.dilation);
        for (int64_t a = hs.t0; a < hs.t1; ++a) {
          const int64_t r = hs.start + a * wh.dilation;
          const float* row = plane + r * w;
          for (int64_t b = ws.t0; b < ws.t1; ++b) {
            const int64_t c = ws.start + b * ww.dilation;
            const float v = row[c];
            if (v > best || std::isnan(v)) best = v, where = r * w + c;  // NaN wins, as in PyTorch
          }
        }
        yo[o] = best;
        if (ip != nullptr) ip[p * oh * ow + o] = where;
      });
    }
  });
}

}  // namespace

Status max_pool2d_run(KernelContext&, Inputs in, Outputs out) {
  Pool2dArgs args;
  KILN_RETURN_IF_ERROR(pool2d_args("aten::max_pool2d.default", Pool2d::Max, /*at_prepare=*/false, in, out, &args));
  max_pool_planes(args, out[0]->data_as<float>(), nullptr);
  return Status::ok();
}

Status max_pool2d_with_indices_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::max_pool2d_with_indices.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 2));
  Pool2dArgs args;
  KILN_RETURN_IF_ERROR(pool2d_args(op, Pool2d::Max, /*at_prepare=*/false, in, Outputs(out.data(), 1), &args));
  Tensor& ix = *out[1];
  KILN_RETURN_IF_ERROR(check_dtype(op, ix, "indices", ScalarType::Int64));
  const Dims sizes(out[0]->sizes());
  KILN_RETURN_IF_ERROR(resize_output(op, &ix, sizes.span()));
  max_pool_planes(args, out[0]->data_as<float>(), ix.data_as<int64_t>());
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::max_pool2d.default", "f32", max_pool2d_run);
KILN_REGISTER_KERNEL("aten::max_pool2d_with_indices.default", "f32", max_pool2d_with_indices_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
