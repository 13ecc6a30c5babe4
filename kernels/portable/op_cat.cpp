// aten::cat.default: concatenation along one dim (legacy empty 1-D inputs are skipped).
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {

Status cat_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::cat.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  const Value* list = in[0];
  KILN_CHECK_OR_RETURN(list != nullptr && list->kind == ValueKind::TensorList, KernelFailure,
                       "%s: argument 0 (tensors) must be a tensor list", op);
  int64_t dim;
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  Span<Tensor* const> ts = list->as_tensors();
  KILN_CHECK_OR_RETURN(!ts.empty(), KernelFailure, "%s: expected a non-empty list of tensors", op);
  Tensor& y = *out[0];

  // PyTorch still accepts 1-D [0] tensors of any rank mismatch and ignores them.
  auto skipped = [](const Tensor* t) { return t->dim() == 1 && t->size(0) == 0; };
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < ts.size(); ++i) {
    KILN_CHECK_OR_RETURN(ts[i] != nullptr, KernelFailure, "%s: tensor %zu is None", op, i);
    KILN_RETURN_IF_ERROR(check_tensor(op, "tensor", *ts[i]));
    KILN_CHECK_OR_RETURN(ts[i]->dtype() == y.dtype(), KernelFailure, "%s: tensor %zu is %s but the output is %s", op, i,
                         describe(*ts[i]).c_str(), scalar_type_name(y.dtype()));
    if (ref == nullptr && !skipped(ts[i])) ref = ts[i];
  }
  KILN_CHECK_OR_RETURN(element_size(y.dtype()) > 0, KernelFailure, "%s: unknown dtype", op);
  if (ref == nullptr) ref = ts[0];  // all skipped: the result is empty like them
  KILN_CHECK_OR_RETURN(ref->dim() > 0, KernelFailure, "%s: zero-dimensional tensor %s cannot be concatenated", op,
                       describe(*ref).c_str());
  int64_t d;
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, ref->dim(), &d));
  Dims sizes(ref->sizes());
  sizes[static_cast<int>(d)] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = *ts[i];
    if (skipped(&t) && &t != ref) continue;
    bool match = t.dim() == ref->dim();
    for (int k = 0; match && k < t.dim(); ++k) match = k == d || t.sizes()[k] == ref->sizes()[k];
    KILN_CHECK_OR_RETURN(match, KernelFailure, "%s: tensor %zu %s does not match %s outside dim %lld", op, i,
                         describe(t).c_str(), describe(*ref).c_str(), static_cast<long long>(d));
    // Each size is valid, but many of them may add up past int64.
    KILN_RETURN_IF_ERROR(checked_add(op, "the concatenated size", sizes[static_cast<int>(d)], t.sizes()[d],
                                     &sizes[static_cast<int>(d)]));
  }
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (y.numel() == 0) return Status::ok();

  // Each output row (index over dims before d) is the tensors' rows back to
  // back. Tensors are walked in the outer loop so that a long list of empty
  // ones costs O(1) each, not O(rows) each.
  const size_t elem = element_size(y.dtype());
  const int64_t outer = prod(sizes.span(), 0, static_cast<int>(d));
  const int64_t inner = prod(sizes.span(), static_cast<int>(d) + 1, sizes.n);
  const int64_t row = sizes[static_cast<int>(d)] * inner;
  char* dst = static_cast<char*>(y.data());
  int64_t at = 0;  // offset of this tensor's chunk inside an output row
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = *ts[i];
    if (skipped(&t) && &t != ref) continue;
    const int64_t chunk = t.sizes()[d] * inner;
    if (chunk == 0) continue;
    const char* src = static_cast<const char*>(t.data());
    parallel_for(outer, grain_for(chunk), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) copy_elements(dst + (o * row + at) * elem, src + o * chunk * elem, chunk, elem);
    });
    at += chunk;
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::cat.default", "*", cat_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
