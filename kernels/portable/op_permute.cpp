// Dim reorderings materialised as copies: permute.default and transpose.int.
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// y[i0..] = x[i_perm[0]..]: output dim i walks input dim perm[i].
void permute_copy(const Tensor& x, Tensor& y, const int64_t* perm) {
  int64_t in_strides[kMaxDims];
  contiguous_strides(x.sizes(), in_strides);
  Dims sizes;
  int64_t strides[kMaxDims];
  for (int i = 0; i < x.dim(); ++i) {
    sizes.push(x.sizes()[perm[i]]);
    strides[i] = in_strides[perm[i]];
  }
  strided_copy(y.data(), x.data(), element_size(x.dtype()), sizes, strides);
}

Status permuted_output(const char* op, const Tensor& x, Tensor& y, const int64_t* perm) {
  Dims sizes;
  for (int i = 0; i < x.dim(); ++i) sizes.push(x.sizes()[perm[i]]);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (x.numel() > 0) permute_copy(x, y, perm);
  return Status::ok();
}

}  // namespace

Status permute_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::permute.default";
  const Tensor* x;
  Span<const int64_t> dims;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "dims", &dims));
  KILN_CHECK_OR_RETURN(dims.size() == static_cast<size_t>(x->dim()), KernelFailure,
                       "%s: dims %s must list every dim of %s once", op, describe_ints(dims).c_str(),
                       describe(*x).c_str());
  int64_t perm[kMaxDims];
  bool seen[kMaxDims] = {};
  for (int i = 0; i < x->dim(); ++i) {
    KILN_RETURN_IF_ERROR(wrap_dim(op, dims[i], x->dim(), &perm[i]));
    KILN_CHECK_OR_RETURN(!seen[perm[i]], KernelFailure, "%s: dims %s repeat a dim", op, describe_ints(dims).c_str());
    seen[perm[i]] = true;
  }
  return permuted_output(op, *x, *out[0], perm);
}

Status transpose_int_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::transpose.int";
  const Tensor* x;
  int64_t d0, d1, a, b;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim0", &d0));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "dim1", &d1));
  KILN_RETURN_IF_ERROR(wrap_dim(op, d0, x->dim(), &a));
  KILN_RETURN_IF_ERROR(wrap_dim(op, d1, x->dim(), &b));
  int64_t perm[kMaxDims];
  for (int i = 0; i < x->dim(); ++i) perm[i] = i;
  if (x->dim() > 0) std::swap(perm[a], perm[b]);
  return permuted_output(op, *x, *out[0], perm);
}

KILN_REGISTER_KERNEL("aten::permute.default", "*", permute_run);
KILN_REGISTER_KERNEL("aten::transpose.int", "*", transpose_int_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
