// The optimized f32 conv2d paths (NCHW): shared geometry, the depthwise direct kernel, Winograd.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/activation.h"
#include "common/conv2d_args.h"
#include "kiln/kernel.h"

namespace kiln {
namespace kernels {
namespace optimized {

// A validated convolution (aten::conv2d or kiln::fused_conv2d: common/conv2d_args.h), its data and
// its epilogue.
struct ConvGeom : Conv2dShape {
  const float* x = nullptr;
  const float* weight = nullptr;    // [cout, cin_g, kh, kw]
  const float* bias = nullptr;      // [cout] or null
  const float* residual = nullptr;  // the output's shape, or null
  float* y = nullptr;
  ActivationArg act;
};

// Depthwise convolutions (one input channel per group) the direct kernel serves:
// windows of at most this many taps per side.
constexpr int64_t kDepthwiseMaxTaps = 16;

// Per-worker scratch of the depthwise kernel for this geometry, or 0 when it
// would be unreasonably large (then the GEMM path serves the convolution).
size_t depthwise_scratch_bytes(const ConvGeom& g, Isa isa);

// Runs the depthwise convolution on the pool; `scratch_bytes` as planned by
// depthwise_scratch_bytes for a geometry at least this large.
Status depthwise_conv(const ConvGeom& g, Isa isa, const KernelContext& ctx, size_t scratch_bytes);

// The channel-block depthwise kernel (multiplier 1, constant weights): its
// per-worker scratch, or 0 when it does not serve this geometry; the weights
// packed once per program; the convolution.
size_t depthwise_channels_scratch_bytes(const ConvGeom& g, Isa isa);
Result<const float*> depthwise_channels_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g);
Status depthwise_channels_conv(const ConvGeom& g, Isa isa, const float* packed, const KernelContext& ctx,
                               size_t scratch_bytes);

// The direct kernel for few input channels (conv_direct.cpp: groups 1, at most 4 input
// channels, a window larger than 1x1, constant weights): the call scratch (a zero-padded copy of
// the input), or 0 when it does not serve; its worker scratch; the weights packed once per
// program; the convolution.
size_t direct_call_scratch_bytes(const ConvGeom& g, Isa isa);
size_t direct_worker_scratch_bytes(const ConvGeom& g, Isa isa);
Result<const float*> direct_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g);
Status direct_conv(const ConvGeom& g, Isa isa, const float* packed, const KernelContext& ctx, size_t worker_bytes,
                   size_t call_bytes);

// Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (conv_winograd.cpp):
// the call scratch it needs, or 0 when it should not serve this geometry
// (other windows, strides, dilation or groups, few channels, few tiles, too large).
size_t winograd_call_scratch_bytes(const ConvGeom& g, Isa isa);
size_t winograd_worker_scratch_bytes(const ConvGeom& g, Isa isa);
// The transformed weights, packed once per program from the constant `weight`.
Result<const float*> winograd_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g);
// U[xi][co][ci] = (G g G^T)[xi] for the 3x3 filters g = w[co][ci] (16 * cout * cin floats).
void winograd_transform_weights(const float* w, int64_t cout, int64_t cin, float* u);
// Runs the convolution with the scratch planned from the functions above.
Status winograd_conv(const ConvGeom& g, Isa isa, const float* u, const KernelContext& ctx, size_t worker_bytes,
                     size_t call_bytes);

// Winograd F(2x2, 3x3) with channels in vectors (conv_winograd_channels.cpp), for the images
// too small for the tile-vectorized one (ResNet-18's 7x7 layer): the transforms run over
// pixel-major vectors of channels and the 16 GEMMs are transposed, [tiles, cin] @ [cin, cout],
// with U^T prepacked. Call scratch, or 0 when it does not serve; worker scratch; weights; run.
size_t winograd_channels_call_scratch_bytes(const ConvGeom& g, Isa isa);
size_t winograd_channels_worker_scratch_bytes(const ConvGeom& g, Isa isa);
Result<const float*> winograd_channels_weights(KernelContext& ctx, const Tensor& weight, const ConvGeom& g);
Status winograd_channels_conv(const ConvGeom& g, Isa isa, const float* packed, const KernelContext& ctx,
                              size_t worker_bytes, size_t call_bytes);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
