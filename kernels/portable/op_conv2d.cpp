// aten::conv2d.default: grouped 2-D convolution (implicit-im2col GEMM, direct depthwise).
#include "portable/conv2d.h"

#include <algorithm>

#include "common/window.h"
#include "portable/gemm.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

struct ConvGeom {
  const float* x;
  int64_t c, h, w;       // input channels and spatial size
  int64_t groups, cin_g;  // groups and input channels per group
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t oh, ow;
};

// Packs the im2col block rows [k0, k0+kc) x columns [n0, n0+nc) of batch
// (image, group) straight from the input, so no column buffer is ever built.
// Row k is (ci, i, j) of the kernel window, column is an output pixel.
void pack_im2col(const void* ctx, int64_t batch, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
  const ConvGeom& g = *static_cast<const ConvGeom*>(ctx);
  const int64_t image = batch / g.groups, group = batch % g.groups;
  const float* xb = g.x + (image * g.c + group * g.cin_g) * g.h * g.w;
  const int64_t window = g.kh * g.kw;
  const int64_t strip_stride = kc * kGemmNR;
  const int64_t padded = (nc + kGemmNR - 1) / kGemmNR * kGemmNR;
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t k = k0 + kk;
    const int64_t ci = k / window, i = (k % window) / g.kw, j = k % g.kw;
    const float* plane = xb + ci * g.h * g.w;
    float* row = dst + kk * kGemmNR;
    int64_t oh = n0 / g.ow, ow = n0 % g.ow;
    int64_t col = 0;
    while (col < nc) {
      const int64_t len = std::min(nc - col, g.ow - ow);
      const int64_t ih = oh * g.sh - g.ph + i * g.dh;
      const bool row_ok = ih >= 0 && ih < g.h;
      const float* src = plane + ih * g.w;
      int64_t iw = ow * g.sw - g.pw + j * g.dw;
      for (int64_t t = 0; t < len; ++t, iw += g.sw) {
        const int64_t c = col + t;
        row[(c / kGemmNR) * strip_stride + c % kGemmNR] = row_ok && iw >= 0 && iw < g.w ? src[iw] : 0.0f;
      }
      col += len;
      ow = 0;
      ++oh;
    }
    for (int64_t c = nc; c < padded; ++c) row[(c / kGemmNR) * strip_stride + c % kGemmNR] = 0.0f;
  }
}

// Depthwise (one input channel per group): each output plane is a sum of
// shifted, scaled input rows (onto bias + residual); the innermost loop runs along an output row.
void depthwise(const ConvGeom& g, int64_t images, int64_t cout, const float* weight, const float* bias,
               const float* residual, float* y) {
  const int64_t mult = cout / g.c;
  const int64_t plane_work = sat_mul(g.oh * g.ow, g.kh * g.kw);
  parallel_for(images * cout, grain_for(plane_work), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t image = p / cout, co = p % cout, ci = co / mult;
      const float* xp = g.x + (image * g.c + ci) * g.h * g.w;
      const float* wp = weight + co * g.kh * g.kw;
      float* yp = y + p * g.oh * g.ow;
      const float* rp = residual != nullptr ? residual + p * g.oh * g.ow : nullptr;
      const float b = bias != nullptr ? bias[co] : 0.0f;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        float* yr = yp + oh * g.ow;
        if (rp == nullptr) {
          std::fill(yr, yr + g.ow, b);
        } else {
          for (int64_t ow = 0; ow < g.ow; ++ow) yr[ow] = rp[oh * g.ow + ow] + b;
        }
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          const float* xr = xp + ih * g.w;
          for (int64_t j = 0; j < g.kw; ++j) {
            const float wv = wp[i * g.kw + j];
            const int64_t off = j * g.dw - g.pw;  // iw = ow * sw + off
            // Output columns whose input column lies inside the row.
            int64_t lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
            int64_t hi = g.w - 1 - off < 0 ? 0 : (g.w - 1 - off) / g.sw + 1;
            hi = std::min(hi, g.ow);
            if (g.sw == 1) {
              for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow + off];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * g.sw + off];
            }
          }
        }
      }
    }
  });
}

}  // namespace

Status conv2d_params(const char* op, Inputs in, size_t i, Conv2dParams* p) {
  KILN_RETURN_IF_ERROR(pair_arg(op, in, i, "stride", p->stride));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, i + 1, "padding", p->pad));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, i + 2, "dilation", p->dil));
  return int_arg(op, in, i + 3, "groups", &p->groups);
}

Status conv2d_forward(const char* op, const Tensor& x, const Tensor& wt, const Tensor* bias, const Tensor* residual,
                      const Conv2dParams& cp, Tensor& y) {
  KILN_RETURN_IF_ERROR(check_dtype(op, x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, wt, "weight", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));

  KILN_CHECK_OR_RETURN(x.dim() == 3 || x.dim() == 4, KernelFailure, "%s: input must be 3-D or 4-D, got %s", op,
                       describe(x).c_str());
  KILN_CHECK_OR_RETURN(wt.dim() == 4, KernelFailure, "%s: weight must be 4-D, got %s", op, describe(wt).c_str());
  const int64_t groups = cp.groups;
  KILN_CHECK_OR_RETURN(groups > 0, KernelFailure, "%s: groups must be positive, got %lld", op,
                       static_cast<long long>(groups));
  const bool batched = x.dim() == 4;
  const int64_t images = batched ? x.size(0) : 1;
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  const int64_t cout = wt.size(0), cin_g = wt.size(1), kh = wt.size(2), kw = wt.size(3);
  // Division only: groups may be any positive int64, so cin_g * groups could overflow.
  KILN_CHECK_OR_RETURN(c % groups == 0 && cout % groups == 0 && cin_g == c / groups, KernelFailure,
                       "%s: input %s and weight %s do not match groups=%lld", op, describe(x).c_str(),
                       describe(wt).c_str(), static_cast<long long>(groups));
  if (bias != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *bias, "bias", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(bias->dim() == 1 && bias->size(0) == cout, KernelFailure, "%s: bias must be [%lld], got %s",
                         op, static_cast<long long>(cout), describe(*bias).c_str());
  }
  Window wh, ww;
  KILN_RETURN_IF_ERROR(window_geometry(op, "height", h, kh, cp.stride[0], cp.pad[0], cp.dil[0], false, false, &wh));
  KILN_RETURN_IF_ERROR(window_geometry(op, "width", w, kw, cp.stride[1], cp.pad[1], cp.dil[1], false, false, &ww));
  const int64_t oh = wh.out, ow = ww.out;

  Dims sizes;
  if (batched) sizes.push(images);
  sizes.push(cout);
  sizes.push(oh);
  sizes.push(ow);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (residual != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *residual, "residual", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(same_sizes(residual->sizes(), y.sizes()), KernelFailure,
                         "%s: residual must have the output's shape %s, got %s", op,
                         describe_sizes(y.sizes()).c_str(), describe(*residual).c_str());
  }
  if (y.numel() == 0) return Status::ok();

  const ConvGeom g{x.data_as<const float>(), c, h, w, groups, cin_g, kh, kw, cp.stride[0], cp.stride[1],
                   cp.pad[0], cp.pad[1], cp.dil[0], cp.dil[1], oh, ow};
  const float* wp = wt.data_as<const float>();
  const float* bp = bias != nullptr ? bias->data_as<const float>() : nullptr;
  const float* rp = residual != nullptr ? residual->data_as<const float>() : nullptr;
  float* yp = y.data_as<float>();
  if (cin_g == 1 && groups > 1) {
    depthwise(g, images, cout, wp, bp, rp, yp);
    return Status::ok();
  }

  // C starts as residual + bias (when given); the GEMM accumulates onto it.
  const int64_t cout_g = cout / groups, hw = oh * ow;
  if (bp != nullptr || rp != nullptr) {
    parallel_for(images * cout, grain_for(hw), [&](int64_t b0, int64_t b1) {
      for (int64_t p = b0; p < b1; ++p) {
        float* plane = yp + p * hw;
        const float b = bp != nullptr ? bp[p % cout] : 0.0f;
        if (rp == nullptr) {
          std::fill(plane, plane + hw, b);
        } else {
          for (int64_t i = 0; i < hw; ++i) plane[i] = rp[p * hw + i] + b;
        }
      }
    });
  }
  // One GEMM per (image, group): [cout_g, cin_g*kh*kw] @ [cin_g*kh*kw, oh*ow].
  GemmProblem p;
  p.m = cout_g, p.n = hw, p.k = cin_g * kh * kw;
  p.a = wp, p.a_rs = p.k, p.a_cs = 1;
  p.c = yp, p.c_rs = hw;
  p.overwrite = bp == nullptr && rp == nullptr;
  p.batch_ndim = 2;
  p.batch_sizes[0] = images, p.batch_sizes[1] = groups;
  p.a_batch_strides[0] = 0, p.a_batch_strides[1] = cout_g * p.k;
  p.c_batch_stride = cout_g * hw;
  const bool pointwise = kh == 1 && kw == 1 && cp.stride[0] == 1 && cp.stride[1] == 1 && cp.pad[0] == 0 &&
                         cp.pad[1] == 0;
  if (pointwise) {
    // 1x1 convolution: the input planes already are the B matrix.
    p.b = g.x, p.b_rs = h * w, p.b_cs = 1;
    p.b_batch_strides[0] = c * h * w, p.b_batch_strides[1] = cin_g * h * w;
  } else {
    p.pack_b = pack_im2col;
    p.pack_b_ctx = &g;
  }
  gemm(p);
  return Status::ok();
}

Status conv2d_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::conv2d.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1));
  const Tensor *x, *w, *bias;
  Conv2dParams params;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "weight", &w));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "bias", &bias));
  KILN_RETURN_IF_ERROR(conv2d_params(op, in, 3, &params));
  return conv2d_forward(op, *x, *w, bias, nullptr, params, *out[0]);
}

KILN_REGISTER_KERNEL("aten::conv2d.default", "f32,f32|f32,f32,f32", conv2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
