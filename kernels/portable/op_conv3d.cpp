// aten::conv3d.default (input, weight, bias?, stride, padding, dilation, groups), f32: a direct grouped
// 3-D convolution. Input [N,] C, D, H, W; weight C_out, C / groups, kD, kH, kW; output [N,] C_out, OD,
// OH, OW. Each task computes one output volume; only the taps inside the input are visited. The
// exporter turns aten::convolution with a 5-D weight into it.
#include <algorithm>

#include "common/kernel_args.h"
#include "common/window.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

Status triple_arg(const char* op, Inputs in, size_t i, const char* name, int64_t out[3]) {
  Span<const int64_t> v;
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, i, name, &v));
  KILN_CHECK_OR_RETURN(v.size() == 1 || v.size() == 3, KernelFailure, "%s: %s must have 1 or 3 values, got %s", op,
                       name, describe_ints(v).c_str());
  for (int k = 0; k < 3; ++k) out[k] = v[v.size() == 1 ? 0 : k];
  return Status::ok();
}

}  // namespace

Status conv3d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::conv3d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1));
  const Tensor *x, *wt, *b;
  int64_t s[3], p[3], d[3], groups;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "weight", &wt));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "bias", &b));
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 3, "stride", s));
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 4, "padding", p));
  KILN_RETURN_IF_ERROR(triple_arg(op, in, 5, "dilation", d));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 6, "groups", &groups));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, *wt, "weight", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x->dim() == 4 || x->dim() == 5, KernelFailure, "%s: input must be 4-D or 5-D, got %s", op,
                       describe(*x).c_str());
  KILN_CHECK_OR_RETURN(wt->dim() == 5, KernelFailure, "%s: weight must be 5-D, got %s", op, describe(*wt).c_str());
  const bool batched = x->dim() == 5;
  const int64_t images = batched ? x->sizes()[0] : 1, c = x->size(-4), cout = wt->sizes()[0];
  KILN_CHECK_OR_RETURN(groups >= 1 && groups <= std::max<int64_t>(c, 1) && c % groups == 0 && cout % groups == 0,
                       KernelFailure, "%s: groups %lld must divide the %lld input and %lld output channels", op,
                       static_cast<long long>(groups), static_cast<long long>(c), static_cast<long long>(cout));
  const int64_t cin_g = c / groups, cout_g = cout / groups;
  KILN_CHECK_OR_RETURN(wt->sizes()[1] == cin_g, KernelFailure,
                       "%s: weight %s must have %lld (input channels / groups) channels for input %s", op,
                       describe(*wt).c_str(), static_cast<long long>(cin_g), describe(*x).c_str());
  if (b != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *b, "bias", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(b->dim() == 1 && b->sizes()[0] == cout, KernelFailure,
                         "%s: bias %s must be 1-D with %lld (output channels) elements", op, describe(*b).c_str(),
                         static_cast<long long>(cout));
  }
  Window wd, wh, ww;
  Window* axes[3] = {&wd, &wh, &ww};
  const char* names[3] = {"depth", "height", "width"};
  for (int a = 0; a < 3; ++a)
    KILN_RETURN_IF_ERROR(window_geometry(op, names[a], x->size(a - 3), wt->sizes()[2 + a], s[a], p[a], d[a],
                                         /*ceil_mode=*/false, /*pad_max_half_kernel=*/false, axes[a]));
  Dims sizes;
  if (batched) sizes.push(images);
  sizes.push(cout);
  sizes.push(wd.out);
  sizes.push(wh.out);
  sizes.push(ww.out);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (y.numel() == 0) return Status::ok();
  const int64_t id = wd.in, ih = wh.in, iw = ww.in, od = wd.out, oh = wh.out, ow = ww.out;
  const int64_t kd = wd.kernel, kh = wh.kernel, kw = ww.kernel;
  const float* xp = x->data_as<const float>();
  const float* wp = wt->data_as<const float>();
  const float* bp = b != nullptr ? b->data_as<const float>() : nullptr;
  float* yp = y.data_as<float>();
  const int64_t taps = sat_mul(sat_mul(std::min(kd, id), std::min(kh, ih)), std::min(kw, iw));
  parallel_for(images * cout, grain_for(sat_mul(sat_mul(od * oh * ow, cin_g), taps)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t image = t / cout, co = t % cout, g = co / cout_g;
      const float* xg = xp + (image * c + g * cin_g) * id * ih * iw;
      const float* wk = wp + co * cin_g * kd * kh * kw;
      float* yo = yp + t * od * oh * ow;
      for_each_window(wd, wh, ww, [&](int64_t o, const WindowSpan& dd, const WindowSpan& hh, const WindowSpan& w) {
        float acc = bp != nullptr ? bp[co] : 0.0f;
        for (int64_t ci = 0; ci < cin_g; ++ci) {
          const float* vol = xg + ci * id * ih * iw;
          const float* k = wk + ci * kd * kh * kw;
          for (int64_t cc = dd.t0; cc < dd.t1; ++cc)
            for (int64_t a = hh.t0; a < hh.t1; ++a) {
              const int64_t row = ((dd.start + cc * wd.dilation) * ih + (hh.start + a * wh.dilation)) * iw + w.start;
              const float* krow = k + (cc * kh + a) * kw;
              for (int64_t bb = w.t0; bb < w.t1; ++bb) acc += vol[row + bb * ww.dilation] * krow[bb];
            }
        }
        yo[o] = acc;
      });
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::conv3d.default", "f32,f32|f32,f32,f32", conv3d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
