// Compiled together with the runtime's own sources into libbroken.so: a library
// that (wrongly) embeds a private copy of the kiln runtime. Its registration
// goes into that copy's registry, which nobody else reads.
#include <kiln/kiln.h>

namespace {
kiln::Status noop(kiln::KernelContext&, kiln::Span<const kiln::Value* const>, kiln::Span<kiln::Tensor* const>) {
  return kiln::Status::ok();
}
}  // namespace

KILN_REGISTER_KERNEL("kiln_broken::only_in_the_copy.default", "f32", noop);

// How many kernels the embedded copy's registry holds (the real one has dozens).
extern "C" __attribute__((visibility("default"))) int kiln_broken_registry_size() {
  return static_cast<int>(kiln::registered_kernels().size());
}
