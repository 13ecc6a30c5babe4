// A plugin for the one-runtime tests: one kernel and one backend, registered
// from static initializers into whatever runtime the process has (libkiln.so.0).
#include <kiln/kiln.h>

#include <cstring>

namespace {

kiln::Status add_ten(kiln::KernelContext&, kiln::Span<const kiln::Value* const> inputs,
                     kiln::Span<kiln::Tensor* const> outputs) {
  KILN_CHECK_OR_RETURN(inputs.size() == 1 && outputs.size() == 1 && inputs[0]->is_tensor(), KernelFailure,
                       "one_runtime::add_ten takes one tensor");
  const kiln::Tensor& x = inputs[0]->as_tensor();
  KILN_RETURN_IF_ERROR(outputs[0]->resize(x.sizes()));
  for (int64_t i = 0; i < x.numel(); ++i) outputs[0]->data_as<float>()[i] = x.data_as<float>()[i] + 10.0f;
  return kiln::Status::ok();
}

kiln::Status echo_init(kiln::Span<const uint8_t> processed, kiln::Span<const kiln::CompileSpecView>, void** handle) {
  KILN_CHECK_OR_RETURN(processed.size() >= sizeof(float), InvalidProgram, "one_runtime_echo: blob of %zu bytes",
                       processed.size());
  auto* scale = new float;
  std::memcpy(scale, processed.data(), sizeof(float));
  *handle = scale;
  return kiln::Status::ok();
}

kiln::Status echo_execute(void* handle, kiln::Span<const kiln::Value* const> inputs,
                          kiln::Span<kiln::Tensor* const> outputs) {
  KILN_CHECK_OR_RETURN(inputs.size() == 1 && outputs.size() == 1 && inputs[0]->is_tensor(), KernelFailure,
                       "one_runtime_echo takes one tensor");
  const kiln::Tensor& in = inputs[0]->as_tensor();
  KILN_CHECK_OR_RETURN(in.dtype() == kiln::ScalarType::Float32, KernelFailure, "one_runtime_echo needs f32");
  KILN_RETURN_IF_ERROR(outputs[0]->resize(in.sizes()));
  float scale = *static_cast<float*>(handle);
  for (int64_t i = 0; i < in.numel(); ++i) outputs[0]->data_as<float>()[i] = in.data_as<float>()[i] * scale + 10.0f;
  return kiln::Status::ok();
}

void echo_destroy(void* handle) { delete static_cast<float*>(handle); }

}  // namespace

KILN_REGISTER_KERNEL("one_runtime::add_ten.default", "f32", add_ten);
KILN_REGISTER_BACKEND("one_runtime_echo", echo_init, echo_execute, echo_destroy);
