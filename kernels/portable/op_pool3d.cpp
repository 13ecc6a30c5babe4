// 3-D pools, f32, on [C, D, H, W] or [N, C, D, H, W]:
//   aten::max_pool3d_with_indices.default (self, kernel_size, stride, padding, dilation, ceil_mode) ->
//     (values, indices): indices as ATen computes them, flat positions d * H * W + h * W + w in the
//     (unpadded) input volume; the first maximum wins a tie, NaN wins;
//   aten::avg_pool3d.default (self, kernel_size, stride, padding, ceil_mode, count_include_pad,
//     divisor_override): PyTorch's padding, ceil_mode and divisor rules, as avg_pool2d;
//   aten::_adaptive_avg_pool3d.default (self, output_size): means over floor/ceil-split regions, as
//     adaptive_avg_pool2d.
// Windows are validated per axis by window_geometry (padding at most half the kernel, as PyTorch).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/kernel_args.h"
#include "common/window.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// An int[3] argument: 3 values, or 1 repeated; 0 values only when `empty_ok` (then *empty).
Status triple_arg(const char* op, Inputs in, size_t i, const char* name, int64_t out[3], bool empty_ok = false,
                  bool* empty = nullptr) {
  Span<const int64_t> v;
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, i, name, &v));
  if (empty != nullptr) *empty = v.empty();
  if (v.empty() && empty_ok) return Status::ok();
  KILN_CHECK_OR_RETURN(v.size() == 1 || v.size() == 3, KernelFailure, "%s: %s must have 1 or 3 values, got %s", op,
                       name, describe_ints(v).c_str());
  for (int k = 0; k < 3; ++k) out[k] = v[v.size() == 1 ? 0 : k];
  return Status::ok();
}

struct Pool3d {
  const Tensor* x = nullptr;
  int64_t planes = 0;
  Window wd, wh, ww;
  Dims out_sizes;
};

// self, kernel_size, stride, padding at 0..3; dilation and ceil_mode are read by the caller.
Status pool3d_setup(const char* op, Inputs in, const int64_t dil[3], bool ceil_mode, Pool3d* p) {
  int64_t k[3], s[3], pad[3];
  bool stride_empty;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &p->x));
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 1, "kernel_size", k));
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 2, "stride", s, /*empty_ok=*/true, &stride_empty));
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 3, "padding", pad));
  if (stride_empty) s[0] = k[0], s[1] = k[1], s[2] = k[2];
  const Tensor& x = *p->x;
  KILN_RETURN_IF_ERROR(check_dtype(op, x, "self", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x.dim() == 4 || x.dim() == 5, KernelFailure, "%s: self must be 4-D or 5-D, got %s", op,
                       describe(x).c_str());
  p->planes = prod(x.sizes(), 0, x.dim() - 3);
  Window* axes[3] = {&p->wd, &p->wh, &p->ww};
  const char* names[3] = {"depth", "height", "width"};
  for (int a = 0; a < 3; ++a)
    KILN_RETURN_IF_ERROR(
        window_geometry(op, names[a], x.size(a - 3), k[a], s[a], pad[a], dil[a], ceil_mode, true, axes[a]));
  for (int i = 0; i < x.dim() - 3; ++i) p->out_sizes.push(x.sizes()[i]);
  p->out_sizes.push(p->wd.out);
  p->out_sizes.push(p->wh.out);
  p->out_sizes.push(p->ww.out);
  return Status::ok();
}

}  // namespace

Status max_pool3d_with_indices_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::max_pool3d_with_indices.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 2));
  int64_t dil[3];
  bool ceil_mode;
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 4, "dilation", dil));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "ceil_mode", &ceil_mode));
  Pool3d p;
  KILN_RETURN_IF_ERROR(pool3d_setup(op, in, dil, ceil_mode, &p));
  Tensor &y = *out[0], &ix = *out[1];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, ix, "indices", ScalarType::Int64));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, p.out_sizes.span()));
  KILN_RETURN_IF_ERROR(resize_output(op, &ix, p.out_sizes.span()));
  const Window &wd = p.wd, &wh = p.wh, &ww = p.ww;
  const int64_t d = wd.in, h = wh.in, w = ww.in, od = wd.out, oh = wh.out, ow = ww.out;
  const float* xp = p.x->data_as<const float>();
  float* yp = y.data_as<float>();
  int64_t* ip = ix.data_as<int64_t>();
  const int64_t taps = sat_mul(sat_mul(std::min(wd.kernel, d), std::min(wh.kernel, h)), std::min(ww.kernel, w));
  parallel_for(p.planes, grain_for(sat_mul(od * oh * ow, taps)), [&](int64_t p0, int64_t p1) {
    for (int64_t q = p0; q < p1; ++q) {
      const float* vol = xp + q * d * h * w;
      float* yo = yp + q * od * oh * ow;
      int64_t* io = ip + q * od * oh * ow;
      for_each_window(wd, wh, ww, [&](int64_t o, const WindowSpan& dd, const WindowSpan& hh, const WindowSpan& ws) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t where = ((dd.start + dd.t0 * wd.dilation) * h + (hh.start + hh.t0 * wh.dilation)) * w +
                        (ws.start + ws.t0 * ww.dilation);
        for (int64_t c = dd.t0; c < dd.t1; ++c)
          for (int64_t a = hh.t0; a < hh.t1; ++a) {
            const int64_t row = ((dd.start + c * wd.dilation) * h + (hh.start + a * wh.dilation)) * w;
            for (int64_t b = ws.t0; b < ws.t1; ++b) {
              const int64_t at = row + ws.start + b * ww.dilation;
              const float v = vol[at];
              if (v > best || std::isnan(v)) best = v, where = at;  // NaN wins, as in PyTorch
            }
          }
        yo[o] = best;
        io[o] = where;
      });
    }
  });
  return Status::ok();
}

Status avg_pool3d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::avg_pool3d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1));
  const int64_t dil[3] = {1, 1, 1};
  bool ceil_mode, count_include_pad, has_divisor;
  int64_t divisor = 0;
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 4, "ceil_mode", &ceil_mode));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "count_include_pad", &count_include_pad));
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 6, "divisor_override", &divisor, &has_divisor));
  KILN_CHECK_OR_RETURN(!has_divisor || divisor != 0, KernelFailure, "%s: divisor_override must not be zero", op);
  Pool3d p;
  KILN_RETURN_IF_ERROR(pool3d_setup(op, in, dil, ceil_mode, &p));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, p.out_sizes.span()));
  const Window &wd = p.wd, &wh = p.wh, &ww = p.ww;
  const int64_t d = wd.in, h = wh.in, w = ww.in, od = wd.out, oh = wh.out, ow = ww.out;
  const float* xp = p.x->data_as<const float>();
  float* yp = y.data_as<float>();
  const int64_t taps = sat_mul(sat_mul(std::min(wd.kernel, d), std::min(wh.kernel, h)), std::min(ww.kernel, w));
  // The padded window is clipped to input + padding (it counts for count_include_pad), then to the input
  // (what is summed). Sizes are multiplied in double: three sides of up to 2^30 overflow int64.
  auto clip = [](const Window& win, int64_t o, int64_t* lo, int64_t* hi) {
    int64_t s = o * win.stride - win.pad, t = std::min(s + win.kernel, win.in + win.pad);
    const int64_t padded = t - s;
    *lo = std::max<int64_t>(s, 0), *hi = std::min(t, win.in);
    return padded;
  };
  parallel_for(p.planes, grain_for(sat_mul(od * oh * ow, taps)), [&](int64_t p0, int64_t p1) {
    for (int64_t q = p0; q < p1; ++q) {
      const float* vol = xp + q * d * h * w;
      float* yo = yp + q * od * oh * ow;
      for (int64_t e = 0; e < od; ++e) {
        int64_t c0, c1;
        const double pd = static_cast<double>(clip(wd, e, &c0, &c1));
        for (int64_t i = 0; i < oh; ++i) {
          int64_t a0, a1;
          const double ph = static_cast<double>(clip(wh, i, &a0, &a1));
          for (int64_t j = 0; j < ow; ++j) {
            int64_t b0, b1;
            const double pw = static_cast<double>(clip(ww, j, &b0, &b1));
            const int64_t o = (e * oh + i) * ow + j;
            if (c0 >= c1 || a0 >= a1 || b0 >= b1) {
              yo[o] = 0.0f;
              continue;
            }
            double sum = 0.0;
            for (int64_t c = c0; c < c1; ++c)
              for (int64_t a = a0; a < a1; ++a)
                for (int64_t b = b0; b < b1; ++b) sum += vol[(c * h + a) * w + b];
            const double div = has_divisor         ? static_cast<double>(divisor)
                               : count_include_pad ? pd * ph * pw
                                                   : static_cast<double>(c1 - c0) * static_cast<double>(a1 - a0) *
                                                         static_cast<double>(b1 - b0);
            yo[o] = static_cast<float>(sum / div);
          }
        }
      }
    }
  });
  return Status::ok();
}

Status adaptive_avg_pool3d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::_adaptive_avg_pool3d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Tensor* x;
  int64_t os[3];
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 1, "output_size", os));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "self", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x->dim() == 4 || x->dim() == 5, KernelFailure, "%s: self must be 4-D or 5-D, got %s", op,
                       describe(*x).c_str());
  KILN_CHECK_OR_RETURN(os[0] >= 0 && os[1] >= 0 && os[2] >= 0, KernelFailure, "%s: output_size must be non-negative",
                       op);
  const int64_t d = x->size(-3), h = x->size(-2), w = x->size(-1), od = os[0], oh = os[1], ow = os[2];
  KILN_CHECK_OR_RETURN(d > 0 && h > 0 && w > 0, KernelFailure, "%s: self %s has an empty spatial dim", op,
                       describe(*x).c_str());
  Dims sizes;
  for (int i = 0; i < x->dim() - 3; ++i) sizes.push(x->sizes()[i]);
  sizes.push(od);
  sizes.push(oh);
  sizes.push(ow);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (y.numel() == 0) return Status::ok();
  const int64_t planes = prod(x->sizes(), 0, x->dim() - 3);
  const float* xp = x->data_as<const float>();
  float* yp = y.data_as<float>();
  // Region bounds floor(i * in / out) and ceil((i + 1) * in / out), formed without overflow.
  auto start = [](int64_t i, int64_t n_in, int64_t n) { return mul_div(i, n_in, n, false); };
  auto end = [](int64_t i, int64_t n_in, int64_t n) { return mul_div(i + 1, n_in, n, true); };
  parallel_for(planes, grain_for(sat_mul(sat_mul(d + od, h + oh), w + ow)), [&](int64_t p0, int64_t p1) {
    for (int64_t q = p0; q < p1; ++q) {
      const float* vol = xp + q * d * h * w;
      float* yo = yp + q * od * oh * ow;
      for (int64_t e = 0; e < od; ++e) {
        const int64_t d0 = start(e, d, od), d1 = end(e, d, od);
        for (int64_t i = 0; i < oh; ++i) {
          const int64_t h0 = start(i, h, oh), h1 = end(i, h, oh);
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t w0 = start(j, w, ow), w1 = end(j, w, ow);
            double sum = 0.0;
            for (int64_t c = d0; c < d1; ++c)
              for (int64_t a = h0; a < h1; ++a)
                for (int64_t b = w0; b < w1; ++b) sum += vol[(c * h + a) * w + b];
            const double count =
                static_cast<double>(d1 - d0) * static_cast<double>(h1 - h0) * static_cast<double>(w1 - w0);
            yo[(e * oh + i) * ow + j] = static_cast<float>(sum / count);
          }
        }
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::max_pool3d_with_indices.default", "f32", max_pool3d_with_indices_run);
KILN_REGISTER_KERNEL("aten::_adaptive_avg_pool3d.default", "f32", adaptive_avg_pool3d_run);
KILN_REGISTER_KERNEL("aten::avg_pool3d.default", "f32", avg_pool3d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
