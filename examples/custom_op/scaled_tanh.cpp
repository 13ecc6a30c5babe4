// The kernel of the custom operator kiln_demo::scaled_tanh (declared for export
// in kiln_demo/ops.py):
//
//   kiln_demo::scaled_tanh(Tensor x, float scale=1., *, float offset=0.) -> Tensor
//   y = tanh(scale * x) + offset
//
// The exporter writes one input value per schema argument, in schema order,
// keyword-only arguments included and defaults filled in, so the kernel always
// sees three inputs: x (Tensor), scale (Double), offset (Double). The runtime
// finds it by operator name + overload ("kiln_demo::scaled_tanh.default") and
// the dtypes of the tensor inputs ("f32" or "f64").
//
// Built with kiln_add_plugin() (see CMakeLists.txt): nothing references this
// file's symbols; the static registrar below runs when the library is loaded.
#include <kiln/kiln.h>

#include <cmath>

namespace {

constexpr const char* kOp = "kiln_demo::scaled_tanh.default";

template <typename T>
void scaled_tanh(const kiln::Tensor& x, kiln::Tensor& y, T scale, T offset) {
  const T* in = x.data_as<T>();
  T* out = y.data_as<T>();
  const int64_t n = x.numel();
  // Split large tensors over the runtime's thread pool (never allocate here).
  kiln::parallel_for(n, 16384, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = std::tanh(scale * in[i]) + offset;
  });
}

kiln::Status scaled_tanh_run(kiln::KernelContext&, kiln::Span<const kiln::Value* const> inputs,
                             kiln::Span<kiln::Tensor* const> outputs) {
  KILN_CHECK_OR_RETURN(inputs.size() == 3 && outputs.size() == 1, KernelFailure,
                       "%s: expected 3 inputs and 1 output, got %zu and %zu", kOp, inputs.size(), outputs.size());
  KILN_CHECK_OR_RETURN(inputs[0]->is_tensor(), KernelFailure, "%s: x must be a tensor", kOp);
  KILN_CHECK_OR_RETURN(inputs[1]->is_scalar() && inputs[2]->is_scalar(), KernelFailure,
                       "%s: scale and offset must be scalars, got %s and %s", kOp,
                       kiln::value_kind_name(inputs[1]->kind), kiln::value_kind_name(inputs[2]->kind));
  const kiln::Tensor& x = inputs[0]->as_tensor();
  kiln::Tensor& y = *outputs[0];
  // Outputs are planned at export with their largest sizes: resize, never allocate.
  KILN_RETURN_IF_ERROR(y.resize(x.sizes()));
  const double scale = inputs[1]->to_double(), offset = inputs[2]->to_double();
  switch (x.dtype()) {
    case kiln::ScalarType::Float32:
      scaled_tanh<float>(x, y, static_cast<float>(scale), static_cast<float>(offset));
      return kiln::Status::ok();
    case kiln::ScalarType::Float64: scaled_tanh<double>(x, y, scale, offset); return kiln::Status::ok();
    default:  // unreachable: the registry only resolves this kernel for f32 and f64
      return kiln::Status(kiln::Error::KernelFailure,
                          kiln::format("%s: unsupported input %s", kOp, kiln::describe(x).c_str()));
  }
}

}  // namespace

// One registration serving two dtype signatures ('|'-separated alternatives,
// each the dtypes of the tensor inputs in order).
KILN_REGISTER_KERNEL("kiln_demo::scaled_tanh.default", "f32|f64", scaled_tanh_run);
