// The vector math of kernels/optimized/simd/vec_math.h (through the f32_activation and f32_unary
// tables) against float64 references, over a sweep of floats with every exponent (and a dense one
// where the functions bend), at every level this CPU supports. Prints the measured errors that
// docs/kernels.md ("Vector math") states, and checks bounds on them and PyTorch's special values.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "common/activation.h"
#include "harness.h"
#include "optimized/f32_activation.h"
#include "optimized/f32_unary.h"

namespace kiln::test {
namespace {

using kernels::Activation;
using kernels::optimized::UnaryMath;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Function {
  const char* name;
  bool is_activation;
  Activation act;
  UnaryMath math;
  double (*reference)(double);  // in float64
  float (*scalar)(float);       // the portable kernel's float formula
  double max_ulp;               // bound on the error beyond the portable formula's, in ulp of the float64 result
  double max_abs;               // ... or on the absolute error (for the formulas that cancel)
};

const Function kFunctions[] = {
    {"exp", false, Activation::None, UnaryMath::Exp, [](double x) { return std::exp(x); },
     [](float x) { return std::exp(x); }, 2, 0},
    {"erf", false, Activation::None, UnaryMath::Erf, [](double x) { return std::erf(x); },
     [](float x) { return std::erf(x); }, 2, 0},
    {"tanh", true, Activation::Tanh, UnaryMath::Exp, [](double x) { return std::tanh(x); },
     [](float x) { return kernels::act::tanh(x); }, 3, 0},
    {"sigmoid", true, Activation::Sigmoid, UnaryMath::Exp, [](double x) { return 1 / (1 + std::exp(-x)); },
     [](float x) { return kernels::act::sigmoid(x); }, 3, 0},
    {"silu", true, Activation::Silu, UnaryMath::Exp, [](double x) { return x / (1 + std::exp(-x)); },
     [](float x) { return kernels::act::silu(x); }, 3, 0},
    // 1 + erf(x / sqrt 2) cancels for x < 0: the float formula (PyTorch's and the portable
    // kernel's) carries an absolute error of about |x| * 2^-24 there.
    {"gelu", true, Activation::Gelu, UnaryMath::Exp,
     [](double x) { return 0.5 * x * std::erfc(-x * 0.7071067811865476); },
     [](float x) { return kernels::act::gelu(x); }, 3, 1e-6},
    {"gelu_tanh", true, Activation::GeluTanh, UnaryMath::Exp,
     [](double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); },
     [](float x) { return kernels::act::gelu_tanh(x); }, 3, 1e-6},
    {"hardswish", true, Activation::Hardswish, UnaryMath::Exp,
     [](double x) { return x * std::fmin(std::fmax(x + 3, 0.0), 6.0) / 6; },
     [](float x) { return kernels::act::hardswish(x); }, 1, 0},
    {"hardsigmoid", true, Activation::Hardsigmoid, UnaryMath::Exp,
     [](double x) { return std::fmin(std::fmax(x + 3, 0.0), 6.0) / 6; },
     [](float x) { return kernels::act::hardsigmoid(x); }, 1, 0},
};

void apply(const Function& f, Isa isa, const std::vector<float>& x, std::vector<float>& y) {
  y.resize(x.size());
  const int64_t n = static_cast<int64_t>(x.size());
  if (f.is_activation)
    kernels::optimized::f32_activation_for(isa).map(f.act, x.data(), y.data(), n, 0, 0);
  else
    kernels::optimized::f32_unary_for(isa).map(f.math, x.data(), y.data(), n, 0);
}

// The spacing of floats at |y| (the smallest subnormal below the normal range).
double ulp_at(double y) {
  const float a = static_cast<float>(std::fabs(y));
  if (!(a < std::numeric_limits<float>::max())) return std::ldexp(1.0, 104);
  return std::fmax(static_cast<double>(std::nextafter(a, kInf)) - a, std::ldexp(1.0, -149));
}

// Every 8191st float of each sign (all exponents: tiny, subnormal, huge, the over/underflow
// ranges), plus every 512th float of [-16, 16] where the functions bend, plus special values.
std::vector<float> sweep() {
  std::vector<float> xs;
  for (uint64_t bits = 0; bits < 0x7f800000u; bits += 8191) {
    float v;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&v, &b, 4);
    xs.push_back(v);
    xs.push_back(-v);
  }
  uint32_t lo, hi;
  const float lo_f = 1e-3f, hi_f = 16.0f;
  std::memcpy(&lo, &lo_f, 4);
  std::memcpy(&hi, &hi_f, 4);
  for (uint32_t b = lo; b < hi; b += 512) {
    float v;
    std::memcpy(&v, &b, 4);
    xs.push_back(v);
    xs.push_back(-v);
  }
  for (float v : {0.0f,    -0.0f,  kInf,    -kInf,  kNaN,   -kNaN,   88.72f, 88.73f, 89.0f, -87.3f, -103.9f, -104.0f,
                  -150.0f, 1e-45f, -1e-45f, 1e-40f, 0.625f, -0.625f, 1.0f,   -1.0f,  3.93f, -3.93f, -3.0f,   3.0f})
    xs.push_back(v);
  return xs;
}

KILN_TEST(vec_math_error_against_float64) {
  const std::vector<float> xs = sweep();
  std::vector<float> y;
  constexpr double kFloatMin = std::numeric_limits<float>::min();
  for (Isa isa : supported_isas()) {
    for (const Function& f : kFunctions) {
      apply(f, isa, xs, y);
      // ulp errors are taken where the result is a normal float and the portable kernel's float
      // formula is itself within 4 ulp (elsewhere the formula, not the math, sets the error).
      double worst_ulp = 0, worst_abs = 0, scalar_ulp = 0;
      float worst_ulp_x = 0, worst_abs_x = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const float x = xs[i];
        const float want_scalar = f.scalar(x);
        if (std::isnan(x) || std::isinf(x) || std::isnan(want_scalar)) {
          // Special values: exactly what the portable formula gives (NaN for NaN).
          const bool same = std::isnan(want_scalar) ? std::isnan(y[i]) : y[i] == want_scalar;
          KILN_EXPECT(same, "%s [%s]: f(%g) = %g, the portable kernel gives %g", f.name, isa_name(isa), x, y[i],
                      want_scalar);
          continue;
        }
        const double ref = f.reference(x);
        if (std::fabs(ref) > std::numeric_limits<float>::max() || std::isinf(want_scalar)) {
          // Overflow, in the math or in the formula: the same infinity as the portable kernel.
          KILN_EXPECT(y[i] == want_scalar || (std::isinf(y[i]) && std::fabs(ref) > 3.4e38),
                      "%s [%s]: f(%g) = %g, the portable kernel gives %g", f.name, isa_name(isa), x, y[i], want_scalar);
          continue;
        }
        const double err = std::fabs(static_cast<double>(y[i]) - ref);
        const double scalar_err = std::fabs(static_cast<double>(want_scalar) - ref);
        const double ulps = err / ulp_at(ref);
        if (std::fabs(ref) >= kFloatMin && scalar_err <= 4 * ulp_at(ref)) {
          if (ulps > worst_ulp) worst_ulp = ulps, worst_ulp_x = x;
          scalar_ulp = std::fmax(scalar_ulp, scalar_err / ulp_at(ref));
        }
        if (err > worst_abs) worst_abs = err, worst_abs_x = x;
        // No worse than the portable kernel's own float formula by more than max_ulp (absolute
        // below the normal range, or within max_abs for the formulas that cancel).
        const bool ok = err <= scalar_err + f.max_ulp * ulp_at(ref) || err <= kFloatMin || err <= f.max_abs;
        KILN_EXPECT(ok, "%s [%s]: f(%.9g) = %.9g, float64 gives %.17g (%.2f ulp), the portable formula %.9g", f.name,
                    isa_name(isa), x, y[i], ref, ulps, want_scalar);
      }
      std::printf(
          "  %-8s %-12s max %5.2f ulp at x=%-14.8g max abs %.3g at x=%-12.6g (portable float formula: %.2f ulp)\n",
          isa_name(isa), f.name, worst_ulp, worst_ulp_x, worst_abs, worst_abs_x, scalar_ulp);
    }
  }
}

// PyTorch's values at the edges (torch 2.13 eager, float32).
KILN_TEST(vec_math_special_values) {
  struct Case {
    const char* name;
    float x, want;
  };
  const Case cases[] = {
      {"exp", -kInf, 0.0f},      {"exp", kInf, kInf},          {"exp", -0.0f, 1.0f},        {"exp", 89.0f, kInf},
      {"exp", -104.0f, 0.0f},    {"tanh", kInf, 1.0f},         {"tanh", -kInf, -1.0f},      {"tanh", -0.0f, -0.0f},
      {"tanh", 1e-40f, 1e-40f},  {"erf", kInf, 1.0f},          {"erf", -kInf, -1.0f},       {"erf", -0.0f, -0.0f},
      {"sigmoid", -kInf, 0.0f},  {"sigmoid", kInf, 1.0f},      {"sigmoid", -200.0f, 0.0f},  {"silu", kInf, kInf},
      {"silu", -200.0f, -0.0f},  {"silu", -kInf, kNaN},        {"gelu", -kInf, kNaN},       {"gelu", kInf, kInf},
      {"gelu", -20.0f, -0.0f},   {"gelu_tanh", -kInf, kNaN},   {"gelu_tanh", kInf, kInf},   {"hardswish", -kInf, kNaN},
      {"hardswish", kInf, kInf}, {"hardsigmoid", -kInf, 0.0f}, {"hardsigmoid", kInf, 1.0f},
  };
  std::vector<float> x(1), y;
  for (Isa isa : supported_isas()) {
    for (const Case& c : cases) {
      for (const Function& f : kFunctions) {
        if (std::strcmp(f.name, c.name) != 0) continue;
        x[0] = c.x;
        apply(f, isa, x, y);
        const bool same =
            std::isnan(c.want) ? std::isnan(y[0]) : y[0] == c.want && std::signbit(y[0]) == std::signbit(c.want);
        KILN_EXPECT(same, "%s [%s]: f(%g) = %g, PyTorch gives %g", c.name, isa_name(isa), c.x, y[0], c.want);
      }
      x[0] = kNaN;  // NaN propagates through every function
      for (const Function& f : kFunctions) {
        apply(f, isa, x, y);
        KILN_EXPECT(std::isnan(y[0]), "%s [%s]: f(NaN) = %g", f.name, isa_name(isa), y[0]);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
