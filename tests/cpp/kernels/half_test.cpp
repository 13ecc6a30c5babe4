// kernels/common/half.h against references written from the formats' definitions, not from its bit
// tricks: every float16 and bfloat16 value widened, every one narrowed back, and the rounding of the
// floats between neighbours (nearest, ties to even), overflow, NaN and signed zeros.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/half.h"
#include "harness.h"

namespace kiln::test {
namespace {

using kernels::bfloat16_to_float;
using kernels::float_to_bfloat16;
using kernels::float_to_half;
using kernels::half_to_float;

// float16 from its fields: (-1)^s * 2^(e - 15) * (1 + m / 1024), subnormals 2^-14 * m / 1024.
double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double magnitude = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -magnitude : magnitude;
}

bool is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

KILN_TEST(every_float16_widens_exactly_and_narrows_back) {
  int failures = 0;
  for (uint32_t i = 0; i < 0x10000 && failures < 5; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = half_to_float(h);
    if (is_half_nan(h)) {
      KILN_EXPECT(std::isnan(f) && is_half_nan(float_to_half(f)), "float16 %04x: NaN must stay NaN", i);
      continue;
    }
    const bool inf = (h & 0x7fff) == 0x7c00;
    const double want = inf ? ((h >> 15) ? -HUGE_VAL : HUGE_VAL) : half_value(h);
    const bool ok = static_cast<double>(f) == want && std::signbit(f) == ((h >> 15) != 0) && float_to_half(f) == h;
    failures += ok ? 0 : 1;
    KILN_EXPECT(ok, "float16 %04x: widened to %.9g (want %.9g), narrowed back to %04x", i, f, want, float_to_half(f));
  }
}

// Between neighbours h and h + 1 (same sign, finite): below the midpoint gives h, above it h + 1, and
// the midpoint the even one of the two. Every midpoint of float16 is a float.
KILN_TEST(float16_rounds_to_nearest_even) {
  int failures = 0;
  for (uint32_t i = 0; i < 0x7bff && failures < 5; ++i) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const auto lo = static_cast<uint16_t>(i | sign), hi = static_cast<uint16_t>((i + 1) | sign);
      const float mid = static_cast<float>((half_value(lo) + half_value(hi)) / 2);
      const float toward_lo = std::nextafter(mid, half_to_float(lo)),
                  toward_hi = std::nextafter(mid, half_to_float(hi));
      const uint16_t even = (i & 1) == 0 ? lo : hi;
      const bool ok = float_to_half(mid) == even && float_to_half(toward_lo) == lo && float_to_half(toward_hi) == hi;
      failures += ok ? 0 : 1;
      KILN_EXPECT(ok, "float16 between %04x and %04x: midpoint %.9g gave %04x, %.9g gave %04x, %.9g gave %04x", lo, hi,
                  mid, float_to_half(mid), toward_lo, float_to_half(toward_lo), toward_hi, float_to_half(toward_hi));
    }
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  KILN_EXPECT(float_to_half(65504.0f) == 0x7bff && float_to_half(65519.996f) == 0x7bff, "65504..65520 stays finite");
  KILN_EXPECT(float_to_half(65520.0f) == 0x7c00 && float_to_half(-1e30f) == 0xfc00 && float_to_half(kInf) == 0x7c00,
              "from 65520 on: infinity");
  KILN_EXPECT(
      float_to_half(std::ldexp(1.0f, -25)) == 0 && float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 1,
      "half of the smallest subnormal rounds to even (zero), above it to the subnormal");
  KILN_EXPECT(float_to_half(-0.0f) == 0x8000 && float_to_half(-1e-30f) == 0x8000,
              "negative zero and underflow keep the sign");
  KILN_EXPECT(is_half_nan(float_to_half(std::numeric_limits<float>::quiet_NaN())), "NaN narrows to NaN");
}

KILN_TEST(every_bfloat16_widens_exactly_and_rounds_to_nearest_even) {
  int failures = 0;
  for (uint32_t i = 0; i < 0x10000 && failures < 5; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = bfloat16_to_float(h);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if (std::isnan(f)) {
      KILN_EXPECT(std::isnan(bfloat16_to_float(float_to_bfloat16(f))), "bfloat16 %04x: NaN must stay NaN", i);
      continue;
    }
    bool ok = bits == i << 16 && float_to_bfloat16(f) == h;
    // The floats just above: below the midpoint to h, at it to the even one, above it to h + 1.
    if (ok && (i & 0x7fff) < 0x7f7f) {
      const uint16_t even = (i & 1) == 0 ? h : static_cast<uint16_t>(i + 1);
      ok = float_to_bfloat16(kernels::bits_to_float((i << 16) | 0x7fff)) == h &&
           float_to_bfloat16(kernels::bits_to_float((i << 16) | 0x8000)) == even &&
           float_to_bfloat16(kernels::bits_to_float((i << 16) | 0x8001)) == static_cast<uint16_t>(i + 1);
    }
    failures += ok ? 0 : 1;
    KILN_EXPECT(ok, "bfloat16 %04x: widened to %.9g, or a float above it rounded wrong", i, f);
  }
  KILN_EXPECT(float_to_bfloat16(std::numeric_limits<float>::max()) == 0x7f80, "float's largest rounds to infinity");
}

}  // namespace
}  // namespace kiln::test
