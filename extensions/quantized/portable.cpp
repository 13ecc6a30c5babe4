// The reference kernels of kiln_quantized::linear and ::embedding (the portable tier): the formulas of
// quant.h element by element, summed in order. The optimized kernels are tested against these.
#include <algorithm>
#include <cmath>

#include "quant.h"

namespace kiln {
namespace quantized {
namespace {

using namespace kernels;

// Scratch of compute="int8": the quantized input rows, then their block scales.
struct Int8Scratch {
  int8_t* qx;
  float* dx;
};
size_t int8_scratch_bytes(int64_t m, int64_t k) {
  const size_t q = (static_cast<size_t>(m * k) + 63) / 64 * 64;
  return q + static_cast<size_t>(m * int8_blocks(k)) * sizeof(float);
}
Int8Scratch int8_scratch(void* base, int64_t m, int64_t k) {
  auto* bytes = static_cast<uint8_t*>(base);
  return {reinterpret_cast<int8_t*>(bytes), reinterpret_cast<float*>(bytes + (m * k + 63) / 64 * 64)};
}

// Scratch of compute="int8_row": the quantized rows, then their scales and zero points.
struct Int8RowScratch {
  uint8_t* q;
  float* scale;
  int32_t* zero;
};
size_t int8_row_scratch_bytes(int64_t m, int64_t k) {
  return (static_cast<size_t>(m * k) + 63) / 64 * 64 + static_cast<size_t>(m) * (sizeof(float) + sizeof(int32_t));
}
Int8RowScratch int8_row_scratch(void* base, int64_t m, int64_t k) {
  auto* bytes = static_cast<uint8_t*>(base);
  auto* scale = reinterpret_cast<float*>(bytes + (m * k + 63) / 64 * 64);
  return {bytes, scale, reinterpret_cast<int32_t*>(scale + m)};
}

// (s * d) * float(sum (q - z) * w): quant.h's quantize_row_u8 formula (exact integers in int64 here;
// the bound on k keeps them in int32).
float linear_int8_row(const QuantMatrix& w, const uint8_t* q, float scale, int32_t zero, int64_t row) {
  int64_t isum = 0;
  for (int64_t i = 0; i < w.k; ++i) isum += (q[i] - zero) * w.raw(row, i);
  return scale * half_to_float(w.scales[row]) * static_cast<float>(static_cast<int32_t>(isum));
}

float linear_f32(const QuantMatrix& w, const float* x, int64_t row) {
  float acc = 0.0f;
  for (int64_t i = 0; i < w.k; ++i) acc += x[i] * w.weight(row, i);
  return acc;
}

// sum over 32-blocks b of dx[b] * (d * isum + m * qsum), qsum = sum(qx) over the block and isum =
// sum(qx * q), q the raw value minus 8 for q4_0. The block formats (quant.h, Int8Block): isum =
// sc[0] * sum(qx * q) over the first 16 + sc[1] * that over the last 16 (exact integers), then
// inner = d * isum, + c * qsum for q5_1 and the K-quants.
float linear_int8(const QuantMatrix& w, const int8_t* qx, const float* dx, int64_t row) {
  float acc = 0.0f;
  if (is_block_format(w.scheme)) {
    const int64_t per_block = block_elements(w.scheme) / 32;
    const uint8_t* r = w.q + row * w.row_bytes();
    for (int64_t b = 0; b < int8_blocks(w.k); ++b) {
      Int8Block parts;
      block_int8_parts(w.scheme, r + b / per_block * block_bytes(w.scheme), b % per_block, &parts);
      int32_t half[2] = {0, 0}, qsum = 0;
      for (int64_t i = 0; i < 32; ++i) {
        half[i / 16] += qx[b * 32 + i] * parts.q[i];
        qsum += qx[b * 32 + i];
      }
      const int32_t isum = parts.sc[0] * half[0] + parts.sc[1] * half[1];
      float inner = half_to_float(parts.d) * static_cast<float>(isum);
      if (w.scheme != Scheme::Q5_0 && w.scheme != Scheme::Q6_K) inner += parts.c * static_cast<float>(qsum);
      acc += dx[b] * inner;
    }
    return acc;
  }
  const int32_t offset = w.scheme == Scheme::Q4_0 ? 8 : 0;
  for (int64_t b = 0; b < int8_blocks(w.k); ++b) {
    const int64_t i0 = b * 32, i1 = std::min(w.k, i0 + 32);
    int32_t isum = 0, qsum = 0;
    for (int64_t i = i0; i < i1; ++i) {
      isum += qx[i] * (w.raw(row, i) - offset);
      qsum += qx[i];
    }
    const int64_t g = row * w.groups() + i0 / w.group;
    float inner = half_to_float(w.scales[g]) * static_cast<float>(isum);
    if (w.scheme == Scheme::Q4_1) inner += half_to_float(w.mins[g]) * static_cast<float>(qsum);
    acc += dx[b] * inner;
  }
  return acc;
}

Status linear_prepare(KernelContext& ctx, Inputs in, Outputs out, void**) {
  LinearArgs a;
  KILN_RETURN_IF_ERROR(linear_args(true, in, out, &a));
  if (a.compute == Compute::Int8) ctx.scratch_bytes = int8_scratch_bytes(a.m, a.w.k);
  if (a.compute == Compute::Int8Row) ctx.scratch_bytes = int8_row_scratch_bytes(a.m, a.w.k);
  return Status::ok();
}

Status linear_run(KernelContext& ctx, Inputs in, Outputs out) {
  LinearArgs a;
  KILN_RETURN_IF_ERROR(linear_args(false, in, out, &a));
  const QuantMatrix& w = a.w;
  const float* x = a.x->data_as<const float>();
  const float* bias = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  float* y = out[0]->data_as<float>();
  Int8Scratch s{};
  Int8RowScratch r{};
  KILN_CHECK_OR_RETURN(a.compute == Compute::Float32 || ctx.scratch != nullptr, KernelFailure,
                       "%s: no scratch was planned for compute=int8", kLinearOp);
  if (a.compute == Compute::Int8) {
    s = int8_scratch(ctx.scratch, a.m, w.k);
    for (int64_t i = 0; i < a.m; ++i) quantize_row_int8(x + i * w.k, w.k, s.qx + i * w.k, s.dx + i * int8_blocks(w.k));
  }
  if (a.compute == Compute::Int8Row) {
    r = int8_row_scratch(ctx.scratch, a.m, w.k);
    for (int64_t i = 0; i < a.m; ++i) quantize_row_u8(x + i * w.k, w.k, r.q + i * w.k, r.scale + i, r.zero + i);
  }
  parallel_for(w.n, grain_for(a.m * w.k), [&](int64_t n0, int64_t n1) {
    for (int64_t i = 0; i < a.m; ++i) {
      for (int64_t j = n0; j < n1; ++j) {
        const float dot = a.compute == Compute::Int8 ? linear_int8(w, s.qx + i * w.k, s.dx + i * int8_blocks(w.k), j)
                          : a.compute == Compute::Int8Row ? linear_int8_row(w, r.q + i * w.k, r.scale[i], r.zero[i], j)
                                                          : linear_f32(w, x + i * w.k, j);
        y[i * w.n + j] = bias != nullptr ? dot + bias[j] : dot;
      }
    }
  });
  return Status::ok();
}

Status embedding_run(KernelContext&, Inputs in, Outputs out) {
  EmbeddingArgs a;
  KILN_RETURN_IF_ERROR(embedding_args(false, in, out, &a));
  const QuantMatrix& w = a.w;
  const Tensor& idx = *a.indices;
  float* y = out[0]->data_as<float>();
  for (int64_t t = 0; t < idx.numel(); ++t) {
    const int64_t row =
        idx.dtype() == ScalarType::Int64 ? idx.data_as<const int64_t>()[t] : idx.data_as<const int32_t>()[t];
    KILN_CHECK_OR_RETURN(row >= 0 && row < w.n, KernelFailure, "%s: index %lld is out of range for %lld rows",
                         kEmbeddingOp, static_cast<long long>(row), static_cast<long long>(w.n));
    for (int64_t i = 0; i < w.k; ++i) y[t * w.k + i] = w.weight(row, i);
  }
  return Status::ok();
}

}  // namespace
}  // namespace quantized
}  // namespace kiln

KILN_REGISTER_KERNEL(kiln::quantized::kLinearOp, KILN_QUANTIZED_LINEAR_DTYPES, kiln::quantized::linear_run,
                     kiln::quantized::linear_prepare);
KILN_REGISTER_KERNEL(kiln::quantized::kLinearOp, "*", kiln::quantized::linear_run, kiln::quantized::linear_prepare);
KILN_REGISTER_KERNEL(kiln::quantized::kEmbeddingOp, KILN_QUANTIZED_EMBEDDING_DTYPES, kiln::quantized::embedding_run);
KILN_REGISTER_KERNEL(kiln::quantized::kEmbeddingOp, "*", kiln::quantized::embedding_run);
