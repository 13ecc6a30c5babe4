// kiln_example::add_one: a one-kernel extension library used to test kiln_add_extension.
#include <kiln/kiln.h>

namespace {

kiln::Status add_one(kiln::KernelContext&, kiln::Span<const kiln::Value* const> inputs,
                     kiln::Span<kiln::Tensor* const> outputs) {
  KILN_CHECK_OR_RETURN(inputs.size() == 1 && outputs.size() == 1 && inputs[0]->is_tensor(), KernelFailure,
                       "kiln_example::add_one takes one tensor");
  const kiln::Tensor& x = inputs[0]->as_tensor();
  KILN_RETURN_IF_ERROR(outputs[0]->resize(x.sizes()));
  for (int64_t i = 0; i < x.numel(); ++i) outputs[0]->data_as<float>()[i] = x.data_as<float>()[i] + 1.0f;
  return kiln::Status::ok();
}

}  // namespace

KILN_REGISTER_KERNEL("kiln_example::add_one.default", "f32", add_one);
