// aten::conv2d.default and kiln::fused_conv2d.default (act(conv2d + residual), the operator the
// exporter's fusion passes produce): grouped 2-D convolution (implicit-im2col GEMM, direct depthwise).
#include <algorithm>

#include "common/conv2d_args.h"
#include "portable/gemm.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// A validated convolution and its input.
struct ConvGeom : Conv2dShape {
  const float* x;
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
void depthwise(const ConvGeom& g, const float* weight, const float* bias, const float* residual, float* y) {
  const int64_t cout = g.cout, mult = cout / g.c;
  const int64_t plane_work = sat_mul(g.oh * g.ow, g.kh * g.kw);
  parallel_for(g.images * cout, grain_for(plane_work), [&](int64_t begin, int64_t end) {
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

// One GEMM per (image, group): [cout_g, cin_g*kh*kw] @ [cin_g*kh*kw, oh*ow], onto bias + residual.
void conv_gemm(const ConvGeom& g, const float* weight, const float* bias, const float* residual, float* y) {
  const int64_t cout = g.cout, cout_g = cout / g.groups, hw = g.oh * g.ow;
  // C starts as residual + bias (when given); the GEMM accumulates onto it.
  if (bias != nullptr || residual != nullptr) {
    parallel_for(g.images * cout, grain_for(hw), [&](int64_t b0, int64_t b1) {
      for (int64_t p = b0; p < b1; ++p) {
        float* plane = y + p * hw;
        const float b = bias != nullptr ? bias[p % cout] : 0.0f;
        if (residual == nullptr) {
          std::fill(plane, plane + hw, b);
        } else {
          for (int64_t i = 0; i < hw; ++i) plane[i] = residual[p * hw + i] + b;
        }
      }
    });
  }
  GemmProblem p;
  p.m = cout_g, p.n = hw, p.k = g.cin_g * g.kh * g.kw;
  p.a = weight, p.a_rs = p.k, p.a_cs = 1;
  p.c = y, p.c_rs = hw;
  p.overwrite = bias == nullptr && residual == nullptr;
  p.batch_ndim = 2;
  p.batch_sizes[0] = g.images, p.batch_sizes[1] = g.groups;
  p.a_batch_strides[0] = 0, p.a_batch_strides[1] = cout_g * p.k;
  p.c_batch_stride = cout_g * hw;
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
  if (pointwise) {
    // 1x1 convolution: the input planes already are the B matrix.
    p.b = g.x, p.b_rs = g.h * g.w, p.b_cs = 1;
    p.b_batch_strides[0] = g.c * g.h * g.w, p.b_batch_strides[1] = g.cin_g * g.h * g.w;
  } else {
    p.pack_b = pack_im2col;
    p.pack_b_ctx = &g;
  }
  gemm(p);
}

// y (resized by conv2d_args) onto bias and residual, then the activation.
void conv2d_forward(const Conv2dArgs& a, Tensor& y) {
  if (y.numel() == 0) return;
  const ConvGeom g{a.shape, a.x->data_as<const float>()};
  const float* weight = a.weight->data_as<const float>();
  const float* bias = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  const float* residual = a.residual != nullptr ? a.residual->data_as<const float>() : nullptr;
  float* yp = y.data_as<float>();
  if (g.cin_g == 1 && g.groups > 1) {
    depthwise(g, weight, bias, residual, yp);
  } else {
    conv_gemm(g, weight, bias, residual, yp);
  }
  apply_activation(a.act, yp, y.numel());
}

Status conv2d(const char* op, bool fused, Inputs in, Outputs out) {
  Conv2dArgs a;
  KILN_RETURN_IF_ERROR(conv2d_args(op, fused, /*at_prepare=*/false, in, out, &a));
  conv2d_forward(a, *out[0]);
  return Status::ok();
}

}  // namespace

Status conv2d_run(KernelContext&, Inputs in, Outputs out) { return conv2d("aten::conv2d.default", false, in, out); }
// (input, weight, bias?, residual?, stride, padding, dilation, groups, activation, act_min, act_max)
Status fused_conv2d_run(KernelContext&, Inputs in, Outputs out) {
  return conv2d("kiln::fused_conv2d.default", true, in, out);
}

KILN_REGISTER_KERNEL("aten::conv2d.default", "f32,f32|f32,f32,f32", conv2d_run);
// The dtypes of the tensors present: input and weight, then bias and/or residual.
KILN_REGISTER_KERNEL("kiln::fused_conv2d.default", "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_conv2d_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
