// Optimized aten::conv2d.default and kiln::fused_conv2d.default (f32, NCHW).
//
// Per (image, group) a convolution is the GEMM out[co, p] = sum_k W[co, k] * X[k, p]
// with k = (ci, i, j) over the window and p an output pixel: the weights are A,
// read in place (their rows are contiguous), and B is packed straight from the
// input by an implicit im2col (f32_im2col.h; a 1x1 stride-1 convolution's input is B as is),
// with the bias per output channel, the residual and the activation fused into
// the GEMM's epilogue. Depthwise convolutions run a direct kernel
// (conv_depthwise.cpp) with the same epilogue.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "optimized/conv2d.h"
#include "optimized/f32_im2col.h"
#include "optimized/f32_layout.h"
#include "optimized/gemm_activation.h"
#include "optimized/gemm_driver.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr const char* kConv2d = "aten::conv2d.default";
constexpr const char* kFusedConv2d = "kiln::fused_conv2d.default";

// Checks the arguments as the portable kernel does (common/conv2d_args.h) and resizes the output;
// `prepare`: at method load (see tensor_arg).
Status conv_args(const char* op, bool fused, bool prepare, Inputs in, Outputs out, ConvGeom* g, const Tensor** weight) {
  Conv2dArgs a;
  KILN_RETURN_IF_ERROR(conv2d_args(op, fused, prepare, in, out, &a));
  static_cast<Conv2dShape&>(*g) = a.shape;
  g->act = a.act;
  g->x = a.x->data_as<const float>();
  g->weight = a.weight->data_as<const float>();
  g->bias = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  g->residual = a.residual != nullptr ? a.residual->data_as<const float>() : nullptr;
  g->y = out[0]->data_as<float>();
  *weight = a.weight;
  return Status::ok();
}

bool is_depthwise(const ConvGeom& g) { return g.cin_g == 1 && g.groups > 1; }
bool is_pointwise(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// The convolution as one GEMM per (image, group).
Status conv_gemm(const ConvGeom& g, Isa isa, const KernelContext& ctx, size_t scratch) {
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
    p.pack_b = f32_im2col_for(isa).pack;
    p.pack_b_ctx = &g;
  }
  return gemm(f32_gemm_for(isa), p, ctx, scratch);
}

// Small images (the last stages of a CNN) leave most of an nr-wide panel of
// output pixels empty. There the product runs transposed, vectorized over the
// output channels instead: C^T[p, co] = im2col(x)^T[p, k] @ W^T[k, co], with
// W^T prepacked like a linear weight, blocks of im2col(x)^T made as the GEMM
// needs them, and C^T (in call scratch) written into out's layout at the end,
// with the residual and the activation (images folded into the rows). Groups
// are batches: group g's columns of C^T are output channels g * cout_g on.

// Floats of call scratch the transposed path needs, or 0 when it should not serve.
int64_t transposed_scratch_floats(const ConvGeom& g, const F32GemmKernels& kr) {
  const int64_t hw = g.oh * g.ow, k = g.cin_g * g.kh * g.kw;
  // A group's output channels fill at least half a panel (EfficientNet's grouped expansions do).
  if (k == 0 || g.cout / g.groups < kr.nr / 2) return 0;
  // Worth it when the pixels waste more than a tenth of the panels.
  const int64_t padded = (hw + kr.nr - 1) / kr.nr * kr.nr;
  if (padded * 10 <= hw * 11) return 0;
  constexpr int64_t kMaxFloats = int64_t{2} << 20;  // 8 MB
  const int64_t rows = g.images * hw;
  if (g.cout > kMaxFloats || rows > kMaxFloats / g.cout) return 0;
  return rows * g.cout;
}

// A PackAFn: rows [m0, m0 + mc) of im2col(x)^T (row r = image * pixels + p
// holds the taps k = (ci, i, j) of output pixel p), columns [k0, k0 + kc).
// Tap by tap, so that the input is read along its rows (the block is small
// enough to stay in L1 while its columns are written).
void pack_im2col_transposed(const void* ctx, int64_t group, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* dst,
                            int64_t ld) {
  const ConvGeom& g = *static_cast<const ConvGeom*>(ctx);
  const int64_t c0 = group * g.cin_g;
  const int64_t hw = g.oh * g.ow, window = g.kh * g.kw;
  int64_t ci = k0 / window, i = k0 % window / g.kw, j = k0 % g.kw;  // the tap of column k0
  for (int64_t t = 0; t < kc; ++t) {
    float* d = dst + t;
    // Input column of output column o: o * sw + off; those inside the input row are [o_lo, o_hi).
    const int64_t off = j * g.dw - g.pw;
    const int64_t o_lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
    const int64_t o_hi = g.w - 1 - off < 0 ? 0 : (g.w - 1 - off) / g.sw + 1;
    int64_t image = m0 / hw, oh = m0 % hw / g.ow, o = m0 % g.ow;
    for (int64_t n = 0; n < mc;) {  // runs of pixels along one output row
      const int64_t len = std::min(mc - n, g.ow - o), end = o + len;
      const int64_t ih = oh * g.sh - g.ph + i * g.dh;
      if (ih < 0 || ih >= g.h) {
        for (int64_t q = o; q < end; ++q, d += ld) *d = 0.0f;
      } else {
        const float* row = g.x + ((image * g.c + c0 + ci) * g.h + ih) * g.w + off;
        const int64_t lo = std::min(std::max(o, o_lo), end), hi = std::max(lo, std::min(end, o_hi));
        for (int64_t q = o; q < lo; ++q, d += ld) *d = 0.0f;
        for (int64_t q = lo; q < hi; ++q, d += ld) *d = row[q * g.sw];
        for (int64_t q = hi; q < end; ++q, d += ld) *d = 0.0f;
      }
      n += len, o = 0;
      if (++oh == g.oh) oh = 0, ++image;
    }
    if (++j == g.kw) {
      j = 0;
      if (++i == g.kh) i = 0, ++ci;
    }
  }
}

Status conv_transposed(const ConvGeom& g, Isa isa, const float* packed_wt, const KernelContext& ctx,
                       size_t worker_scratch, size_t call_scratch) {
  const F32GemmKernels& kr = f32_gemm_for(isa);
  const int64_t hw = g.oh * g.ow, k = g.cin_g * g.kh * g.kw, rows = g.images * hw, cout_g = g.cout / g.groups;
  KILN_CHECK_OR_RETURN(static_cast<size_t>(rows * g.cout) * sizeof(float) <= call_scratch, KernelFailure,
                       "conv2d: the scratch planned at load does not fit this input");
  float* ct = static_cast<float*>(ctx.scratch);
  GemmProblem p;
  p.m = rows, p.n = cout_g, p.k = k;
  p.pack_a = is_pointwise(g) ? f32_im2col_for(isa).pack_pointwise_transposed : pack_im2col_transposed;
  p.pack_a_ctx = &g;
  p.packed_b = packed_wt;
  p.c = ct, p.ldc = g.cout;
  p.bias = g.bias;
  // Without a residual, an activation the GEMM applies in registers is applied there.
  const bool act_in_gemm = g.residual == nullptr && !activation_after_tile(g.act.kind);
  if (act_in_gemm) p.act = g.act;
  p.batches.ndim = 1;
  p.batches.sizes[0] = g.groups;
  p.batches.b_strides[0] = k * ((cout_g + kr.nr - 1) / kr.nr * kr.nr);
  p.batches.bias_strides[0] = cout_g;
  p.batches.c_stride = cout_g;
  KILN_RETURN_IF_ERROR(gemm(kr, p, ctx, worker_scratch));
  // out[image, co, p] = act(C^T[image * hw + p, co] + residual[image, co, p]): blocks of channels
  // transposed into their planes, then the residual and the activation along the planes.
  const F32LayoutKernels& layout = f32_layout_for(isa);
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (g.cout + kBlock - 1) / kBlock;
  const bool finish = !act_in_gemm && (g.residual != nullptr || g.act.kind != Activation::None);
  parallel_for(g.images * blocks, grain_for(hw * kBlock * 2), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t image = b / blocks, c0 = b % blocks * kBlock, channels = std::min(g.cout - c0, kBlock);
      const int64_t at = (image * g.cout + c0) * hw;
      layout.transpose(ct + image * hw * g.cout + c0, g.cout, hw, channels, g.y + at, hw);
      if (finish)
        layout.add_activate(g.y + at, g.residual != nullptr ? g.residual + at : nullptr, channels * hw, g.act.kind,
                            g.act.lo, g.act.hi);
    }
  });
  return Status::ok();
}

// Whether every |x| of the input is below 2^64 (NaN and infinities are not). Winograd's
// transforms add and subtract neighbouring inputs before the products: one infinity becomes
// inf - inf = NaN where the reference sums a single infinite product, and a finite value near
// FLT_MAX overflows in U * V where the reference's w * x does not. Below 2^64 the transforms'
// sums (4 inputs, then cin products of up to 9/4 max|w|, then 9 of those) stay finite unless
// cin * max|w| exceeds 2^60. Other inputs take the GEMM path, which forms the reference's
// products. The magnitude bits are compared as integers (a loop the compiler vectorizes), one read
// of the input per call, in parallel.
bool winograd_input_ok(const ConvGeom& g) {
  constexpr int32_t kBound = (127 + 64) << 23;  // the bits of 2^64
  const int64_t n = g.images * g.c * g.h * g.w;
  std::atomic<bool> ok{true};
  parallel_for(n, int64_t{1} << 16, [&](int64_t i0, int64_t i1) {
    int32_t over = 0;
    for (int64_t i = i0; i < i1; ++i) {
      uint32_t bits;
      std::memcpy(&bits, g.x + i, sizeof bits);
      over |= static_cast<int32_t>(bits & 0x7fffffffu) >= kBound;
    }
    if (over != 0) ok.store(false, std::memory_order_relaxed);
  });
  return ok.load(std::memory_order_relaxed);
}

enum class ConvPath : uint8_t { Gemm, Depthwise, DepthwiseChannels, Direct, Winograd, WinogradChannels, Transposed };

struct ConvState {
  Isa isa = Isa::Baseline;
  ConvPath path = ConvPath::Gemm;
  size_t scratch = 0;  // per worker
  // Channel-block depthwise, Winograd and transposed: the weights transformed or packed at load, the
  // weight they came from, and the call scratch.
  const float* packed = nullptr;
  const void* packed_from = nullptr;
  size_t call_scratch = 0;
};

Status prepare(const char* op, bool fused, KernelContext& ctx, Inputs in, Outputs out, void** state) {
  ConvGeom g;
  const Tensor* weight;
  Status st = conv_args(op, fused, true, in, out, &g, &weight);
  // Malformed arguments: the portable kernel serves, and reports them at run.
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  auto s = std::make_unique<ConvState>();
  s->isa = ctx.isa;
  const F32GemmKernels& kr = f32_gemm_for(ctx.isa);
  if (is_depthwise(g) && weight->is_constant()) {
    const size_t scratch = depthwise_channels_scratch_bytes(g, ctx.isa);
    if (scratch > 0) {
      Result<const float*> packed = depthwise_channels_weights(ctx, *weight, g);
      if (!packed.ok()) return packed.status();
      s->path = ConvPath::DepthwiseChannels;
      s->packed = packed.value();
      s->scratch = scratch;
    }
  }
  if (is_depthwise(g) && s->path == ConvPath::Gemm) {
    s->scratch = depthwise_scratch_bytes(g, ctx.isa);
    if (s->scratch > 0) s->path = ConvPath::Depthwise;
  }
  if (s->path == ConvPath::Gemm && weight->is_constant()) {
    const size_t call = direct_call_scratch_bytes(g, ctx.isa);
    if (call > 0) {
      Result<const float*> packed = direct_weights(ctx, *weight, g);
      if (!packed.ok()) return packed.status();
      s->path = ConvPath::Direct;
      s->packed = packed.value();
      s->scratch = direct_worker_scratch_bytes(g, ctx.isa);
      s->call_scratch = call;
    }
  }
  if (s->path == ConvPath::Gemm && weight->is_constant()) {
    s->call_scratch = winograd_call_scratch_bytes(g, ctx.isa);
    if (s->call_scratch > 0) {
      Result<const float*> u = winograd_weights(ctx, *weight, g);
      if (!u.ok()) return u.status();
      s->path = ConvPath::Winograd;
      s->packed = u.value();
      s->scratch = winograd_worker_scratch_bytes(g, ctx.isa);
    }
  }
  if (s->path == ConvPath::Gemm && weight->is_constant() && transposed_scratch_floats(g, kr) > 0) {
    // Images too small for vectors of tiles (those that would otherwise run transposed).
    s->call_scratch = winograd_channels_call_scratch_bytes(g, ctx.isa);
    if (s->call_scratch > 0) {
      Result<const float*> packed = winograd_channels_weights(ctx, *weight, g);
      if (!packed.ok()) return packed.status();
      s->path = ConvPath::WinogradChannels;
      s->packed = packed.value();
      s->scratch = winograd_channels_worker_scratch_bytes(g, ctx.isa);
    }
  }
  if (s->path == ConvPath::Gemm && weight->is_constant()) {
    const int64_t floats = transposed_scratch_floats(g, kr);
    if (floats > 0) {
      // B_group[k][co] = W[group * cout_g + co][k].
      const int64_t k = g.cin_g * g.kh * g.kw, cout_g = g.cout / g.groups;
      Result<const float*> packed = prepack_b(ctx, kr, *weight, 1, k, k, cout_g, g.groups, cout_g * k);
      if (!packed.ok()) return packed.status();
      s->path = ConvPath::Transposed;
      s->packed = packed.value();
      s->scratch = gemm_worker_scratch_bytes(kr, g.cout / g.groups, true);
      s->call_scratch = static_cast<size_t>(floats) * sizeof(float);
    }
  }
  s->packed_from = weight->data();
  ctx.scratch_bytes = s->call_scratch;
  if (s->path == ConvPath::Gemm || s->path == ConvPath::Winograd || s->path == ConvPath::WinogradChannels) {
    // Winograd falls back to the GEMM for inputs it would get wrong (winograd_input_ok).
    s->scratch = std::max(s->scratch, gemm_worker_scratch_bytes(kr, g.oh * g.ow, false));
  }
  ctx.worker_scratch_bytes = s->scratch;
  *state = s.release();
  return Status::ok();
}

Status run(const char* op, bool fused, KernelContext& ctx, Inputs in, Outputs out) {
  const auto& s = *static_cast<const ConvState*>(ctx.state);
  ConvGeom g;
  const Tensor* weight;
  KILN_RETURN_IF_ERROR(conv_args(op, fused, false, in, out, &g, &weight));
  if (out[0]->numel() == 0) return Status::ok();
  KILN_CHECK_OR_RETURN(s.packed == nullptr || weight->data() == s.packed_from, KernelFailure,
                       "%s: the weight is not the constant packed at load", op);
  switch (s.path) {
    case ConvPath::Depthwise: return depthwise_conv(g, s.isa, ctx, s.scratch);
    case ConvPath::DepthwiseChannels: return depthwise_channels_conv(g, s.isa, s.packed, ctx, s.scratch);
    case ConvPath::Direct: return direct_conv(g, s.isa, s.packed, ctx, s.scratch, s.call_scratch);
    case ConvPath::Winograd:
      if (!winograd_input_ok(g)) break;
      return winograd_conv(g, s.isa, s.packed, ctx, s.scratch, s.call_scratch);
    case ConvPath::WinogradChannels:
      if (!winograd_input_ok(g)) break;
      return winograd_channels_conv(g, s.isa, s.packed, ctx, s.scratch, s.call_scratch);
    case ConvPath::Transposed: return conv_transposed(g, s.isa, s.packed, ctx, s.scratch, s.call_scratch);
    case ConvPath::Gemm: break;
  }
  return conv_gemm(g, s.isa, ctx, s.scratch);
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
