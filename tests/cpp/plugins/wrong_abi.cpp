// A registration that claims another ABI version, as a stale plugin would.
#include <kiln/kiln.h>

namespace {
kiln::Status noop(kiln::KernelContext&, kiln::Span<const kiln::Value* const>, kiln::Span<kiln::Tensor* const>) {
  return kiln::Status::ok();
}
const kiln::internal::KernelRegistrar stale(kiln::KernelDef{KILN_ABI_VERSION + 41, "kiln_test::stale.default", "f32",
                                                            noop});
}  // namespace
