// The quantized weight formats of kiln_quantized::linear and ::embedding, and their argument checks,
// shared by the reference kernels (portable.cpp) and the fast ones (optimized.cpp).
//
// W is [N, K]; each row is cut into groups of `group` consecutive elements that share a float16 scale
// d (and for q4_1 a float16 min m):
//   q8_0  qweight int8  [N, K]      w = d * q
//   q4_0  qweight uint8 [N, K / 2]  w = d * (q - 8)      q = 0..15
//   q4_1  qweight uint8 [N, K / 2]  w = d * q + m
// scales (and mins) are float16 [N, K / group]. 4-bit values are packed as in GGUF: in each run of 32
// elements of a row, byte j holds element j (low nibble) and element j + 16 (high nibble). group is a
// multiple of 32 that divides K, or (q8_0 only) K itself, any K. With group 32 these are GGUF's blocks.
//
// The decoded weight is exact in float: d has 11 significant bits and q at most 8, so d * q (and
// d * (q - 8)) needs no rounding, and q4_1's + m rounds once, whether or not an FMA computes it.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/kernel_args.h"

namespace kiln {
namespace quantized {

using kernels::Inputs;
using kernels::Outputs;

enum class Scheme { Q8_0, Q4_0, Q4_1 };

// "float32": decoded weights times float32 inputs; "int8": inputs quantized per 32-block at run time.
enum class Compute { Float32, Int8 };

// IEEE binary16 -> float, exact (normals, subnormals, infinities, NaN).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// A quantized matrix, checked: every pointer covers what the shape says.
struct QuantMatrix {
  Scheme scheme = Scheme::Q8_0;
  int64_t n = 0, k = 0, group = 0;
  const uint8_t* q = nullptr;        // rows of row_bytes()
  const uint16_t* scales = nullptr;  // [n, groups()] float16 bits
  const uint16_t* mins = nullptr;    // [n, groups()] (q4_1) or null
  int64_t groups() const { return k / group; }
  int64_t row_bytes() const { return scheme == Scheme::Q8_0 ? k : k / 2; }
  bool four_bit() const { return scheme != Scheme::Q8_0; }

  // The raw value of element (row, i): int8 for q8_0, the nibble 0..15 otherwise.
  int32_t raw(int64_t row, int64_t i) const {
    const uint8_t* r = q + row * row_bytes();
    if (!four_bit()) return static_cast<int8_t>(r[i]);
    const uint8_t byte = r[i / 32 * 16 + i % 16];
    return i % 32 < 16 ? byte & 15 : byte >> 4;
  }
  // The decoded weight w[row][i] (the formulas above, in this order).
  float weight(int64_t row, int64_t i) const {
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

// kiln_quantized::linear(Tensor input, Tensor qweight, Tensor scales, Tensor? mins, Tensor? bias,
//                        str scheme, int group_size, str compute="float32") -> Tensor
struct LinearArgs {
  const Tensor* x = nullptr;
  const Tensor* bias = nullptr;
  QuantMatrix w;
  Compute compute = Compute::Float32;
  int64_t m = 0;  // rows of x
};

// kiln_quantized::embedding(Tensor qweight, Tensor scales, Tensor? mins, Tensor indices, str scheme,
//                           int group_size) -> Tensor
struct EmbeddingArgs {
  const Tensor* indices = nullptr;
  QuantMatrix w;
};

// The dtypes of the tensor inputs: input, qweight (int8 for q8_0, uint8 for 4 bits), scales, mins
// (q4_1), bias. "*" catches every other combination, so that it gets this kernel's error message
// (which argument is wrong) rather than a missing kernel.
#define KILN_QUANTIZED_LINEAR_DTYPES \
  "f32,i8,f16|f32,i8,f16,f32|f32,u8,f16|f32,u8,f16,f32|f32,u8,f16,f16|f32,u8,f16,f16,f32"
#define KILN_QUANTIZED_EMBEDDING_DTYPES "i8,f16,i64|i8,f16,i32|u8,f16,i64|u8,f16,i32|u8,f16,f16,i64|u8,f16,f16,i32"

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

}  // namespace quantized
}  // namespace kiln
