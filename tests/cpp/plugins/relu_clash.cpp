// Registers a kernel under a key the runtime's portable kernels already own.
#include <kiln/kiln.h>

namespace {
kiln::Status bogus_relu(kiln::KernelContext&, kiln::Span<const kiln::Value* const>, kiln::Span<kiln::Tensor* const>) {
  return kiln::Status(kiln::Error::Internal, "the clashing relu must never run");
}
}  // namespace

KILN_REGISTER_KERNEL("aten::relu.default", "f32", bogus_relu);
KILN_REGISTER_KERNEL("kiln_test::only_here.default", "f32", bogus_relu);
