// The activation argument of the fused operators, and applying it (activation.h).
#include "activation.h"

#include <cstring>
#include <limits>

#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {

namespace {

struct Named {
  const char* name;
  Activation kind;
};
constexpr Named kActivations[] = {
    {"none", Activation::None},           {"relu", Activation::Relu},
    {"clamp", Activation::Clamp},         {"gelu", Activation::Gelu},
    {"gelu_tanh", Activation::GeluTanh},  {"silu", Activation::Silu},
    {"sigmoid", Activation::Sigmoid},     {"tanh", Activation::Tanh},
    {"hardswish", Activation::Hardswish}, {"hardsigmoid", Activation::Hardsigmoid},
};

// A double bound as a float: beyond the float range it is unbounded (a direct
// cast of an out-of-range double is undefined behaviour).
float float_bound(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return v > kMax ? kInf : v < -kMax ? -kInf : static_cast<float>(v);
}

// Runs y[i] = f(y[i]) over [0, n) on the pool.
template <typename F>
void map_in_place(float* y, int64_t n, F f) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = f(y[i]);
  });
}

}  // namespace

Status activation_arg(const char* op, Inputs in, size_t i, ActivationArg* out) {
  const char* name;
  size_t len;
  double lo, hi;
  KILN_RETURN_IF_ERROR(string_arg(op, in, i, "activation", &name, &len));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, i + 1, "act_min", &lo));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, i + 2, "act_max", &hi));
  const Named* found = nullptr;
  for (const Named& a : kActivations)
    if (std::strlen(a.name) == len && std::memcmp(a.name, name, len) == 0) found = &a;
  KILN_CHECK_OR_RETURN(found != nullptr, KernelFailure,
                       "%s: unknown activation \"%.*s\"; expected none, relu, clamp, gelu, gelu_tanh, silu, sigmoid, "
                       "tanh, hardswish or hardsigmoid",
                       op, static_cast<int>(std::min<size_t>(len, 64)), name);  // a corrupt string may be long
  out->kind = found->kind;
  if (found->kind == Activation::Clamp) {
    KILN_CHECK_OR_RETURN(!std::isnan(lo) && !std::isnan(hi), KernelFailure, "%s: clamp bounds must not be NaN", op);
    out->lo = float_bound(lo);
    out->hi = float_bound(hi);
  }
  return Status::ok();
}

void apply_activation(const ActivationArg& a, float* y, int64_t n) {
  switch (a.kind) {
    case Activation::None: return;
    case Activation::Relu: return map_in_place(y, n, [](float v) { return act::relu(v); });
    case Activation::Clamp: {
      const float lo = a.lo, hi = a.hi;
      return map_in_place(y, n, [=](float v) { return act::clamp(v, lo, hi); });
    }
    case Activation::Gelu: return map_in_place(y, n, [](float v) { return act::gelu(v); });
    case Activation::GeluTanh: return map_in_place(y, n, [](float v) { return act::gelu_tanh(v); });
    case Activation::Silu: return map_in_place(y, n, [](float v) { return act::silu(v); });
    case Activation::Sigmoid: return map_in_place(y, n, [](float v) { return act::sigmoid(v); });
    case Activation::Tanh: return map_in_place(y, n, [](float v) { return act::tanh(v); });
    case Activation::Hardswish: return map_in_place(y, n, [](float v) { return act::hardswish(v); });
    case Activation::Hardsigmoid: return map_in_place(y, n, [](float v) { return act::hardsigmoid(v); });
  }
}

Status hardtanh_args(const char* op, Inputs in, Outputs out, const Tensor** x, ClampBounds* b) {
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 3, x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "min_val", &b->lo));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "max_val", &b->hi));
  b->has_lo = b->has_hi = true;
  return Status::ok();
}

Status clamp_args(const char* op, Inputs in, Outputs out, const Tensor** x, ClampBounds* b) {
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 3, x));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 1, "min", &b->lo, &b->has_lo));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 2, "max", &b->hi, &b->has_hi));
  KILN_CHECK_OR_RETURN(b->has_lo || b->has_hi, KernelFailure, "%s: at least one of min and max must be given", op);
  return Status::ok();
}

Status gelu_args(const char* op, Inputs in, Outputs out, const Tensor** x, bool* tanh) {
  const char* mode;
  size_t len;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 2, x));
  KILN_RETURN_IF_ERROR(string_arg(op, in, 1, "approximate", &mode, &len));
  const bool none = len == 4 && std::memcmp(mode, "none", 4) == 0;
  *tanh = len == 4 && std::memcmp(mode, "tanh", 4) == 0;
  KILN_CHECK_OR_RETURN(none || *tanh, KernelFailure, "%s: approximate must be \"none\" or \"tanh\", got \"%.*s\"", op,
                       static_cast<int>(std::min<size_t>(len, 64)), mode);  // a corrupt string may be long
  return Status::ok();
}

}  // namespace kernels
}  // namespace kiln
