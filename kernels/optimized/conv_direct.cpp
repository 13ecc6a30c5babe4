// Direct convolution for few input channels (conv2d.h, f32_conv_direct.h): the stems of CNNs.
//
// Per call the input is copied once, zero-padded, into call scratch; tasks (image, block of
// output channels, band of output rows) compute pixel-major vectors of channels into worker
// scratch and transpose them into the output planes (f32_layout.h).
#include <algorithm>
#include <string>

#include "common/shape_math.h"
#include "kiln/thread_pool.h"
#include "optimized/conv2d.h"
#include "optimized/f32_conv_direct.h"
#include "optimized/f32_layout.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

// Input channels (per group) up to which the direct kernel serves: beyond, the GEMM paths have
// enough K per pixel to run at their speed.
constexpr int64_t kDirectMaxChannels = 4;
// A band's output (pixel-major) stays in L1.
constexpr int64_t kBandFloats = 8 * 1024;
constexpr int64_t kMaxCallFloats = int64_t{4} << 20;  // 16 MB of padded input

struct DirectPlan {
  int64_t hp = 0, wp = 0;  // padded input plane
  int64_t vectors = 0, cols = 0, blocks = 0;
  int64_t band_rows = 0;
};

DirectPlan plan_of(const ConvGeom& g, const F32ConvDirectKernels& k) {
  DirectPlan p;
  // Padded rows and columns reach the input's end and the last window's.
  p.hp = std::max(g.ph + g.h, sat_mul(g.oh - 1, g.sh) + sat_mul(g.kh - 1, g.dh) + 1);
  p.wp = std::max(g.pw + g.w, sat_mul(g.ow - 1, g.sw) + sat_mul(g.kw - 1, g.dw) + 1);
  p.vectors = std::min<int64_t>(k.max_vectors, (g.cout + k.width - 1) / k.width);
  p.cols = p.vectors * k.width;
  p.blocks = (g.cout + p.cols - 1) / p.cols;
  p.band_rows = std::max<int64_t>(1, std::min(g.oh, kBandFloats / std::max<int64_t>(1, sat_mul(g.ow, p.cols))));
  return p;
}

int64_t call_floats(const ConvGeom& g, const DirectPlan& p) { return sat_mul(sat_mul(g.images * g.c, p.hp), p.wp); }

struct WeightsArg {
  const float* w;
  int64_t cout, taps, cols;
};

// [block][tap][lane] = w[block * cols + lane][tap], zero past the last channel.
void pack_weights(const void* arg, void* dst) {
  const WeightsArg& a = *static_cast<const WeightsArg*>(arg);
  float* out = static_cast<float*>(dst);
  const int64_t blocks = (a.cout + a.cols - 1) / a.cols;
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t t = 0; t < a.taps; ++t)
      for (int64_t l = 0; l < a.cols; ++l) {
        const int64_t co = b * a.cols + l;
        out[(b * a.taps + t) * a.cols + l] = co < a.cout ? a.w[co * a.taps + t] : 0.0f;
      }
}

}  // namespace

size_t direct_call_scratch_bytes(const ConvGeom& g, Isa isa) {
  if (g.groups != 1 || g.cin_g > kDirectMaxChannels || (g.kh == 1 && g.kw == 1)) return 0;
  const int64_t floats = call_floats(g, plan_of(g, f32_conv_direct_for(isa)));
  return floats <= kMaxCallFloats ? static_cast<size_t>(floats) * sizeof(float) : 0;
}

size_t direct_worker_scratch_bytes(const ConvGeom& g, Isa isa) {
  const DirectPlan p = plan_of(g, f32_conv_direct_for(isa));
  return static_cast<size_t>(p.band_rows * g.ow * p.cols) * sizeof(float);
}

Result<const float*> direct_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g) {
  const DirectPlan p = plan_of(g, f32_conv_direct_for(ctx.isa));
  const int64_t taps = g.cin_g * g.kh * g.kw;
  const WeightsArg arg{weight.data_as<const float>(), g.cout, taps, p.cols};
  const size_t bytes = static_cast<size_t>(p.blocks * taps * p.cols) * sizeof(float);
  const std::string layout = format("f32-conv-direct-cols%lld-taps%lld-cout%lld", static_cast<long long>(p.cols),
                                    static_cast<long long>(taps), static_cast<long long>(g.cout));
  Result<const void*> packed = packed_constant(ctx, weight, layout.c_str(), bytes, pack_weights, &arg);
  if (!packed.ok()) return packed.status();
  return static_cast<const float*>(packed.value());
}

Status direct_conv(const ConvGeom& g, Isa isa, const float* packed, const KernelContext& ctx, size_t worker_bytes,
                   size_t call_bytes) {
  const F32ConvDirectKernels& k = f32_conv_direct_for(isa);
  const F32LayoutKernels& layout = f32_layout_for(isa);
  const DirectPlan p = plan_of(g, k);
  KILN_CHECK_OR_RETURN(static_cast<size_t>(call_floats(g, p)) * sizeof(float) <= call_bytes &&
                           static_cast<size_t>(p.band_rows * g.ow * p.cols) * sizeof(float) <= worker_bytes,
                       KernelFailure, "conv2d: the scratch planned at load does not fit this input");
  float* padded = static_cast<float*>(ctx.scratch);
  const int64_t plane_in = g.h * g.w, plane_pad = p.hp * p.wp;
  parallel_for(g.images * g.c, grain_for(plane_pad), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* dst = padded + b * plane_pad;
      std::fill(dst, dst + g.ph * p.wp, 0.0f);
      for (int64_t r = 0; r < g.h; ++r) {
        float* row = dst + (g.ph + r) * p.wp;
        std::fill(row, row + g.pw, 0.0f);
        std::copy(g.x + b * plane_in + r * g.w, g.x + b * plane_in + (r + 1) * g.w, row + g.pw);
        std::fill(row + g.pw + g.w, row + p.wp, 0.0f);
      }
      std::fill(dst + (g.ph + g.h) * p.wp, dst + plane_pad, 0.0f);
    }
  });

  const int64_t bands = (g.oh + p.band_rows - 1) / p.band_rows, taps = g.cin_g * g.kh * g.kw;
  const int64_t plane_out = g.oh * g.ow;
  const bool raw = g.residual != nullptr;  // the activation follows the residual, after the transpose
  const int64_t work = sat_mul(sat_mul(p.band_rows * g.ow, taps), p.cols);
  parallel_for(g.images * p.blocks * bands, grain_for(work), [&](int64_t t0, int64_t t1) {
    float* out = static_cast<float*>(worker_scratch(ctx));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t band = t % bands, block = t / bands % p.blocks, image = t / bands / p.blocks;
      const int64_t c0 = block * p.cols, channels = std::min(p.cols, g.cout - c0);
      ConvDirectRows a;
      a.x = padded + image * g.c * plane_pad, a.hp = p.hp, a.wp = p.wp;
      a.cin = g.c, a.kh = g.kh, a.kw = g.kw, a.sh = g.sh, a.sw = g.sw, a.dh = g.dh, a.dw = g.dw;
      a.r0 = band * p.band_rows, a.rows = std::min(p.band_rows, g.oh - a.r0), a.ow = g.ow;
      a.weights = packed + block * taps * p.cols, a.vectors = p.vectors;
      a.bias = g.bias != nullptr ? g.bias + c0 : nullptr, a.channels = channels;
      a.out = out;
      if (!raw) a.act = g.act.kind, a.lo = g.act.lo, a.hi = g.act.hi;
      k.rows(a);
      const int64_t at = (image * g.cout + c0) * plane_out + a.r0 * g.ow, pixels = a.rows * g.ow;
      layout.transpose(out, p.cols, pixels, channels, g.y + at, plane_out);
      if (raw) {
        for (int64_t c = 0; c < channels; ++c)
          layout.add_activate(g.y + at + c * plane_out, g.residual + at + c * plane_out, pixels, g.act.kind, g.act.lo,
                              g.act.hi);
      }
    }
  });
  return Status::ok();
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
