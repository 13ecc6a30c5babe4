// Depthwise convolution (conv2d.h): padded input bands in worker scratch, SIMD rows (f32_dwconv.h).
//
// For a band of output rows of one channel, the input rows its windows read are
// copied into scratch with the padding as zeros and, for a stride s, the
// columns split into s phases (phase r holds padded columns r, r + s, ...), so
// that every tap of every output row reads one contiguous run and the
// microkernel needs no bounds checks.
#include <algorithm>

#include "common/shape_math.h"
#include "kiln/thread_pool.h"
#include "optimized/conv2d.h"
#include "optimized/f32_dwconv.h"
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
  int64_t phase_len = 0;   // floats per stride phase of a band row
  int64_t row_stride = 0;  // sw phases
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
        if (post_activation) activate_tile(f32_activation_for(isa), g.act, a.y, g.ow, a.rows, g.ow);
      }
    }
  });
  return Status::ok();
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
