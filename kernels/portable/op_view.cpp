// Reshapes with copy semantics: view.default, squeeze.dims, unsqueeze.default, clone.default.
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// Resizes the output to `sizes` and copies self's bytes unchanged.
Status reshape_copy(const char* op, const Tensor& x, Tensor& y, Span<const int64_t> sizes) {
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes));
  copy_elements(y.data(), x.data(), x.numel(), element_size(x.dtype()));
  return Status::ok();
}

}  // namespace

Status view_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::view.default";
  const Tensor* x;
  Span<const int64_t> size;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "size", &size));
  KILN_CHECK_OR_RETURN(size.size() <= static_cast<size_t>(kMaxDims), KernelFailure, "%s: too many dims in %s", op,
                       describe_ints(size).c_str());
  Dims sizes(size);
  int infer = -1;
  int64_t known = 1;  // product of the given sizes, checked: they come from the file
  for (int d = 0; d < sizes.n; ++d) {
    if (sizes[d] == -1) {
      KILN_CHECK_OR_RETURN(infer < 0, KernelFailure, "%s: only one dim of %s may be -1", op,
                           describe_ints(size).c_str());
      infer = d;
    } else {
      KILN_CHECK_OR_RETURN(sizes[d] >= 0, KernelFailure, "%s: invalid size %s", op, describe_ints(size).c_str());
      KILN_RETURN_IF_ERROR(checked_mul(op, "the product of the view sizes", known, sizes[d], &known));
    }
  }
  const int64_t n = x->numel();
  if (infer >= 0) {
    KILN_CHECK_OR_RETURN(known != 0 && n % known == 0, KernelFailure, "%s: shape %s is invalid for input %s", op,
                         describe_ints(size).c_str(), describe(*x).c_str());
    sizes[infer] = n / known;
    known = n;
  }
  // `known` is now the exact product; resize_output also rejects a zero-sized
  // shape whose other sizes multiply past kMaxElements.
  KILN_CHECK_OR_RETURN(known == n, KernelFailure, "%s: shape %s is invalid for input %s", op,
                       describe_ints(size).c_str(), describe(*x).c_str());
  return reshape_copy(op, *x, *out[0], sizes.span());
}

Status squeeze_dims_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::squeeze.dims";
  const Tensor* x;
  Span<const int64_t> dims;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "dim", &dims));
  bool drop[kMaxDims] = {};
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(op, d, x->dim(), &w));
    if (x->dim() > 0 && x->sizes()[w] == 1) drop[w] = true;  // non-1 dims are left alone
  }
  Dims sizes;
  for (int d = 0; d < x->dim(); ++d)
    if (!drop[d]) sizes.push(x->sizes()[d]);
  return reshape_copy(op, *x, *out[0], sizes.span());
}

Status unsqueeze_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::unsqueeze.default";
  const Tensor* x;
  int64_t dim, d;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_CHECK_OR_RETURN(x->dim() < kMaxDims, KernelFailure, "%s: %s already has the maximum number of dims", op,
                       describe(*x).c_str());
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim() + 1, &d));
  Dims sizes;
  for (int i = 0; i <= x->dim(); ++i) {
    if (i == d) sizes.push(1);
    if (i < x->dim()) sizes.push(x->sizes()[i]);
  }
  return reshape_copy(op, *x, *out[0], sizes.span());
}

Status clone_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::clone.default";
  const Tensor* x;
  int64_t format;
  bool has_format;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  // Tensors are always contiguous, so every memory format is the same layout.
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 1, "memory_format", &format, &has_format));
  return reshape_copy(op, *x, *out[0], x->sizes());
}

KILN_REGISTER_KERNEL("aten::view.default", "*", view_run);
KILN_REGISTER_KERNEL("aten::squeeze.dims", "*", squeeze_dims_run);
KILN_REGISTER_KERNEL("aten::unsqueeze.default", "*", unsqueeze_run);
KILN_REGISTER_KERNEL("aten::clone.default", "*", clone_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
