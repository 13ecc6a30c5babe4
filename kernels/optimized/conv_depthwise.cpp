// Depthwise convolution (conv2d.h), two kernels:
//  - rows (f32_dwconv.h): SIMD along output rows, for planes whose rows fill vectors;
//  - channel blocks (f32_dwconv_channels.h): one vector lane per channel, for small
//    planes and strides, where a row would leave most of a vector empty.
//
// Rows: for a band of output rows of one channel, the input rows its windows read are
// copied into scratch with the padding as zeros and, for a stride s, the
// columns split into s phases (phase r holds padded columns r, r + s, ...), so
// that every tap of every output row reads one contiguous run and the
// microkernel needs no bounds checks.
#include <algorithm>
#include <string>

#include "common/shape_math.h"
#include "kiln/thread_pool.h"
#include "optimized/conv2d.h"
#include "optimized/f32_dwconv.h"
#include "optimized/f32_dwconv_channels.h"
#include "optimized/f32_layout.h"
#include "optimized/gemm_activation.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

// A band of this many floats (64 KB) stays in L2 next to its output rows.
constexpr int64_t kBandFloats = 16 * 1024;
// Beyond this a single output row's band is not worth it (the GEMM path serves).
constexpr int64_t kMaxRowBandFloats = int64_t{4} << 20;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Layout of a band for one geometry.
struct Band {
  int64_t phase_len = 0;     // floats per stride phase of a band row
  int64_t row_stride = 0;    // sw phases
  int64_t rows_per_out = 0;  // band rows that one output row needs
  int64_t tap_offsets[kDepthwiseMaxTaps] = {};

  // Band rows for `out_rows` consecutive output rows.
  int64_t rows_for(int64_t out_rows, const ConvGeom& g) const { return (out_rows - 1) * g.sh + rows_per_out; }
};

// Saturating; false when the geometry is outside what the direct kernel serves.
bool plan_band(const ConvGeom& g, const F32DwconvKernels& k, Band* b) {
  if (g.kh > kDepthwiseMaxTaps || g.kw > kDepthwiseMaxTaps) return false;
  const int64_t reach = (g.kw - 1) * g.dw / g.sw;  // furthest tap, in phase columns
  b->phase_len = round_up(k.read_columns(g.ow) + reach, 16);
  b->row_stride = sat_mul(g.sw, b->phase_len);
  b->rows_per_out = (g.kh - 1) * g.dh + 1;
  for (int64_t j = 0; j < g.kw; ++j) b->tap_offsets[j] = (j * g.dw) % g.sw * b->phase_len + j * g.dw / g.sw;
  return sat_mul(b->row_stride, b->rows_per_out) <= kMaxRowBandFloats;
}

}  // namespace

size_t depthwise_scratch_bytes(const ConvGeom& g, Isa isa) {
  Band b;
  if (!plan_band(g, f32_dwconv_for(isa), &b)) return 0;
  const int64_t whole = sat_mul(b.row_stride, b.rows_for(g.oh, g));
  const int64_t floats = std::max(b.row_stride * b.rows_per_out, std::min(whole, kBandFloats));
  return static_cast<size_t>(floats) * sizeof(float);
}

Status depthwise_conv(const ConvGeom& g, Isa isa, const KernelContext& ctx, size_t scratch_bytes) {
  const F32DwconvKernels& k = f32_dwconv_for(isa);
  Band b;
  const int64_t capacity = static_cast<int64_t>(scratch_bytes / sizeof(float));
  KILN_CHECK_OR_RETURN(plan_band(g, k, &b) && b.row_stride * b.rows_per_out <= capacity, KernelFailure,
                       "conv2d: the depthwise scratch planned at load does not fit this input");
  const int64_t band_out_rows = std::min(g.oh, 1 + (capacity / b.row_stride - b.rows_per_out) / g.sh);
  const int64_t mult = g.cout / g.groups;
  const int64_t plane_in = g.h * g.w, plane_out = g.oh * g.ow;
  const bool post_activation = activation_after_tile(g.act.kind);

  DwconvRows base;
  base.row_stride = b.row_stride;
  base.tap_offsets = b.tap_offsets;
  base.kh = g.kh, base.kw = g.kw, base.sh = g.sh, base.dh = g.dh;
  base.ow = g.ow;
  base.act = register_activation(g.act);

  const int64_t planes = g.images * g.cout;
  parallel_for(planes, grain_for(sat_mul(plane_out, g.kh * g.kw)), [&](int64_t begin, int64_t end) {
    float* band = static_cast<float*>(worker_scratch(ctx));
    DwconvRows a = base;
    a.band = band;
    DwconvBand fill;
    fill.h = g.h, fill.w = g.w, fill.pw = g.pw, fill.sw = g.sw, fill.phase_len = b.phase_len;
    fill.dst = band;
    // With one band per plane, every band has the same zeros: write them for the first plane only.
    const bool one_band = band_out_rows >= g.oh;
    for (int64_t plane = begin; plane < end; ++plane) {
      fill.values_only = one_band && plane > begin;
      const int64_t image = plane / g.cout, co = plane % g.cout;
      const float* x = g.x + (image * g.c + co / mult) * plane_in;
      a.weights = g.weight + co * g.kh * g.kw;
      a.bias = g.bias != nullptr ? g.bias[co] : 0.0f;
      for (int64_t oh0 = 0; oh0 < g.oh; oh0 += band_out_rows) {
        a.rows = std::min(band_out_rows, g.oh - oh0);
        fill.ih0 = oh0 * g.sh - g.ph;
        fill.rows = b.rows_for(a.rows, g);
        fill.plane = x;
        k.fill_band(fill);
        a.y = g.y + plane * plane_out + oh0 * g.ow;
        a.residual = g.residual != nullptr ? g.residual + plane * plane_out + oh0 * g.ow : nullptr;
        k.rows(a);
        // The band's rows are contiguous: one run.
        if (post_activation) activate_tile(f32_activation_for(isa), g.act, a.y, 0, 1, a.rows * g.ow);
      }
    }
  });
  return Status::ok();
}

// ---- channel blocks

namespace {

// Tile and output of one band of a channel block stay in L2 (W floats per pixel), with bands tall
// enough that the rows two bands share are gathered rarely (a 112-wide plane at stride 2: 6 rows).
constexpr int64_t kChannelBandFloats = 32 * 1024;

struct ChannelPlan {
  int64_t wp = 0;             // tile columns
  int64_t band_out_rows = 0;  // output rows per band
  int64_t tile_rows(int64_t out_rows, const ConvGeom& g) const { return (out_rows - 1) * g.sh + (g.kh - 1) * g.dh + 1; }
};

// Saturating; false when not even one output row fits the largest scratch we plan.
bool plan_channels(const ConvGeom& g, int64_t width, ChannelPlan* p) {
  // The taps of the last output column reach column (ow - 1) * sw + (kw - 1) * dw of the padded
  // row; the gather writes the input up to column pw + w.
  p->wp = std::max(sat_mul(g.ow - 1, g.sw) + sat_mul(g.kw - 1, g.dw) + 1, g.pw + g.w);
  const int64_t row_floats = sat_mul(p->wp, width);
  auto floats = [&](int64_t rows) {
    return sat_mul(p->tile_rows(rows, g), row_floats) + sat_mul(sat_mul(rows, g.ow), width);
  };
  constexpr int64_t kMaxFloats = int64_t{1} << 20;  // one output row of a very wide plane: 4 MB
  if (floats(1) > kMaxFloats) return false;
  int64_t rows = 1;
  while (rows < g.oh && floats(rows + 1) <= kChannelBandFloats) ++rows;
  p->band_out_rows = rows;
  return true;
}

size_t channel_scratch_floats(const ConvGeom& g, const ChannelPlan& p, int64_t width) {
  return static_cast<size_t>(p.tile_rows(p.band_out_rows, g) * p.wp * width + p.band_out_rows * g.ow * width);
}

struct ChannelWeightsArg {
  const float* w;
  int64_t channels, taps, width;
};

// [block][tap][lane] = w[block * width + lane][tap], zero past the last channel.
void pack_channel_weights(const void* arg, void* dst) {
  const ChannelWeightsArg& a = *static_cast<const ChannelWeightsArg*>(arg);
  float* out = static_cast<float*>(dst);
  const int64_t blocks = (a.channels + a.width - 1) / a.width;
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t t = 0; t < a.taps; ++t)
      for (int64_t l = 0; l < a.width; ++l) {
        const int64_t c = b * a.width + l;
        out[(b * a.taps + t) * a.width + l] = c < a.channels ? a.w[c * a.taps + t] : 0.0f;
      }
}

}  // namespace

size_t depthwise_channels_scratch_bytes(const ConvGeom& g, Isa isa) {
  if (g.cin_g != 1 || g.cout != g.groups) return 0;  // multiplier 1 only
  const int64_t width = f32_dwconv_channels_for(isa).width;
  // Rows of at least 4 vectors fill the row kernel's blocks, and there the transposes in and
  // out cost more than the lanes it wastes (measured on MobileNetV3 and EfficientNet at 224).
  if (g.ow >= 4 * width) return 0;
  ChannelPlan p;
  if (!plan_channels(g, width, &p)) return 0;
  return channel_scratch_floats(g, p, width) * sizeof(float);
}

Result<const float*> depthwise_channels_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g) {
  const int64_t width = f32_dwconv_channels_for(ctx.isa).width, taps = g.kh * g.kw;
  const ChannelWeightsArg arg{weight.data_as<const float>(), g.cout, taps, width};
  const size_t bytes = static_cast<size_t>((g.cout + width - 1) / width * taps * width) * sizeof(float);
  const std::string layout = format("f32-dwconv-channels-w%lld-taps%lld-c%lld", static_cast<long long>(width),
                                    static_cast<long long>(taps), static_cast<long long>(g.cout));
  Result<const void*> packed = packed_constant(ctx, weight, layout.c_str(), bytes, pack_channel_weights, &arg);
  if (!packed.ok()) return packed.status();
  return static_cast<const float*>(packed.value());
}

Status depthwise_channels_conv(const ConvGeom& g, Isa isa, const float* packed, const KernelContext& ctx,
                               size_t scratch_bytes) {
  const F32DwconvChannelsKernels& k = f32_dwconv_channels_for(isa);
  const F32LayoutKernels& layout = f32_layout_for(isa);
  const int64_t width = k.width;
  ChannelPlan plan;
  KILN_CHECK_OR_RETURN(
      plan_channels(g, width, &plan) && channel_scratch_floats(g, plan, width) * sizeof(float) <= scratch_bytes,
      KernelFailure, "conv2d: the depthwise scratch planned at load does not fit this input");
  const int64_t blocks = (g.cout + width - 1) / width, bands = (g.oh + plan.band_out_rows - 1) / plan.band_out_rows;
  const int64_t plane_in = g.h * g.w, plane_out = g.oh * g.ow, taps = g.kh * g.kw;
  const bool raw = g.residual != nullptr;  // the activation follows the residual, after the scatter
  const int64_t tasks = g.images * blocks * bands;
  const int64_t work = sat_mul(sat_mul(plan.band_out_rows * g.ow, taps + 8), width);
  parallel_for(tasks, grain_for(work), [&](int64_t begin, int64_t end) {
    float* tile = static_cast<float*>(worker_scratch(ctx));
    float* out = tile + plan.tile_rows(plan.band_out_rows, g) * plan.wp * width;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t band = t % bands, block = t / bands % blocks, image = t / bands / blocks;
      const int64_t c0 = block * width, channels = std::min(width, g.cout - c0);
      const int64_t oh0 = band * plan.band_out_rows, rows = std::min(plan.band_out_rows, g.oh - oh0);
      DwChannelsGather in;
      in.x = g.x + (image * g.c + c0) * plane_in, in.plane = plane_in, in.channels = channels;
      in.h = g.h, in.w = g.w, in.ih0 = oh0 * g.sh - g.ph, in.rows = plan.tile_rows(rows, g);
      in.pw = g.pw, in.wp = plan.wp, in.tile = tile;
      k.gather(in);
      DwChannelsPixels px;
      px.tile = tile, px.wp = plan.wp, px.weights = packed + block * taps * width;
      px.bias = g.bias != nullptr ? g.bias + c0 : nullptr, px.channels = channels;
      px.kh = g.kh, px.kw = g.kw, px.sh = g.sh, px.sw = g.sw, px.dh = g.dh, px.dw = g.dw;
      px.rows = rows, px.ow = g.ow, px.out = out;
      if (!raw) px.act = g.act.kind, px.lo = g.act.lo, px.hi = g.act.hi;
      k.pixels(px);
      const int64_t at = (image * g.cout + c0) * plane_out + oh0 * g.ow;
      layout.transpose(out, width, rows * g.ow, channels, g.y + at, plane_out);
      if (raw) {
        for (int64_t c = 0; c < channels; ++c)
          layout.add_activate(g.y + at + c * plane_out, g.residual + at + c * plane_out, rows * g.ow, g.act.kind,
                              g.act.lo, g.act.hi);
      }
    }
  });
  return Status::ok();
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
