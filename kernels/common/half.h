// IEEE binary16 (float16) and bfloat16 to and from float, in portable C++ that compilers vectorize:
// the KV caches kept in 16 bits (kiln::sdpa_rows reads them), aten::_to_copy, the quantized
// formats' scales. Every conversion is exact where the value fits, and rounds to nearest-even where
// it does not, as PyTorch's do.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {
namespace kernels {

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// float16 -> float, exact for every value (subnormals, infinities, NaN payloads). Without branches:
// exponent and mantissa are moved to float's places and scaled by 2^112 (the difference of the biases),
// which also normalizes the subnormals; an all-ones exponent becomes float's.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t rest = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const float scaled = bits_to_float(rest) * bits_to_float(0x77800000u);        // * 2^112
  const uint32_t special = (h & 0x7c00u) == 0x7c00u ? 0x7f800000u | rest : 0u;  // infinity or NaN
  return bits_to_float(sign | (special != 0 ? special : float_to_bits(scaled)));
}

// float -> float16, rounded to nearest-even; overflow gives infinity, NaN stays NaN (quiet).
inline uint16_t float_to_half(float f) {
  const uint32_t x = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {
    // Below float16's smallest normal (2^-14): a subnormal or zero, 2^-24 per step. Adding 0.5 makes
    // the float's own rounding (nearest-even) do it: the sum's low mantissa bits are the result.
    const float sum = bits_to_float(a) + 0.5f;
    return static_cast<uint16_t>(sign | (float_to_bits(sum) - 0x3f000000u));
  }
  // A normal: rebias the exponent (127 -> 15) and round the 13 bits dropped to nearest-even.
  const uint32_t odd = (a >> 13) & 1u;
  return static_cast<uint16_t>(sign | ((a + 0xc8000fffu + odd) >> 13));
}

inline float bfloat16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

// float -> bfloat16, rounded to nearest-even; NaN stays NaN (quiet).
inline uint16_t float_to_bfloat16(float f) {
  const uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// A bfloat16 GEMM's sums (optimized/bf16_gemm.h) run over slices of K of at most this many pairs, all
// of one length (bf16_gemm_slice_pairs), each summed from zero and then added to the earlier slices'
// sum: part of what a sum is, the same at every level and in the portable reference.
constexpr int64_t kBf16GemmKcPairs = 256;
inline int64_t bf16_gemm_slice_pairs(int64_t pairs) {
  if (pairs <= kBf16GemmKcPairs) return pairs < 1 ? 1 : pairs;
  const int64_t slices = (pairs + kBf16GemmKcPairs - 1) / kBf16GemmKcPairs;
  return (pairs + slices - 1) / slices;
}

// An operand of a bfloat16 GEMM (optimized/bf16_gemm.h): float_to_bfloat16 after subnormals become
// zero of their sign, as AVX512_BF16's conversions round (vcvtne2ps2bf16).
inline uint16_t bf16_gemm_operand(float f) {
  const uint32_t x = float_to_bits(f);
  if ((x & 0x7f800000u) == 0) return static_cast<uint16_t>((x >> 16) & 0x8000u);
  return float_to_bfloat16(f);
}

}  // namespace kernels
}  // namespace kiln
