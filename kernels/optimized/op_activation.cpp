// Optimized float32 activations: relu, hardtanh, clamp, sigmoid, tanh, gelu, silu, hardswish,
// hardsigmoid, all through the f32_activation microkernels.
#include <iterator>
#include <limits>

#include "common/activation.h"
#include "common/dtype_dispatch.h"
#include "common/kernel_table.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_activation.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// y = act(x) over the pool; y already has x's shape (unary_setup).
void activate(Isa isa, Activation act, const Tensor& x, Tensor& y, float lo = 0.0f, float hi = 0.0f) {
  const auto map = f32_activation_for(isa).map;
  const float* xp = x.data_as<const float>();
  float* yp = y.data_as<float>();
  parallel_for(x.numel(), kElementwiseGrain,
               [&](int64_t begin, int64_t end) { map(act, xp + begin, yp + begin, end - begin, lo, hi); });
}

// The activations of one argument: one microkernel case each.
struct UnaryActivation {
  const char* name;
  Activation kind;
};
constexpr UnaryActivation kUnaryActivations[] = {
    {"aten::relu.default", Activation::Relu},           {"aten::sigmoid.default", Activation::Sigmoid},
    {"aten::tanh.default", Activation::Tanh},           {"aten::silu.default", Activation::Silu},
    {"aten::hardswish.default", Activation::Hardswish}, {"aten::hardsigmoid.default", Activation::Hardsigmoid},
};

template <size_t I>
Status unary_run(KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(kUnaryActivations[I].name, in, out, 1, &x));
  activate(ctx.isa, kUnaryActivations[I].kind, *x, *out[0]);
  return Status::ok();
}

// Bounds convert like the portable kernel's (saturate_cast); a missing one is infinite.
void clamp(Isa isa, const Tensor& x, Tensor& y, const ClampBounds& b) {
  activate(isa, Activation::Clamp, x, y, b.has_lo ? saturate_cast<float>(b.lo) : -kInf,
           b.has_hi ? saturate_cast<float>(b.hi) : kInf);
}

Status hardtanh_run(KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor* x;
  ClampBounds b;
  KILN_RETURN_IF_ERROR(hardtanh_args("aten::hardtanh.default", in, out, &x, &b));
  clamp(ctx.isa, *x, *out[0], b);
  return Status::ok();
}

Status clamp_run(KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor* x;
  ClampBounds b;
  KILN_RETURN_IF_ERROR(clamp_args("aten::clamp.default", in, out, &x, &b));
  clamp(ctx.isa, *x, *out[0], b);
  return Status::ok();
}

Status gelu_run(KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor* x;
  bool tanh;
  KILN_RETURN_IF_ERROR(gelu_args("aten::gelu.default", in, out, &x, &tanh));
  activate(ctx.isa, tanh ? Activation::GeluTanh : Activation::Gelu, *x, *out[0]);
  return Status::ok();
}

}  // namespace

[[maybe_unused]] const bool kUnaryActivationsRegistered =
    register_kernel_table<std::size(kUnaryActivations)>([](auto i) {
      return internal::at_tier(kTierOptimized,
                               KernelDef{KILN_ABI_VERSION, kUnaryActivations[i].name, "f32", unary_run<i>});
    });
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::hardtanh.default", "f32", hardtanh_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::clamp.default", "f32", clamp_run);
KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::gelu.default", "f32", gelu_run);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
