// Indexing along one dim: slice.Tensor (clamped start/end, positive step) and select.int.
#include <algorithm>

#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {

Status slice_tensor_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::slice.Tensor";
  const Tensor* x;
  int64_t dim, start = 0, end = INT64_MAX, step, d;
  bool has_start, has_end;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 5, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 2, "start", &start, &has_start));
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 3, "end", &end, &has_end));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 4, "step", &step));
  KILN_CHECK_OR_RETURN(x->dim() > 0, KernelFailure, "%s: cannot slice a 0-D tensor", op);
  KILN_CHECK_OR_RETURN(step > 0, KernelFailure, "%s: step must be positive, got %lld", op,
                       static_cast<long long>(step));
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  if (!has_start) start = 0;
  if (!has_end) end = INT64_MAX;
  // Python slice semantics: negative counts from the end, then clamp.
  const int64_t size = x->sizes()[d];
  if (start < 0) start = start < -size ? 0 : start + size;
  if (end < 0) end = end < -size ? 0 : end + size;
  start = std::min(start, size);
  end = std::min(std::max(end, start), size);
  // 0 <= start <= end <= size: no overflow, whatever step is (it may be INT64_MAX).
  const int64_t len = end > start ? (end - start - 1) / step + 1 : 0;
  // One element or none: the step is never taken. Otherwise step < size, so
  // stride * step below stays within the input.
  if (len <= 1) step = 1;

  Dims sizes(x->sizes());
  sizes[static_cast<int>(d)] = len;
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], sizes.span()));
  if (out[0]->numel() == 0) return Status::ok();
  int64_t strides[kMaxDims];
  contiguous_strides(x->sizes(), strides);
  const size_t elem = element_size(x->dtype());
  const char* src = static_cast<const char*>(x->data()) + static_cast<size_t>(start * strides[d]) * elem;
  strides[d] *= step;
  strided_copy(out[0]->data(), src, elem, sizes, strides);
  return Status::ok();
}

Status select_int_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::select.int";
  const Tensor* x;
  int64_t dim, index, d;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "index", &index));
  KILN_CHECK_OR_RETURN(x->dim() > 0, KernelFailure, "%s: cannot select from a 0-D tensor", op);
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  const int64_t size = x->sizes()[d];
  KILN_CHECK_OR_RETURN(index >= -size && index < size, KernelFailure, "%s: index %lld out of range for dim %lld of %s",
                       op, static_cast<long long>(index), static_cast<long long>(d), describe(*x).c_str());
  if (index < 0) index += size;

  int64_t in_strides[kMaxDims], strides[kMaxDims];
  contiguous_strides(x->sizes(), in_strides);
  Dims sizes;
  for (int i = 0; i < x->dim(); ++i) {
    if (i == d) continue;
    strides[sizes.n] = in_strides[i];
    sizes.push(x->sizes()[i]);
  }
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], sizes.span()));
  if (out[0]->numel() == 0) return Status::ok();
  const size_t elem = element_size(x->dtype());
  const char* src = static_cast<const char*>(x->data()) + static_cast<size_t>(index * in_strides[d]) * elem;
  strided_copy(out[0]->data(), src, elem, sizes, strides);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::slice.Tensor", "*", slice_tensor_run);
KILN_REGISTER_KERNEL("aten::select.int", "*", select_int_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
