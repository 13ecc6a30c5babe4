// The implicit im2col of the optimized conv2d: B blocks of the convolution GEMM packed straight from the input.
#pragma once

#include "optimized/gemm_driver.h"
#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

struct F32Im2colKernels {
  // A PackBFn over a ConvGeom (conv2d.h): rows [k0, k0 + kc) of the column
  // matrix of batch (image, group), row k being the window tap (ci, i, j), for
  // the output pixels [n0, n0 + nc).
  PackBFn pack = nullptr;
  // A PackAFn over a ConvGeom of a 1x1 stride-1 unpadded convolution, batch = group: rows
  // [m0, m0 + mc) of X^T (row image * pixels + p), columns [k0, k0 + kc) (the group's input channels).
  PackAFn pack_pointwise_transposed = nullptr;
};
KILN_ISA_TABLE(F32Im2colKernels, f32_im2col)

}  // namespace kiln::kernels::optimized
