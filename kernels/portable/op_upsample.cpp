// 2-D resizing of NCHW images: upsample_nearest2d.default and upsample_bilinear2d.default, with
// ATen's index arithmetic (float for nearest, the compute type for bilinear), so results match eager.
// The exporter rewrites the .vec overloads (scale factors) into these (canonicalize_operators.py).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// One spatial axis: input and output sizes (both > 0) and the optional scale factor of the file.
struct Axis {
  int64_t in = 0, out = 0;
  bool has_scale = false;
  double scale = 0;
};

// ATen's nearest_idx (mode "nearest", OpenCV's INTER_NEAREST): src = floor(dst * (1 / scale or in / out))
// in float, at most in - 1. The float value is bounded before the conversion (a huge or NaN scale).
int64_t nearest_index(int64_t dst, const Axis& a) {
  if (a.out == a.in) return dst;
  if (a.out == 2 * a.in) return dst >> 1;
  const float s = a.has_scale && a.scale > 0. ? static_cast<float>(1.0 / a.scale)
                                              : static_cast<float>(a.in) / static_cast<float>(a.out);
  const float v = std::floor(static_cast<float>(dst) * s);
  if (!(v >= 0.0f)) return 0;
  if (v >= static_cast<float>(a.in - 1)) return a.in - 1;
  return static_cast<int64_t>(v);
}

// ATen's linear source index and weights: x[i0] * (1 - l) + x[i1] * l, computed in T.
template <typename T>
struct Linear {
  int64_t i0, i1;
  T l0, l1;
};

template <typename T>
T linear_scale(const Axis& a, bool align_corners) {
  if (align_corners) return a.out > 1 ? static_cast<T>(a.in - 1) / static_cast<T>(a.out - 1) : T(0);
  return a.has_scale && a.scale > 0. ? static_cast<T>(1.0 / a.scale) : static_cast<T>(a.in) / static_cast<T>(a.out);
}

template <typename T>
Linear<T> linear_index(int64_t dst, const Axis& a, T scale, bool align_corners) {
  T src = align_corners ? scale * static_cast<T>(dst) : scale * (static_cast<T>(dst) + T(0.5)) - T(0.5);
  if (!align_corners && src < T(0)) src = T(0);
  Linear<T> r;
  const T f = std::floor(src);
  if (!(f >= T(0)))
    r.i0 = 0;  // NaN
  else if (f >= static_cast<T>(a.in - 1))
    r.i0 = a.in - 1;
  else
    r.i0 = static_cast<int64_t>(f);
  const T lambda = std::min(std::max(src - static_cast<T>(r.i0), T(0)), T(1));
  r.i1 = r.i0 + (r.i0 < a.in - 1 ? 1 : 0);
  r.l1 = lambda == lambda ? lambda : T(0);
  r.l0 = T(1) - r.l1;
  return r;
}

template <typename U>
void nearest_typed(const Tensor& x, Tensor& y, const Axis& h, const Axis& w) {
  const U* xp = x.data_as<const U>();
  U* yp = y.data_as<U>();
  const int64_t planes = x.size(0) * x.size(1);
  parallel_for(planes * h.out, grain_for(w.out), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t plane = r / h.out, oh = r % h.out;
      const U* src = xp + (plane * h.in + nearest_index(oh, h)) * w.in;
      U* row = yp + r * w.out;
      for (int64_t ow = 0; ow < w.out; ++ow) row[ow] = src[nearest_index(ow, w)];
    }
  });
}

template <typename T>
void bilinear_typed(const Tensor& x, Tensor& y, const Axis& h, const Axis& w, bool align_corners) {
  const T* xp = x.data_as<const T>();
  T* yp = y.data_as<T>();
  const int64_t planes = x.size(0) * x.size(1);
  const T sh = linear_scale<T>(h, align_corners), sw = linear_scale<T>(w, align_corners);
  parallel_for(planes * h.out, grain_for(4 * w.out), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t plane = r / h.out, oh = r % h.out;
      const Linear<T> lh = linear_index<T>(oh, h, sh, align_corners);
      const T* top = xp + (plane * h.in + lh.i0) * w.in;
      const T* bottom = xp + (plane * h.in + lh.i1) * w.in;
      T* row = yp + r * w.out;
      for (int64_t ow = 0; ow < w.out; ++ow) {
        const Linear<T> lw = linear_index<T>(ow, w, sw, align_corners);
        row[ow] =
            lh.l0 * (lw.l0 * top[lw.i0] + lw.l1 * top[lw.i1]) + lh.l1 * (lw.l0 * bottom[lw.i0] + lw.l1 * bottom[lw.i1]);
      }
    }
  });
}

// (self: [N, C, H, W], output_size: int[2], ..., scales_h: float?, scales_w: float?) with the scales at
// in[scales_at], in[scales_at + 1]; resizes y to [N, C, out_h, out_w].
Status upsample_args(const char* op, Inputs in, Outputs out, size_t n_in, size_t scales_at, const Tensor** x, Axis* h,
                     Axis* w) {
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, n_in, x));
  Span<const int64_t> size;
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "output_size", &size));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, scales_at, "scales_h", &h->scale, &h->has_scale));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, scales_at + 1, "scales_w", &w->scale, &w->has_scale));
  KILN_CHECK_OR_RETURN((*x)->dim() == 4, KernelFailure, "%s: self must be 4-D (N, C, H, W), got %s", op,
                       describe(**x).c_str());
  KILN_CHECK_OR_RETURN(size.size() == 2, KernelFailure, "%s: output_size %s must have 2 elements", op,
                       describe_ints(size).c_str());
  h->in = (*x)->size(2), w->in = (*x)->size(3), h->out = size[0], w->out = size[1];
  KILN_CHECK_OR_RETURN(h->in > 0 && w->in > 0 && h->out > 0 && w->out > 0, KernelFailure,
                       "%s: input and output sizes must be greater than 0, got input %s and output_size %s", op,
                       describe(**x).c_str(), describe_ints(size).c_str());
  const int64_t sizes[4] = {(*x)->size(0), (*x)->size(1), h->out, w->out};
  return resize_output(op, out[0], Span<const int64_t>(sizes, 4));
}

}  // namespace

Status upsample_nearest2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::upsample_nearest2d.default";
  const Tensor* x;
  Axis h, w;
  KILN_RETURN_IF_ERROR(upsample_args(op, in, out, 4, 2, &x, &h, &w));
  if (out[0]->numel() == 0) return Status::ok();
  switch (element_size(x->dtype())) {
    case 1: nearest_typed<uint8_t>(*x, *out[0], h, w); break;
    case 2: nearest_typed<uint16_t>(*x, *out[0], h, w); break;
    case 4: nearest_typed<uint32_t>(*x, *out[0], h, w); break;
    default: nearest_typed<uint64_t>(*x, *out[0], h, w); break;
  }
  return Status::ok();
}

Status upsample_bilinear2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::upsample_bilinear2d.default";
  const Tensor* x;
  Axis h, w;
  bool align_corners;
  KILN_RETURN_IF_ERROR(upsample_args(op, in, out, 5, 3, &x, &h, &w));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "align_corners", &align_corners));
  const ScalarType t = x->dtype();
  KILN_CHECK_OR_RETURN(t == ScalarType::Float32 || t == ScalarType::Float64, KernelFailure,
                       "%s: self must be f32 or f64, got %s", op, describe(*x).c_str());
  if (out[0]->numel() == 0) return Status::ok();
  if (t == ScalarType::Float32)
    bilinear_typed<float>(*x, *out[0], h, w, align_corners);
  else
    bilinear_typed<double>(*x, *out[0], h, w, align_corners);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::upsample_nearest2d.default", "*", upsample_nearest2d_run);
KILN_REGISTER_KERNEL("aten::upsample_bilinear2d.default", "f32|f64", upsample_bilinear2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
