// The quantized weight formats of kiln_quantized::linear and ::embedding, and their argument checks,
// shared by the reference kernels (portable.cpp) and the fast ones (optimized.cpp).
//
// W is [N, K]. Two families.
//
// Split formats: each row is cut into groups of `group` consecutive elements that share a float16
// scale d (and for q4_1 a float16 min m):
//   q8_0  qweight int8  [N, K]      w = d * q
//   q4_0  qweight uint8 [N, K / 2]  w = d * (q - 8)      q = 0..15
//   q4_1  qweight uint8 [N, K / 2]  w = d * q + m
// scales (and mins) are float16 [N, K / group]. 4-bit values are packed as in GGUF: in each run of 32
// elements of a row, byte j holds element j (low nibble) and element j + 16 (high nibble). group is a
// multiple of 32 that divides K, or (q8_0 only) K itself, any K. With group 32 these are GGUF's blocks.
//
// Block formats: qweight uint8 [N, K / B * bytes] holds each row's GGUF blocks byte for byte, scales
// and mins are None and group_size is B (the block's elements). They are kept whole rather than split
// into values and scales like the formats above: their scales are packed 6-bit fields (q4_k, q5_k) or
// int8 under a float16 (q6_k) that a split would have to widen or re-pack, and one verbatim tensor is
// what a GGUF file holds, so a file's bytes are checked once (whole blocks, nothing else) and decode
// exactly as ggml does. Little-endian fields; per block (B elements, bytes):
//   q5_0  (32, 22)   d f16, qh u32, qs[16]            q = nibble | bit << 4,  w = d * (q - 16)
//   q5_1  (32, 24)   d f16, m f16, qh u32, qs[16]     w = d * q + m
//     element j < 16: low nibble of qs[j], bit j of qh; element j + 16: high nibble, bit j + 16
//   q4_k  (256, 144) d f16, dmin f16, scales[12], qs[128]
//   q5_k  (256, 176) d f16, dmin f16, scales[12], qh[32], qs[128]
//     8 sub-blocks of 32 with 6-bit scale sc_s and min m_s (scales[12], below);
//     w = (d * sc_s) * q - (dmin * m_s). Element 64 c + l (c = 0..3, l < 32): low nibble of
//     qs[32 c + l] (sub-block 2 c); element 64 c + 32 + l: its high nibble (sub-block 2 c + 1);
//     q5_k adds bit 2 c (resp. 2 c + 1) of qh[l] as 16.
//     scales[12], s < 4: sc = scales[s] & 63, m = scales[s + 4] & 63; s >= 4:
//     sc = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4, m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4
//   q6_k  (256, 210) ql[128], qh[64], sc int8[16], d f16
//     element e = 128 h + 32 t + l (h < 2, t < 4, l < 32): 4 low bits = nibble t / 2 of
//     ql[64 h + 32 (t % 2) + l], 2 high bits = bits 2 t, 2 t + 1 of qh[32 h + l];
//     w = (d * sc[e / 16]) * (q - 32)
//   f16   (32, 64)   32 IEEE float16 values           w = the value
//   bf16  (32, 64)   32 bfloat16 values (a float's high 16 bits)
//     Weights kept in 16 bits (a GGUF's F16 / BF16 tensors whose rows are whole blocks of 32), so a
//     file holds half a float32's bytes; the arithmetic is float32's.
//
// The decoded weight is exact in float: d has 11 significant bits and q at most 8, so d * q (and
// d * (q - 8)) needs no rounding, and q4_1's + m rounds once, whether or not an FMA computes it. The
// same holds for the block formats: d * sc (11 + 6 or 7 bits) and its product with q (5 or 6 more
// bits) are exact, so the only rounding is q5_1's + m and the K-quants' - dmin * m (itself exact).
#pragma once

#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "common/kernel_args.h"

namespace kiln {
namespace quantized {

using kernels::Inputs;
using kernels::Outputs;

enum class Scheme { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16, BF16 };

// The scheme's name in programs ("q4_k").
const char* scheme_name(Scheme s);
// Block formats (above): GGUF's blocks kept whole; their elements and bytes per block.
inline bool is_block_format(Scheme s) { return s >= Scheme::Q5_0; }
inline int64_t block_elements(Scheme s) {
  return s == Scheme::Q4_K || s == Scheme::Q5_K || s == Scheme::Q6_K ? 256 : 32;
}
inline int64_t block_bytes(Scheme s) {
  switch (s) {
    case Scheme::Q5_0: return 22;
    case Scheme::Q5_1: return 24;
    case Scheme::Q4_K: return 144;
    case Scheme::Q5_K: return 176;
    case Scheme::Q6_K: return 210;
    case Scheme::F16:
    case Scheme::BF16: return 64;
    default: return 0;
  }
}
constexpr int64_t kMaxBlockElements = 256;

// "float32": decoded weights times float32 inputs; "int8": inputs quantized per 32-block at run time;
// "int8_row": inputs quantized per row with a zero point, for q8_0 with one scale per output channel
// (quantize_row_u8 below: one exact integer sum per output, one float epilogue).
enum class Compute { Float32, Int8, Int8Row };

using kernels::half_to_float;  // common/half.h: exact for every float16

inline uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// Element e of one block of a block format, decoded as the formulas above say (the reference: one
// element at a time, straight from the layout).
float block_weight(Scheme s, const uint8_t* block, int64_t e);

// compute="int8" on a block format (q5_0, q5_1, q4_k, q5_k, q6_k; not f16 or bf16): the 32-block
// `b32` of a block as integers, w_i = d * sc[i / 16] * q_i + c, where
//   q5_0: q - 16, sc 1;  q5_1: q, sc 1, c = m;  q4_k, q5_k: q, sc the sub-block's, c = -(dmin * m);
//   q6_k: q - 32, sc the two int8 scales of its halves; c = 0 where not given.
// Every part is exact (quant.h's decoding above), so d * (sc * q) + c is the decoded weight.
struct Int8Block {
  int8_t q[32];
  int32_t sc[2];
  uint16_t d = 0, m = 0;  // float16 bits; m: q5_1 only
  float c = 0.0f;         // q4_k, q5_k only
};
inline bool int8_takes(Scheme s) { return s != Scheme::F16 && s != Scheme::BF16; }
void block_int8_parts(Scheme s, const uint8_t* block, int64_t b32, Int8Block* out);

// A quantized matrix, checked: every pointer covers what the shape says.
struct QuantMatrix {
  Scheme scheme = Scheme::Q8_0;
  int64_t n = 0, k = 0, group = 0;
  const uint8_t* q = nullptr;        // rows of row_bytes()
  const uint16_t* scales = nullptr;  // [n, groups()] float16 bits (null for a block format)
  const uint16_t* mins = nullptr;    // [n, groups()] (q4_1) or null
  int64_t groups() const { return k / group; }
  int64_t row_bytes() const {
    if (is_block_format(scheme)) return k / block_elements(scheme) * block_bytes(scheme);
    return scheme == Scheme::Q8_0 ? k : k / 2;
  }
  bool four_bit() const { return scheme == Scheme::Q4_0 || scheme == Scheme::Q4_1; }

  // The raw value of element (row, i): int8 for q8_0, the nibble 0..15 for q4_0 and q4_1.
  int32_t raw(int64_t row, int64_t i) const {
    const uint8_t* r = q + row * row_bytes();
    if (!four_bit()) return static_cast<int8_t>(r[i]);
    const uint8_t byte = r[i / 32 * 16 + i % 16];
    return i % 32 < 16 ? byte & 15 : byte >> 4;
  }
  // The decoded weight w[row][i] (the formulas above, in this order).
  float weight(int64_t row, int64_t i) const {
    if (is_block_format(scheme)) {
      const int64_t b = block_elements(scheme);
      return block_weight(scheme, q + row * row_bytes() + i / b * block_bytes(scheme), i % b);
    }
    const int64_t g = row * groups() + i / group;
    const float d = half_to_float(scales[g]);
    const int32_t v = raw(row, i);
    switch (scheme) {
      case Scheme::Q8_0: return d * static_cast<float>(v);
      case Scheme::Q4_0: return d * static_cast<float>(v - 8);
      default: return d * static_cast<float>(v) + half_to_float(mins[g]);
    }
  }
};

// kiln_quantized::linear(Tensor input, Tensor qweight, Tensor? scales, Tensor? mins, Tensor? bias,
//                        str scheme, int group_size, str compute="float32") -> Tensor
struct LinearArgs {
  const Tensor* x = nullptr;
  const Tensor* bias = nullptr;
  QuantMatrix w;
  Compute compute = Compute::Float32;
  int64_t m = 0;  // rows of x
};

// kiln_quantized::embedding(Tensor qweight, Tensor? scales, Tensor? mins, Tensor indices, str scheme,
//                           int group_size) -> Tensor
struct EmbeddingArgs {
  const Tensor* indices = nullptr;
  QuantMatrix w;
};

// The dtypes of the tensor inputs: input, qweight (int8 for q8_0, uint8 otherwise), scales (not for
// the block formats), mins (q4_1), bias. "*" catches every other combination, so that it gets this kernel's error
// message (which argument is wrong) rather than a missing kernel.
#define KILN_QUANTIZED_LINEAR_DTYPES \
  "f32,i8,f16|f32,i8,f16,f32|f32,u8,f16|f32,u8,f16,f32|f32,u8,f16,f16|f32,u8,f16,f16,f32|f32,u8|f32,u8,f32"
#define KILN_QUANTIZED_EMBEDDING_DTYPES \
  "i8,f16,i64|i8,f16,i32|u8,f16,i64|u8,f16,i32|u8,f16,f16,i64|u8,f16,f16,i32|u8,i64|u8,i32"

constexpr const char* kLinearOp = "kiln_quantized::linear.default";
constexpr const char* kEmbeddingOp = "kiln_quantized::embedding.default";

// Check every argument (KernelFailure naming the operator and the argument) and resize the output.
// `prepare`: at method load, where a method input has sizes but no storage yet.
Status linear_args(bool prepare, Inputs in, Outputs out, LinearArgs* a);
Status embedding_args(bool prepare, Inputs in, Outputs out, EmbeddingArgs* a);

// The input rows quantized for Compute::Int8: per block of 32 elements (the last one may be shorter),
// dx = max|x| / 127 and qx = round-half-even(x * (1 / dx)), or dx = 0 and qx = 0 for a block of zeros.
inline int64_t int8_blocks(int64_t k) { return (k + 31) / 32; }
void quantize_row_int8(const float* x, int64_t k, int8_t* qx, float* dx);

// The input rows quantized for Compute::Int8Row (asymmetric, like ONNX Runtime's and XNNPACK's dynamic
// quantization): per row, lo = min(0, min x), hi = max(0, max x), s = hi / 255 - lo / 255 (finite for
// any finite row), inv = 1 / s, z = clamp(nearbyint(-lo * inv), 0, 255) and
// q = clamp(nearbyint(x * inv) + z, 0, 255), in float, then as integers. A row of zeros, or one so small
// that 1 / s is not finite, gets s = 0, z = 0, q = 0; a row holding a NaN or an infinity gets s = NaN
// (its outputs are NaN) and q = 0. Then, w the int8 values and d the float16 scale of output j,
//   y[i][j] = (s_i * d_j) * float(sum_k (q_ik - z_i) * w_jk) (+ bias_j),
// the integer sum exact in int32 while k <= kInt8RowMaxK (|q - z| <= 255, |w| <= 128).
constexpr int64_t kInt8RowMaxK = 65536;
void quantize_row_u8(const float* x, int64_t k, uint8_t* q, float* scale, int32_t* zero);

}  // namespace quantized
}  // namespace kiln
