// 3x3 stride-1 convolutions by Winograd F(2x2, 3x3) (f32_winograd.h): 16 GEMMs of
// [cout, cin] @ [cin, tiles] do the work of 36, for 2.25 times fewer multiplications.
//
//   input transform   per (image, input channel): a zero-padded, stride-2
//                     phase-split band of the plane (f32_dwconv's fill_band) into V[16][cin][tiles]
//   GEMM              M[xi] = U[xi] @ V[xi] for the 16 xi, one batched gemm(), with U the
//                     transformed weights packed once at load (packed_constant)
//   output transform  per (image, output channel): y = act(A^T M A + bias + residual)
// V and M live in call scratch, the bands in worker scratch.
#include <algorithm>

#include "common/shape_math.h"
#include "kiln/thread_pool.h"
#include "optimized/conv2d.h"
#include "optimized/f32_dwconv.h"
#include "optimized/f32_winograd.h"
#include "optimized/gemm_activation.h"
#include "optimized/gemm_driver.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

// Call scratch beyond which the direct paths serve (V and M together).
constexpr int64_t kMaxScratchFloats = int64_t{8} << 20;  // 32 MB

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct WinogradPlan {
  int64_t th = 0, tw = 0, tiles = 0;  // tile rows and columns of an image; tiles of all images
  int64_t phase_len = 0, band_rows = 0;
  int64_t v_floats = 0, m_floats = 0;
  int64_t band_floats() const { return band_rows * 2 * phase_len; }
};

WinogradPlan plan_of(const ConvGeom& g, int width) {
  WinogradPlan p;
  p.th = (g.oh + 1) / 2, p.tw = (g.ow + 1) / 2;
  p.tiles = g.images * p.th * p.tw;
  // The input transform reads whole vectors of tiles and one column beyond.
  p.phase_len = round_up(round_up(p.tw, width) + 1, 16);
  p.band_rows = 2 * p.th + 2;
  p.v_floats = 16 * g.c * p.tiles;
  p.m_floats = 16 * g.cout * p.tiles;
  return p;
}

// U[xi][co][ci] = (G g G^T)[xi] for the 3x3 filter g = W[co][ci].
struct TransformArg {
  const float* w;
  int64_t cout, cin;
};

void transform_weights(const void* arg, void* dst) {
  const TransformArg& a = *static_cast<const TransformArg*>(arg);
  winograd_transform_weights(a.w, a.cout, a.cin, static_cast<float*>(dst));
}

}  // namespace

void winograd_transform_weights(const float* w, int64_t cout, int64_t cin, float* u) {
  const int64_t plane = cout * cin;
  parallel_for(cout, grain_for(cin * 64), [&](int64_t c0, int64_t c1) {
    for (int64_t co = c0; co < c1; ++co) {
      for (int64_t ci = 0; ci < cin; ++ci) {
        const float* g = w + (co * cin + ci) * 9;
        float t[4][3];  // G g
        for (int j = 0; j < 3; ++j) {
          t[0][j] = g[j];
          t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
          t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
          t[3][j] = g[6 + j];
        }
        float* out = u + co * cin + ci;
        for (int r = 0; r < 4; ++r) {  // (G g) G^T
          out[(4 * r + 0) * plane] = t[r][0];
          out[(4 * r + 1) * plane] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
          out[(4 * r + 2) * plane] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
          out[(4 * r + 3) * plane] = t[r][2];
        }
      }
    }
  });
}

size_t winograd_call_scratch_bytes(const ConvGeom& g, Isa isa) {
  if (g.kh != 3 || g.kw != 3 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1 || g.groups != 1) return 0;
  // Narrow products (few channels) keep the GEMMs from their speed.
  if (g.c < 16 || g.cout < 16) return 0;
  const WinogradPlan p = plan_of(g, f32_winograd_for(isa).width);
  // Tiles fill the GEMMs' column panels well enough (the direct transposed path serves small images).
  const int64_t nr = f32_gemm_for(isa).nr;
  if (round_up(p.tiles, nr) * 3 > p.tiles * 4) return 0;
  if (sat_mul(16, sat_mul(g.c + g.cout, p.tiles)) > kMaxScratchFloats) return 0;
  return static_cast<size_t>(p.v_floats + p.m_floats) * sizeof(float);
}

size_t winograd_worker_scratch_bytes(const ConvGeom& g, Isa isa) {
  const WinogradPlan p = plan_of(g, f32_winograd_for(isa).width);
  return std::max(static_cast<size_t>(p.band_floats()) * sizeof(float),
                  gemm_worker_scratch_bytes(f32_gemm_for(isa), p.tiles, false));
}

Result<const float*> winograd_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g) {
  const TransformArg arg{weight.data_as<const float>(), g.cout, g.c};
  const size_t bytes = static_cast<size_t>(16 * g.cout * g.c) * sizeof(float);
  Result<const void*> u = packed_constant(ctx, weight, "f32-winograd-f2x2-3x3-u", bytes, transform_weights, &arg);
  if (!u.ok()) return u.status();
  return static_cast<const float*>(u.value());
}

Status winograd_conv(const ConvGeom& g, Isa isa, const float* u, const KernelContext& ctx, size_t worker_bytes,
                     size_t call_bytes) {
  const F32WinogradKernels& k = f32_winograd_for(isa);
  const WinogradPlan plan = plan_of(g, k.width);
  const size_t call = static_cast<size_t>(plan.v_floats + plan.m_floats) * sizeof(float);
  const size_t worker = winograd_worker_scratch_bytes(g, isa);
  KILN_CHECK_OR_RETURN(call <= call_bytes && worker <= worker_bytes, KernelFailure,
                       "conv2d: the scratch planned at load does not fit this input");
  float* v = static_cast<float*>(ctx.scratch);
  float* m = v + plan.v_floats;
  const int64_t per_image = plan.th * plan.tw;

  const F32DwconvKernels& bands = f32_dwconv_for(isa);
  parallel_for(g.images * g.c, grain_for(g.h * g.w * 8), [&](int64_t b0, int64_t b1) {
    float* band = static_cast<float*>(worker_scratch(ctx));
    DwconvBand fill;
    fill.h = g.h, fill.w = g.w, fill.ih0 = -g.ph, fill.rows = plan.band_rows;
    fill.pw = g.pw, fill.sw = 2, fill.phase_len = plan.phase_len, fill.dst = band;
    WinogradInput in;
    in.band = band, in.row_stride = 2 * plan.phase_len, in.phase_len = plan.phase_len;
    in.th = plan.th, in.tw = plan.tw, in.xi_stride = g.c * plan.tiles;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t image = b / g.c, ci = b % g.c;
      fill.plane = g.x + b * g.h * g.w;
      bands.fill_band(fill);
      in.v = v + ci * plan.tiles + image * per_image;
      k.input(in);
    }
  });

  GemmProblem p;
  p.m = g.cout, p.n = plan.tiles, p.k = g.c;
  p.a = u, p.lda = g.c;
  p.b = v, p.b_rs = plan.tiles, p.b_cs = 1;
  p.c = m, p.ldc = plan.tiles;
  p.batches.ndim = 1;
  p.batches.sizes[0] = 16;
  p.batches.a_strides[0] = g.cout * g.c;
  p.batches.b_strides[0] = g.c * plan.tiles;
  p.batches.c_stride = g.cout * plan.tiles;
  KILN_RETURN_IF_ERROR(gemm(f32_gemm_for(isa), p, ctx, worker_bytes));

  const bool post_activation = activation_after_tile(g.act.kind);
  const int64_t plane_out = g.oh * g.ow;
  parallel_for(g.images * g.cout, grain_for(plane_out * 8), [&](int64_t b0, int64_t b1) {
    WinogradOutput out;
    out.xi_stride = g.cout * plan.tiles;
    out.th = plan.th, out.tw = plan.tw;
    out.oh = g.oh, out.ow = g.ow;
    out.act = register_activation(g.act);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t image = b / g.cout, co = b % g.cout;
      out.m = m + co * plan.tiles + image * per_image;
      out.bias = g.bias != nullptr ? g.bias[co] : 0.0f;
      out.y = g.y + b * plane_out;
      out.residual = g.residual != nullptr ? g.residual + b * plane_out : nullptr;
      k.output(out);
      if (post_activation) activate_tile(f32_activation_for(isa), g.act, out.y, 0, 1, plane_out);  // one run
    }
  });
  return Status::ok();
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
