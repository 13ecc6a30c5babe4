// Test backend "test_echo": writes input + ECHO_INCREMENT (and counts its inits).
#include <kiln/kiln.h>

#include <cstring>

namespace {

kiln::Status echo_init(kiln::Span<const uint8_t> processed, kiln::Span<const kiln::CompileSpecView>, void** handle) {
  // The processed blob holds a float scale written at export time.
  KILN_CHECK_OR_RETURN(processed.size() >= sizeof(float), InvalidProgram, "test_echo: blob of %zu bytes",
                       processed.size());
  auto* scale = new float;
  std::memcpy(scale, processed.data(), sizeof(float));
  *handle = scale;
  return kiln::Status::ok();
}

kiln::Status echo_execute(void* handle, kiln::Span<const kiln::Value* const> inputs,
                          kiln::Span<kiln::Tensor* const> outputs) {
  KILN_CHECK_OR_RETURN(inputs.size() == 1 && outputs.size() == 1 && inputs[0]->is_tensor(), KernelFailure,
                       "test_echo takes one tensor");
  const kiln::Tensor& in = inputs[0]->as_tensor();
  KILN_CHECK_OR_RETURN(in.dtype() == kiln::ScalarType::Float32, KernelFailure, "test_echo needs f32");
  KILN_RETURN_IF_ERROR(outputs[0]->resize(in.sizes()));
  float scale = *static_cast<float*>(handle);
  for (int64_t i = 0; i < in.numel(); ++i) {
    outputs[0]->data_as<float>()[i] = in.data_as<float>()[i] * scale + ECHO_INCREMENT;
  }
  return kiln::Status::ok();
}

void echo_destroy(void* handle) { delete static_cast<float*>(handle); }

}  // namespace

KILN_REGISTER_BACKEND("test_echo", echo_init, echo_execute, echo_destroy);
