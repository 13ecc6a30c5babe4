// Winograd F(2x2, 3x3) over vectors of channels (conv2d.h, f32_winograd_channels.h): ResNet-18's
// 7x7 layer has 16 tiles per image, too few for vectors of tiles, but 512 channels.
//
//   input    the image pixel-major and zero-padded, P[py][px][ci] (f32_layout.h transposes), then
//            V[xi][tile][ci] = B^T d B per tile, vectorized over ci
//   GEMM     M[xi] = V[xi] @ U^T[xi], [tiles, cin] @ [cin, cout], one batched gemm() with U^T
//            transformed and packed once at load (its rows are the GEMM's K, so the tiles of all
//            images are the rows: 16 tiles fill two strips of the avx512 tile)
//   output   pixel-major A^T M A + bias (and the activation unless a residual follows), then
//            transposed into the output planes (f32_layout.h), with the residual and activation
// P, V, M and the pixel-major output live in call scratch.
#include <algorithm>
#include <string>
#include <vector>

#include "common/shape_math.h"
#include "kiln/thread_pool.h"
#include "optimized/conv2d.h"
#include "optimized/f32_layout.h"
#include "optimized/f32_winograd_channels.h"
#include "optimized/gemm_driver.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr int64_t kMaxScratchFloats = int64_t{8} << 20;  // 32 MB

struct Plan {
  int64_t th = 0, tw = 0, tiles = 0;  // tile rows and columns of an image; tiles of all images
  int64_t hp = 0, wp = 0;             // the padded pixel-major input of an image
  int64_t p_floats = 0, v_floats = 0, m_floats = 0, o_floats = 0;
  int64_t total() const { return p_floats + v_floats + m_floats + o_floats; }
};

// Saturating (the sizes are checked against kMaxScratchFloats before use).
Plan plan_of(const ConvGeom& g) {
  Plan p;
  p.th = (g.oh + 1) / 2, p.tw = (g.ow + 1) / 2;
  p.tiles = sat_mul(g.images, p.th * p.tw);
  p.hp = 2 * p.th + 2, p.wp = 2 * p.tw + 2;
  p.p_floats = sat_mul(sat_mul(g.images, p.hp * p.wp), g.c);
  p.v_floats = sat_mul(16 * p.tiles, g.c);
  p.m_floats = sat_mul(16 * p.tiles, g.cout);
  p.o_floats = sat_mul(sat_mul(g.images, g.oh * g.ow), g.cout);
  return p;
}

struct WeightsArg {
  const F32GemmKernels* kernels;
  const float* w;
  int64_t cout, cin;
};

// U^T[xi][ci][co] = U[xi][co][ci], as 16 prepacked GEMM operands B[k = ci][n = co].
void pack_weights(const void* arg, void* dst) {
  const WeightsArg& a = *static_cast<const WeightsArg*>(arg);
  std::vector<float> u(static_cast<size_t>(16 * a.cout * a.cin));  // at load only
  winograd_transform_weights(a.w, a.cout, a.cin, u.data());
  prepack_b_into(*a.kernels, u.data(), 1, a.cin, a.cin, a.cout, 16, a.cout * a.cin, static_cast<float*>(dst));
}

}  // namespace

size_t winograd_channels_call_scratch_bytes(const ConvGeom& g, Isa) {
  if (g.kh != 3 || g.kw != 3 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1 || g.groups != 1) return 0;
  // Few channels leave the transforms' vectors and the GEMM's K short.
  if (g.c < 16 || g.cout < 16) return 0;
  const Plan p = plan_of(g);
  if (p.total() > kMaxScratchFloats) return 0;
  return static_cast<size_t>(p.total()) * sizeof(float);
}

size_t winograd_channels_worker_scratch_bytes(const ConvGeom& g, Isa isa) {
  return gemm_worker_scratch_bytes(f32_gemm_for(isa), g.cout, true);
}

Result<const float*> winograd_channels_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g) {
  const F32GemmKernels& kr = f32_gemm_for(ctx.isa);
  const WeightsArg arg{&kr, weight.data_as<const float>(), g.cout, g.c};
  const size_t bytes = static_cast<size_t>(prepacked_b_floats(kr, g.c, g.cout, 16)) * sizeof(float);
  const std::string layout = format("f32-winograd-f2x2-3x3-ut-nr%d-kc%lld", kr.nr, static_cast<long long>(kr.kc));
  Result<const void*> packed = packed_constant(ctx, weight, layout.c_str(), bytes, pack_weights, &arg);
  if (!packed.ok()) return packed.status();
  return static_cast<const float*>(packed.value());
}

Status winograd_channels_conv(const ConvGeom& g, Isa isa, const float* packed, const KernelContext& ctx,
                              size_t worker_bytes, size_t call_bytes) {
  const F32GemmKernels& kr = f32_gemm_for(isa);
  const F32WinogradChannelsKernels& k = f32_winograd_channels_for(isa);
  const F32LayoutKernels& layout = f32_layout_for(isa);
  const Plan plan = plan_of(g);
  KILN_CHECK_OR_RETURN(static_cast<size_t>(plan.total()) * sizeof(float) <= call_bytes, KernelFailure,
                       "conv2d: the scratch planned at load does not fit this input");
  float* pix = static_cast<float*>(ctx.scratch);
  float* v = pix + plan.p_floats;
  float* m = v + plan.v_floats;
  float* o = m + plan.m_floats;
  const int64_t hw = g.h * g.w, per_image = plan.th * plan.tw, row_floats = plan.wp * g.c;

  // P[image][py][px][ci]: input row py - ph, column px - pw, zeros around.
  const int64_t cols = std::min(g.w, plan.wp - g.pw);
  parallel_for(g.images * plan.hp, grain_for(row_floats * 2), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t image = r / plan.hp, ih = r % plan.hp - g.ph;
      float* dst = pix + r * row_floats;
      if (ih < 0 || ih >= g.h) {
        std::fill(dst, dst + row_floats, 0.0f);
        continue;
      }
      std::fill(dst, dst + g.pw * g.c, 0.0f);
      layout.transpose(g.x + image * g.c * hw + ih * g.w, hw, g.c, cols, dst + g.pw * g.c, g.c);
      std::fill(dst + (g.pw + cols) * g.c, dst + row_floats, 0.0f);
    }
  });

  const int64_t xi_v = plan.tiles * g.c, xi_m = plan.tiles * g.cout;
  parallel_for(g.images * plan.th, grain_for(plan.tw * g.c * 64), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t image = r / plan.th, ty = r % plan.th;
      WinogradChannelsInput in;
      in.rows = pix + (image * plan.hp + 2 * ty) * row_floats;
      in.wp = plan.wp, in.c = g.c, in.tw = plan.tw;
      in.v = v + (image * per_image + ty * plan.tw) * g.c, in.xi_stride = xi_v;
      k.input(in);
    }
  });

  GemmProblem p;
  p.m = plan.tiles, p.n = g.cout, p.k = g.c;
  p.a = v, p.lda = g.c;
  p.packed_b = packed;
  p.c = m, p.ldc = g.cout;
  p.batches.ndim = 1;
  p.batches.sizes[0] = 16;
  p.batches.a_strides[0] = xi_v;
  p.batches.b_strides[0] = prepacked_b_floats(kr, g.c, g.cout);
  p.batches.c_stride = xi_m;
  KILN_RETURN_IF_ERROR(gemm(kr, p, ctx, worker_bytes));

  const bool raw = g.residual != nullptr;  // the activation follows the residual, after the transpose
  parallel_for(g.images * plan.th, grain_for(plan.tw * g.cout * 64), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t image = r / plan.th, ty = r % plan.th;
      WinogradChannelsOutput out;
      out.m = m + (image * per_image + ty * plan.tw) * g.cout, out.xi_stride = xi_m;
      out.cout = g.cout, out.tw = plan.tw, out.bias = g.bias;
      out.out = o + (image * g.oh + 2 * ty) * g.ow * g.cout;
      out.rows = std::min<int64_t>(2, g.oh - 2 * ty), out.ow = g.ow;
      if (!raw) out.act = g.act.kind, out.lo = g.act.lo, out.hi = g.act.hi;
      k.output(out);
    }
  });

  // Into the planes: blocks of channels, each a run of planes.
  constexpr int64_t kBlock = 16;
  const int64_t plane = g.oh * g.ow, blocks = (g.cout + kBlock - 1) / kBlock;
  parallel_for(g.images * blocks, grain_for(plane * kBlock * 2), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t image = b / blocks, c0 = b % blocks * kBlock, channels = std::min(kBlock, g.cout - c0);
      const int64_t at = (image * g.cout + c0) * plane;
      layout.transpose(o + image * plane * g.cout + c0, g.cout, plane, channels, g.y + at, plane);
      if (raw) layout.add_activate(g.y + at, g.residual + at, channels * plane, g.act.kind, g.act.lo, g.act.hi);
    }
  });
  return Status::ok();
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
