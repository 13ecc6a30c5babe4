// aten::conv_transpose2d.input (input, weight, bias?, stride, padding, output_padding, groups, dilation):
// the transposed (fractionally strided) 2-D convolution, f32. Input [N,] C_in, H, W; weight
// C_in, C_out / groups, kH, kW; output [N,] C_out, OH, OW with
// OH = (H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1 (the same for W).
// Every input pixel scatters its window into the output: each task owns one output plane, so no two
// threads write the same element. conv_transpose1d reaches it through the exporter (a height of 1).
#include <algorithm>

#include "common/kernel_args.h"
#include "common/window.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

struct TransposedAxis {
  int64_t in = 0, kernel = 0, stride = 1, pad = 0, out_pad = 0, dilation = 1, out = 0;
};

Status transposed_axis(const char* op, const char* axis, TransposedAxis* a) {
  auto in_range = [](int64_t v, int64_t lo) { return v >= lo && v <= kMaxWindowParam; };
  KILN_CHECK_OR_RETURN(in_range(a->kernel, 1), KernelFailure, "%s: kernel size %lld (%s) must be in [1, %lld]", op,
                       static_cast<long long>(a->kernel), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(in_range(a->stride, 1), KernelFailure, "%s: stride %lld (%s) must be in [1, %lld]", op,
                       static_cast<long long>(a->stride), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(in_range(a->dilation, 1), KernelFailure, "%s: dilation %lld (%s) must be in [1, %lld]", op,
                       static_cast<long long>(a->dilation), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(in_range(a->pad, 0), KernelFailure, "%s: padding %lld (%s) must be in [0, %lld]", op,
                       static_cast<long long>(a->pad), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(a->out_pad >= 0 && (a->out_pad < a->stride || a->out_pad < a->dilation), KernelFailure,
                       "%s: output_padding %lld (%s) must be non-negative and smaller than either stride %lld or "
                       "dilation %lld",
                       op, static_cast<long long>(a->out_pad), axis, static_cast<long long>(a->stride),
                       static_cast<long long>(a->dilation));
  KILN_CHECK_OR_RETURN(a->in >= 1, KernelFailure, "%s: input %s %lld must be at least 1", op, axis,
                       static_cast<long long>(a->in));
  // (in - 1) * stride + dilation * (kernel - 1) + output_padding + 1 - 2 * padding, checked.
  int64_t span, extent;
  KILN_RETURN_IF_ERROR(checked_mul(op, "the output size", a->in - 1, a->stride, &span));
  extent = a->dilation * (a->kernel - 1) + a->out_pad + 1;  // each term below 2^61
  KILN_RETURN_IF_ERROR(checked_add(op, "the output size", span, extent, &span));
  a->out = span - 2 * a->pad;
  KILN_CHECK_OR_RETURN(a->out >= 1, KernelFailure, "%s: output %s %lld is too small (padding %lld)", op, axis,
                       static_cast<long long>(a->out), static_cast<long long>(a->pad));
  return Status::ok();
}

}  // namespace

Status conv_transpose2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::conv_transpose2d.input";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 8, 1));
  const Tensor *x, *w, *b;
  int64_t s[2], p[2], op_[2], d[2], groups;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "bias", &b));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 3, "stride", s));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 4, "padding", p));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 5, "output_padding", op_));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 6, "groups", &groups));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, 7, "dilation", d));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, *w, "weight", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x->dim() == 3 || x->dim() == 4, KernelFailure, "%s: input must be 3-D or 4-D, got %s", op,
                       describe(*x).c_str());
  KILN_CHECK_OR_RETURN(w->dim() == 4, KernelFailure, "%s: weight must be 4-D, got %s", op, describe(*w).c_str());
  const bool batched = x->dim() == 4;
  const int64_t images = batched ? x->sizes()[0] : 1;
  const int64_t c = x->size(-3);
  KILN_CHECK_OR_RETURN(groups >= 1 && groups <= std::max<int64_t>(c, 1) && c % groups == 0, KernelFailure,
                       "%s: groups %lld must be in [1, %lld] and divide the %lld input channels", op,
                       static_cast<long long>(groups), static_cast<long long>(c), static_cast<long long>(c));
  KILN_CHECK_OR_RETURN(w->sizes()[0] == c, KernelFailure, "%s: weight %s must have %lld (input channels) rows", op,
                       describe(*w).c_str(), static_cast<long long>(c));
  const int64_t cin_g = c / groups, cout_g = w->sizes()[1];
  int64_t cout;
  KILN_RETURN_IF_ERROR(checked_mul(op, "the output channels", cout_g, groups, &cout));
  if (b != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *b, "bias", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(b->dim() == 1 && b->sizes()[0] == cout, KernelFailure,
                         "%s: bias %s must be 1-D with %lld (output channels) elements", op, describe(*b).c_str(),
                         static_cast<long long>(cout));
  }
  TransposedAxis ah, aw;
  ah.in = x->size(-2), ah.kernel = w->sizes()[2], ah.stride = s[0], ah.pad = p[0], ah.out_pad = op_[0];
  ah.dilation = d[0];
  aw.in = x->size(-1), aw.kernel = w->sizes()[3], aw.stride = s[1], aw.pad = p[1], aw.out_pad = op_[1];
  aw.dilation = d[1];
  KILN_RETURN_IF_ERROR(transposed_axis(op, "height", &ah));
  KILN_RETURN_IF_ERROR(transposed_axis(op, "width", &aw));
  Dims sizes;
  if (batched) sizes.push(images);
  sizes.push(cout);
  sizes.push(ah.out);
  sizes.push(aw.out);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (y.numel() == 0) return Status::ok();
  const int64_t h = ah.in, wd = aw.in, oh = ah.out, ow = aw.out, kh = ah.kernel, kw = aw.kernel;
  const float* xp = x->data_as<const float>();
  const float* wp = w->data_as<const float>();
  const float* bp = b != nullptr ? b->data_as<const float>() : nullptr;
  float* yp = y.data_as<float>();
  const int64_t plane_work = sat_mul(sat_mul(cin_g, h * wd), kh * kw);
  parallel_for(images * cout, grain_for(plane_work), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t image = t / cout, co = t % cout, g = co / cout_g, col = co % cout_g;
      float* yo = yp + t * oh * ow;
      std::fill(yo, yo + oh * ow, bp != nullptr ? bp[co] : 0.0f);
      for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci) {
        const float* plane = xp + (image * c + ci) * h * wd;
        const float* kernel = wp + (ci * cout_g + col) * kh * kw;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            const float wv = kernel[i * kw + j];
            for (int64_t ih = 0; ih < h; ++ih) {
              const int64_t r = ih * ah.stride - ah.pad + i * ah.dilation;
              if (r < 0 || r >= oh) continue;
              float* yrow = yo + r * ow;
              const float* xrow = plane + ih * wd;
              for (int64_t iw = 0; iw < wd; ++iw) {
                const int64_t q = iw * aw.stride - aw.pad + j * aw.dilation;
                if (q >= 0 && q < ow) yrow[q] += xrow[iw] * wv;
              }
            }
          }
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::conv_transpose2d.input", "f32,f32|f32,f32,f32", conv_transpose2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
