// aten::expand.default: broadcast to a larger shape, materialised as a copy.
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {

Status expand_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::expand.default";
  const Tensor* x;
  Span<const int64_t> size;
  bool implicit;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "size", &size));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "implicit", &implicit));
  KILN_CHECK_OR_RETURN(size.size() <= static_cast<size_t>(kMaxDims) && size.size() >= static_cast<size_t>(x->dim()),
                       KernelFailure, "%s: cannot expand %s to %s", op, describe(*x).c_str(),
                       describe_ints(size).c_str());
  const int nd = static_cast<int>(size.size()), lead = nd - x->dim();
  int64_t in_strides[kMaxDims], strides[kMaxDims];
  contiguous_strides(x->sizes(), in_strides);
  Dims sizes;
  for (int d = 0; d < nd; ++d) {
    int64_t s = size[d];
    if (d < lead) {
      KILN_CHECK_OR_RETURN(s >= 0, KernelFailure, "%s: new leading dim %d of %s must be non-negative", op, d,
                           describe_ints(size).c_str());
      strides[d] = 0;
    } else {
      const int64_t have = x->sizes()[d - lead];
      if (s == -1) s = have;
      KILN_CHECK_OR_RETURN(s == have || (have == 1 && s >= 0), KernelFailure, "%s: cannot expand %s to %s", op,
                           describe(*x).c_str(), describe_ints(size).c_str());
      strides[d] = have == s ? in_strides[d - lead] : 0;
    }
    sizes.push(s);
  }
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], sizes.span()));
  if (out[0]->numel() == 0) return Status::ok();
  strided_copy(out[0]->data(), x->data(), element_size(x->dtype()), sizes, strides);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::expand.default", "*", expand_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
