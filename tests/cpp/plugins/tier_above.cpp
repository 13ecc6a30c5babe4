// A relu at a tier above the runtime's optimized one, whose prepare declines
// inputs with an odd number of elements (the next tier then serves them). Its
// results are offset by 1000 so a test can tell which kernel ran.
#include <kiln/kiln.h>

namespace {
kiln::Status prepare(kiln::KernelContext&, kiln::Span<const kiln::Value* const> in, kiln::Span<kiln::Tensor* const>,
                     void**) {
  if (in.size() != 1 || !in[0]->is_tensor()) return kiln::Status(kiln::Error::KernelFailure, "relu takes one tensor");
  if (in[0]->tensor->numel() % 2 != 0) return kiln::Status(kiln::Error::NotSupported, "odd sizes are not mine");
  return kiln::Status::ok();
}

kiln::Status run(kiln::KernelContext&, kiln::Span<const kiln::Value* const> in, kiln::Span<kiln::Tensor* const> out) {
  const kiln::Tensor& x = *in[0]->tensor;
  kiln::Status st = out[0]->resize(x.sizes());
  if (!st.is_ok()) return st;
  const float* xp = x.data_as<const float>();
  float* yp = out[0]->data_as<float>();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = (xp[i] > 0 ? xp[i] : 0.0f) + 1000.0f;
  return kiln::Status::ok();
}
}  // namespace

KILN_REGISTER_TIERED_KERNEL(200, "aten::relu.default", "f32", run, prepare);
