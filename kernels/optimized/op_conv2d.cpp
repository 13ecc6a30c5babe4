// Optimized aten::conv2d.default and kiln::fused_conv2d.default (f32, NCHW).
//
// Per (image, group) a convolution is the GEMM out[co, p] = sum_k W[co, k] * X[k, p]
// with k = (ci, i, j) over the window and p an output pixel: the weights are A,
// read in place (their rows are contiguous), and B is packed straight from the
// input by an implicit im2col (or read as is for a 1x1 stride-1 convolution),
// with the bias per output channel, the residual and the activation fused into
// the GEMM's epilogue. Depthwise convolutions run a direct kernel
// (conv_depthwise.cpp) with the same epilogue.
#include <algorithm>
#include <memory>

#include "common/kernel_args.h"
#include "common/window.h"
#include "optimized/conv2d.h"
#include "optimized/gemm_driver.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr const char* kConv2d = "aten::conv2d.default";
constexpr const char* kFusedConv2d = "kiln::fused_conv2d.default";

// Checks the arguments like the portable kernel and resizes the output.
Status conv_args(const char* op, bool fused, Inputs in, Outputs out, ConvGeom* g) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, fused ? 11 : 7, 1));
  const Tensor *x, *wt, *bias, *residual = nullptr;
  int64_t stride[2], pad[2], dil[2], groups;
  const size_t at = fused ? 4 : 3;  // the first int argument
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "input", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "weight", &wt));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 2, "bias", &bias));
  if (fused) KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 3, "residual", &residual));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, at, "stride", stride));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, at + 1, "padding", pad));
  KILN_RETURN_IF_ERROR(pair_arg(op, in, at + 2, "dilation", dil));
  KILN_RETURN_IF_ERROR(int_arg(op, in, at + 3, "groups", &groups));
  if (fused) KILN_RETURN_IF_ERROR(activation_arg(op, in, at + 4, &g->act));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, *x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, *wt, "weight", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x->dim() == 3 || x->dim() == 4, KernelFailure, "%s: input must be 3-D or 4-D, got %s", op,
                       describe(*x).c_str());
  KILN_CHECK_OR_RETURN(wt->dim() == 4, KernelFailure, "%s: weight must be 4-D, got %s", op, describe(*wt).c_str());
  KILN_CHECK_OR_RETURN(groups > 0, KernelFailure, "%s: groups must be positive, got %lld", op,
                       static_cast<long long>(groups));
  const bool batched = x->dim() == 4;
  g->images = batched ? x->size(0) : 1;
  g->c = x->size(-3), g->h = x->size(-2), g->w = x->size(-1);
  g->cout = wt->size(0), g->cin_g = wt->size(1), g->kh = wt->size(2), g->kw = wt->size(3);
  g->groups = groups;
  // Division only: groups may be any positive int64, so cin_g * groups could overflow.
  KILN_CHECK_OR_RETURN(g->c % groups == 0 && g->cout % groups == 0 && g->cin_g == g->c / groups, KernelFailure,
                       "%s: input %s and weight %s do not match groups=%lld", op, describe(*x).c_str(),
                       describe(*wt).c_str(), static_cast<long long>(groups));
  if (bias != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *bias, "bias", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(bias->dim() == 1 && bias->size(0) == g->cout, KernelFailure,
                         "%s: bias must be [%lld], got %s", op, static_cast<long long>(g->cout),
                         describe(*bias).c_str());
  }
  Window wh, ww;
  KILN_RETURN_IF_ERROR(window_geometry(op, "height", g->h, g->kh, stride[0], pad[0], dil[0], false, false, &wh));
  KILN_RETURN_IF_ERROR(window_geometry(op, "width", g->w, g->kw, stride[1], pad[1], dil[1], false, false, &ww));
  g->sh = stride[0], g->sw = stride[1], g->ph = pad[0], g->pw = pad[1], g->dh = dil[0], g->dw = dil[1];
  g->oh = wh.out, g->ow = ww.out;
  Dims sizes;
  if (batched) sizes.push(g->images);
  sizes.push(g->cout);
  sizes.push(g->oh);
  sizes.push(g->ow);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (residual != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *residual, "residual", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(same_sizes(residual->sizes(), y.sizes()), KernelFailure,
                         "%s: residual %s must have the output's shape %s", op, describe(*residual).c_str(),
                         describe_sizes(y.sizes()).c_str());
  }
  g->x = x->data_as<const float>();
  g->weight = wt->data_as<const float>();
  g->bias = bias != nullptr ? bias->data_as<const float>() : nullptr;
  g->residual = residual != nullptr ? residual->data_as<const float>() : nullptr;
  g->y = y.data_as<float>();
  return Status::ok();
}

bool is_depthwise(const ConvGeom& g) { return g.cin_g == 1 && g.groups > 1; }
bool is_pointwise(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// Writes columns [col, col + len) of one row of a B block in panels (kc rows of
// nr floats each, see PackBFn) from src[t * stride], or zeros when src is null.
void put_run(float* row, int64_t kc, int nr, int64_t col, int64_t len, const float* src, int64_t stride) {
  while (len > 0) {
    const int64_t c = col % nr, piece = std::min<int64_t>(len, nr - c);
    float* d = row + col / nr * kc * nr + c;
    if (src == nullptr) {
      std::fill(d, d + piece, 0.0f);
    } else if (stride == 1) {
      std::copy(src, src + piece, d);
      src += piece;
    } else {
      for (int64_t t = 0; t < piece; ++t, src += stride) d[t] = *src;
    }
    col += piece;
    len -= piece;
  }
}

// The implicit im2col (a PackBFn): rows [k0, k0 + kc) of the column matrix of
// batch (image, group), row k being the window tap (ci, i, j), for the output
// pixels [n0, n0 + nc), written straight from the input.
void pack_im2col(const void* ctx, int64_t batch, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst) {
  const ConvGeom& g = *static_cast<const ConvGeom*>(ctx);
  const int64_t image = batch / g.groups, group = batch % g.groups;
  const float* xb = g.x + (image * g.c + group * g.cin_g) * g.h * g.w;
  const int64_t window = g.kh * g.kw;
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t k = k0 + kk;
    const int64_t i = k % window / g.kw, j = k % g.kw;
    const float* plane = xb + k / window * g.h * g.w;
    float* row = dst + kk * nr;
    // Input column of output column o: o * sw + off; those inside the row are [o_lo, o_hi).
    const int64_t off = j * g.dw - g.pw;
    const int64_t o_lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
    const int64_t o_hi = g.w - 1 - off < 0 ? 0 : (g.w - 1 - off) / g.sw + 1;
    int64_t oh = n0 / g.ow, ow = n0 % g.ow, col = 0;
    while (col < nc) {
      const int64_t len = std::min(nc - col, g.ow - ow), end = ow + len;
      const int64_t ih = oh * g.sh - g.ph + i * g.dh;
      if (ih < 0 || ih >= g.h) {
        put_run(row, kc, nr, col, len, nullptr, 0);
      } else {
        const int64_t lo = std::min(std::max(ow, o_lo), end), hi = std::max(lo, std::min(end, o_hi));
        put_run(row, kc, nr, col, lo - ow, nullptr, 0);
        put_run(row, kc, nr, col + lo - ow, hi - lo, plane + ih * g.w + lo * g.sw + off, g.sw);
        put_run(row, kc, nr, col + hi - ow, end - hi, nullptr, 0);
      }
      col += len;
      ow = 0;
      ++oh;
    }
    put_run(row, kc, nr, nc, (nc + nr - 1) / nr * nr - nc, nullptr, 0);
  }
}

// The convolution as one GEMM per (image, group).
Status conv_gemm(const ConvGeom& g, const F32GemmKernels& kernels, const KernelContext& ctx, size_t scratch) {
  const int64_t cout_g = g.cout / g.groups, hw = g.oh * g.ow;
  GemmProblem p;
  p.m = cout_g, p.n = hw, p.k = g.cin_g * g.kh * g.kw;
  p.a = g.weight, p.lda = p.k;
  p.c = g.y, p.ldc = hw;
  p.batches.ndim = 2;
  p.batches.sizes[0] = g.images, p.batches.sizes[1] = g.groups;
  p.batches.a_strides[1] = cout_g * p.k;
  p.batches.bias_strides[1] = cout_g;
  p.batches.c_stride = cout_g * hw;
  p.bias = g.bias, p.bias_per_row = true;
  p.residual = g.residual;
  p.act = g.act;
  if (is_pointwise(g)) {
    // The input planes of a group already are B [cin_g, h * w].
    p.b = g.x, p.b_rs = g.h * g.w, p.b_cs = 1;
    p.batches.b_strides[0] = g.c * g.h * g.w, p.batches.b_strides[1] = g.cin_g * g.h * g.w;
  } else {
    p.pack_b = pack_im2col;
    p.pack_b_ctx = &g;
  }
  return gemm(kernels, p, ctx, scratch);
}

struct ConvState {
  Isa isa = Isa::Baseline;
  bool depthwise = false;
  size_t scratch = 0;  // per worker
};

Status prepare(const char* op, bool fused, KernelContext& ctx, Inputs in, Outputs out, void** state) {
  ConvGeom g;
  Status st = conv_args(op, fused, in, out, &g);
  // Malformed arguments: the portable kernel serves, and reports them at run.
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  auto s = std::make_unique<ConvState>();
  s->isa = ctx.isa;
  if (is_depthwise(g)) {
    s->scratch = depthwise_scratch_bytes(g, ctx.isa);
    s->depthwise = s->scratch > 0;
  }
  if (!s->depthwise) s->scratch = gemm_worker_scratch_bytes(f32_gemm_for(ctx.isa), g.oh * g.ow, false);
  ctx.worker_scratch_bytes = s->scratch;
  *state = s.release();
  return Status::ok();
}

Status run(const char* op, bool fused, KernelContext& ctx, Inputs in, Outputs out) {
  const auto& s = *static_cast<const ConvState*>(ctx.state);
  ConvGeom g;
  KILN_RETURN_IF_ERROR(conv_args(op, fused, in, out, &g));
  if (out[0]->numel() == 0) return Status::ok();
  if (s.depthwise && is_depthwise(g)) return depthwise_conv(g, s.isa, ctx, s.scratch);
  return conv_gemm(g, f32_gemm_for(s.isa), ctx, s.scratch);
}

void release(void* state) { delete static_cast<ConvState*>(state); }

Status conv2d_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kConv2d, false, ctx, in, out, state);
}
Status conv2d_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kConv2d, false, ctx, in, out); }
Status fused_conv2d_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return prepare(kFusedConv2d, true, ctx, in, out, state);
}
Status fused_conv2d_run(KernelContext& ctx, Inputs in, Outputs out) { return run(kFusedConv2d, true, ctx, in, out); }

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kConv2d, "f32,f32|f32,f32,f32", conv2d_run, conv2d_prepare, release);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, kFusedConv2d, "f32,f32|f32,f32,f32|f32,f32,f32,f32", fused_conv2d_run,
                            fused_conv2d_prepare, release);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
