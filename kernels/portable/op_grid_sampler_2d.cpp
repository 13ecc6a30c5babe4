// aten::grid_sampler_2d.default (input, grid, interpolation_mode, padding_mode, align_corners), f32:
// what F.grid_sample runs on 4-D inputs. input [N, C, H, W], grid [N, OH, OW, 2] of (x, y) in [-1, 1]
// (outside allowed); output [N, C, OH, OW]. Interpolation 0 bilinear or 1 nearest (2, bicubic, is
// refused); padding 0 zeros, 1 border, 2 reflection; source coordinates computed as ATen's
// GridSampler.h does. Grid values are untrusted floats: a coordinate far outside the input samples
// nothing (zeros; NaN for a NaN or infinite one in bilinear mode, as in ATen) and is never converted
// to an integer out of range.
#include <algorithm>
#include <cmath>

#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

float unnormalize(float coord, int64_t size, bool align_corners) {
  return align_corners ? (coord + 1.f) / 2.f * static_cast<float>(size - 1)
                       : ((coord + 1.f) * static_cast<float>(size) - 1.f) / 2.f;
}

float clip(float v, int64_t size) { return std::min(static_cast<float>(size - 1), std::max(v, 0.f)); }

float reflect(float v, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0.f;
  const float lo = static_cast<float>(twice_low) / 2.f;
  const float span = static_cast<float>(twice_high - twice_low) / 2.f;
  v = std::fabs(v - lo);
  const float extra = std::fmod(v, span);
  const float flips = std::floor(v / span);
  return std::fmod(flips, 2.f) == 0.f ? extra + lo : span - extra + lo;
}

float source_index(float coord, int64_t size, int64_t padding, bool align_corners) {
  coord = unnormalize(coord, size, align_corners);
  if (padding == kBorder) {
    coord = clip(coord, size);
  } else if (padding == kReflection) {
    coord = align_corners ? reflect(coord, 0, 2 * (size - 1)) : reflect(coord, -1, 2 * size - 1);
    coord = clip(coord, size);
  }
  return coord;
}

// floor(v) as an integer when it lies in [-2, size + 1], else false (NaN, infinities, far away): such a
// position and its neighbour are both outside the input.
bool near_index(float v, int64_t size, int64_t* out) {
  if (!(v >= -2.f && v <= static_cast<float>(size) + 1.f)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

}  // namespace

Status grid_sampler_2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::grid_sampler_2d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 1));
  const Tensor *x, *grid;
  int64_t mode, padding;
  bool align_corners;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "grid", &grid));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "interpolation_mode", &mode));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 3, "padding_mode", &padding));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 4, "align_corners", &align_corners));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, *grid, "grid", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(mode == 0 || mode == 1, KernelFailure,
                       "%s: interpolation_mode %lld is not supported (0 bilinear, 1 nearest; not 2, bicubic)", op,
                       static_cast<long long>(mode));
  KILN_CHECK_OR_RETURN(padding == kZeros || padding == kBorder || padding == kReflection, KernelFailure,
                       "%s: padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got %lld", op,
                       static_cast<long long>(padding));
  KILN_CHECK_OR_RETURN(x->dim() == 4, KernelFailure, "%s: input must be 4-D, got %s", op, describe(*x).c_str());
  KILN_CHECK_OR_RETURN(grid->dim() == 4 && grid->sizes()[3] == 2 && grid->sizes()[0] == x->sizes()[0], KernelFailure,
                       "%s: grid %s must be [N, H, W, 2] with the N of input %s", op, describe(*grid).c_str(),
                       describe(*x).c_str());
  const int64_t n = x->sizes()[0], c = x->sizes()[1], h = x->sizes()[2], w = x->sizes()[3];
  const int64_t oh = grid->sizes()[1], ow = grid->sizes()[2];
  KILN_CHECK_OR_RETURN(h > 0 && w > 0, KernelFailure, "%s: input %s has an empty spatial dim", op,
                       describe(*x).c_str());
  const int64_t sizes[4] = {n, c, oh, ow};
  KILN_RETURN_IF_ERROR(resize_output(op, &y, Span<const int64_t>(sizes, 4)));
  if (y.numel() == 0) return Status::ok();
  const float* xp = x->data_as<const float>();
  const float* gp = grid->data_as<const float>();
  float* yp = y.data_as<float>();
  const bool bilinear = mode == 0;
  parallel_for(n * oh, grain_for(sat_mul(ow, c * (bilinear ? 4 : 1))), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t image = r / oh, i = r % oh;
      const float* g = gp + r * ow * 2;
      const float* xi = xp + image * c * h * w;
      float* yo = yp + image * c * oh * ow + i * ow;
      for (int64_t j = 0; j < ow; ++j) {
        const float ix = source_index(g[2 * j], w, padding, align_corners);
        const float iy = source_index(g[2 * j + 1], h, padding, align_corners);
        if (!bilinear) {
          int64_t px = -1, py = -1;
          const bool ok = near_index(std::nearbyint(ix), w, &px) && near_index(std::nearbyint(iy), h, &py) && px >= 0 &&
                          px < w && py >= 0 && py < h;
          for (int64_t ch = 0; ch < c; ++ch) yo[ch * oh * ow + j] = ok ? xi[(ch * h + py) * w + px] : 0.f;
          continue;
        }
        const float fx = std::floor(ix), fy = std::floor(iy);
        int64_t x0 = 0, y0 = 0;
        if (!near_index(fx, w, &x0) || !near_index(fy, h, &y0)) {
          // Far outside: zeros; a NaN or infinite coordinate gives NaN weights in ATen: NaN.
          const float v = std::isfinite(ix) && std::isfinite(iy) ? 0.f : std::nanf("");
          for (int64_t ch = 0; ch < c; ++ch) yo[ch * oh * ow + j] = v;
          continue;
        }
        const float tx = ix - fx, ty = iy - fy;
        const float wt[4] = {(1.f - tx) * (1.f - ty), tx * (1.f - ty), (1.f - tx) * ty, tx * ty};
        const int64_t xs[4] = {x0, x0 + 1, x0, x0 + 1}, ys[4] = {y0, y0, y0 + 1, y0 + 1};
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* plane = xi + ch * h * w;
          float acc = 0.f;
          for (int k = 0; k < 4; ++k)
            if (xs[k] >= 0 && xs[k] < w && ys[k] >= 0 && ys[k] < h) acc += plane[ys[k] * w + xs[k]] * wt[k];
          yo[ch * oh * ow + j] = acc;
        }
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::grid_sampler_2d.default", "f32,f32", grid_sampler_2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
