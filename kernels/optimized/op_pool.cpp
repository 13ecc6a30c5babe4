// Optimized float32 2-D pooling: adaptive_avg_pool2d (global average pooling is one region sum per
// plane), max_pool2d and avg_pool2d. The windowed pools are separable: per output row, the window's
// input rows are reduced column-wise into a row padded with the neutral value (-inf, or 0 for
// sums), the taps are reduced along it at every column, and every stride-th result is kept.
#include <algorithm>
#include <limits>

#include "common/pool2d_args.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_pool.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

Status adaptive_avg_pool2d_run(KernelContext& ctx, Inputs in, Outputs out) {
  constexpr const char* op = "aten::adaptive_avg_pool2d.default";
  AdaptivePool2dArgs args;
  KILN_RETURN_IF_ERROR(adaptive_avg_pool2d_args(op, in, out, &args));
  Tensor& y = *out[0];
  if (y.numel() == 0) return Status::ok();
  const PoolInput& pi = args.input;
  const int64_t oh = args.oh, ow = args.ow, h = pi.h, w = pi.w;

  const F32PoolKernels& k = f32_pool_for(ctx.isa);
  const float* xp = args.x->data_as<const float>();
  float* yp = y.data_as<float>();
  if (oh == 1 && ow == 1) {  // global average pooling: one mean per plane
    parallel_for(pi.planes, grain_for(h * w),
                 [&](int64_t p0, int64_t p1) { k.mean_rows(xp + p0 * h * w, p1 - p0, h * w, yp + p0); });
    return Status::ok();
  }
  // Regions [floor(i * h / oh), ceil((i + 1) * h / oh)), as in the portable kernel.
  parallel_for(pi.planes, grain_for(sat_mul(h + oh, w + ow)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = xp + p * h * w;
      float* yo = yp + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t h0 = mul_div(i, h, oh, false), h1 = mul_div(i + 1, h, oh, true);
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t w0 = mul_div(j, w, ow, false), w1 = mul_div(j + 1, w, ow, true);
          const double sum = k.sum2d(plane + h0 * w + w0, h1 - h0, w1 - w0, w);
          yo[i * ow + j] = static_cast<float>(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
  return Status::ok();
}

// ---- max_pool2d and avg_pool2d

// Floats per worker for the padded row and the reduced taps at every column; larger windowed
// pools (only hostile or absurd geometries) are left to the portable kernel.
constexpr int64_t kMaxRowFloats = int64_t{1} << 22;

struct Pool : Pool2dArgs {
  bool max = true;
  // The padded row: input column c sits at ww.pad + c; the window of output j starts at j * stride.
  int64_t row_len() const {
    return std::max(ww.pad + input.w, (ww.out - 1) * ww.stride + (ww.kernel - 1) * ww.dilation + 1);
  }
  int64_t dense_len() const { return (ww.out - 1) * ww.stride + 1; }
};

// Reads and checks the arguments as the portable kernels do (common/pool2d_args.h).
Status pool_args(const char* op, bool max, bool at_prepare, Inputs in, Outputs out, Pool* p) {
  p->max = max;
  return pool2d_args(op, max ? Pool2d::Max : Pool2d::Avg, at_prepare, in, out, p);
}

struct PoolState {
  int64_t row_floats = 0;  // scratch planned per worker, in floats
};

// Malformed arguments: the portable kernel serves, and reports them at run.
Status pool_prepare(KernelContext& ctx, const char* op, bool max, Inputs in, Outputs out, void** state) {
  Pool p;
  const Status st = pool_args(op, max, /*at_prepare=*/true, in, out, &p);
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  const int64_t floats = p.row_len() + p.dense_len();
  if (floats > kMaxRowFloats) return Status(Error::NotSupported, "pooling window rows too long");
  ctx.worker_scratch_bytes = static_cast<size_t>(floats) * sizeof(float);
  *state = new PoolState{floats};
  return Status::ok();
}

void pool_release(void* state) { delete static_cast<PoolState*>(state); }

// avg_pool2d's divisor rule (the portable kernel's) along one axis: the window's extent clipped to
// input + padding (what count_include_pad counts) and to the input (what is summed).
struct AvgExtent {
  int64_t padded, inside;
};
AvgExtent avg_extent(const Window& win, int64_t in, int64_t i) {
  const int64_t start = i * win.stride - win.pad, end = std::min(start + win.kernel, in + win.pad);
  return {end - start, std::min(end, in) - std::max<int64_t>(start, 0)};
}

Status pool_run(KernelContext& ctx, const char* op, bool max, Inputs in, Outputs out) {
  Pool p;
  KILN_RETURN_IF_ERROR(pool_args(op, max, /*at_prepare=*/false, in, out, &p));
  const int64_t row_len = p.row_len(), dense_len = p.dense_len();
  KILN_CHECK_OR_RETURN(row_len + dense_len <= static_cast<const PoolState*>(ctx.state)->row_floats, KernelFailure,
                       "%s: input wider than prepared", op);
  Tensor& y = *out[0];
  if (y.numel() == 0) return Status::ok();
  const F32PoolKernels& k = f32_pool_for(ctx.isa);
  const float fill = max ? -std::numeric_limits<float>::infinity() : 0.0f;
  const int64_t h = p.input.h, w = p.input.w, oh = p.wh.out, ow = p.ww.out, pad = p.ww.pad;
  const float* xp = in[0]->tensor->data_as<const float>();
  float* yp = y.data_as<float>();
  const int64_t taps = sat_mul(std::min(p.wh.kernel, h), std::min(p.ww.kernel, w));
  parallel_for(p.input.planes, grain_for(sat_mul(oh * ow, taps)), [&](int64_t p0, int64_t p1) {
    float* row = static_cast<float*>(worker_scratch(ctx));
    float* dense = row + row_len;
    std::fill(row, row + row_len, fill);  // the padding columns keep the neutral value
    for (int64_t plane = p0; plane < p1; ++plane) {
      const float* x = xp + plane * h * w;
      float* yo = yp + plane * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t start = i * p.wh.stride - p.wh.pad;
        int64_t a0, a1;
        window_taps(p.wh, start, &a0, &a1);
        if (a0 >= a1) {  // no input row in the window (only with ceil_mode or large padding)
          std::fill(yo + i * ow, yo + (i + 1) * ow, fill);
          continue;
        }
        k.reduce_rows(x + (start + a0 * p.wh.dilation) * w, a1 - a0, p.wh.dilation * w, w, max, row + pad);
        k.reduce_taps(row, p.ww.kernel, p.ww.dilation, dense_len, max, dense);
        if (max) {
          for (int64_t j = 0; j < ow; ++j) yo[i * ow + j] = dense[j * p.ww.stride];
          continue;
        }
        const AvgExtent ei = avg_extent(p.wh, h, i);
        for (int64_t j = 0; j < ow; ++j) {
          const AvgExtent ej = avg_extent(p.ww, w, j);
          const int64_t div = p.has_divisor         ? p.divisor
                              : p.count_include_pad ? ei.padded * ej.padded
                                                    : ei.inside * ej.inside;
          // A window with no input (ceil_mode) gives 0.
          yo[i * ow + j] =
              ej.inside <= 0
                  ? 0.0f
                  : static_cast<float>(static_cast<double>(dense[j * p.ww.stride]) / static_cast<double>(div));
        }
      }
    }
  });
  return Status::ok();
}

constexpr const char* kMaxPool = "aten::max_pool2d.default";
constexpr const char* kAvgPool = "aten::avg_pool2d.default";
Status max_pool_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return pool_prepare(ctx, kMaxPool, true, in, out, state);
}
Status max_pool_run(KernelContext& ctx, Inputs in, Outputs out) { return pool_run(ctx, kMaxPool, true, in, out); }
Status avg_pool_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  return pool_prepare(ctx, kAvgPool, false, in, out, state);
}
Status avg_pool_run(KernelContext& ctx, Inputs in, Outputs out) { return pool_run(ctx, kAvgPool, false, in, out); }

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::adaptive_avg_pool2d.default", "f32", adaptive_avg_pool2d_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::max_pool2d.default", "f32", max_pool_run, max_pool_prepare,
                            pool_release);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::avg_pool2d.default", "f32", avg_pool_run, avg_pool_prepare,
                            pool_release);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
