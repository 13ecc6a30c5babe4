// aten::diagonal.default (a diagonal of two dims, as a copy) and aten::repeat.default (tiling).
#include <algorithm>

#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {

// diagonal(self, offset, dim1, dim2): the other dims in order, then the diagonal.
Status diagonal_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::diagonal.default";
  const Tensor* x;
  int64_t offset, d1, d2;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 4, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "offset", &offset));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "dim1", &d1));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 3, "dim2", &d2));
  KILN_CHECK_OR_RETURN(x->dim() >= 2, KernelFailure, "%s: self must have at least 2 dims, got %s", op,
                       describe(*x).c_str());
  KILN_RETURN_IF_ERROR(wrap_dim(op, d1, x->dim(), &d1));
  KILN_RETURN_IF_ERROR(wrap_dim(op, d2, x->dim(), &d2));
  KILN_CHECK_OR_RETURN(d1 != d2, KernelFailure, "%s: dim1 and dim2 must differ, both are %lld", op,
                       static_cast<long long>(d1));
  const int64_t n1 = x->sizes()[d1], n2 = x->sizes()[d2];
  // The length clamps the offset to the sizes first, so no arithmetic below can overflow.
  const int64_t length = offset >= 0 ? std::max<int64_t>(0, std::min(n1, n2 - std::min(offset, n2)))
                                     : std::max<int64_t>(0, std::min(n1 - std::min(-offset, n1), n2));
  int64_t in_strides[kMaxDims], strides[kMaxDims];
  contiguous_strides(x->sizes(), in_strides);
  Dims sizes;
  int k = 0;
  for (int d = 0; d < x->dim(); ++d) {
    if (d == d1 || d == d2) continue;
    sizes.push(x->sizes()[d]);
    strides[k++] = in_strides[d];
  }
  sizes.push(length);
  strides[k] = in_strides[d1] + in_strides[d2];
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], sizes.span()));
  if (out[0]->numel() == 0) return Status::ok();
  const int64_t start =
      offset >= 0 ? offset * in_strides[d2] : -offset * in_strides[d1];  // length > 0: |offset| < size
  const size_t elem = element_size(x->dtype());
  strided_copy(out[0]->data(), static_cast<const char*>(x->data()) + start * static_cast<int64_t>(elem), elem, sizes,
               strides);
  return Status::ok();
}

// repeat(self, repeats): output dim d is input dim d (aligned right, missing leading dims of size 1)
// times repeats[d]; element i of dim d reads element i % size of the input.
Status repeat_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::repeat.default";
  const Tensor* x;
  Span<const int64_t> repeats;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "repeats", &repeats));
  const int nd = static_cast<int>(repeats.size()), lead = nd - x->dim();
  KILN_CHECK_OR_RETURN(nd <= kMaxDims && lead >= 0, KernelFailure,
                       "%s: %zu repeats for %s (at least one per dim, at most %d)", op, repeats.size(),
                       describe(*x).c_str(), kMaxDims);
  Dims in_sizes, sizes;
  for (int d = 0; d < nd; ++d) {
    const int64_t have = d < lead ? 1 : x->sizes()[d - lead];
    KILN_CHECK_OR_RETURN(repeats[d] >= 0, KernelFailure, "%s: repeats must be non-negative, got %s", op,
                         describe_ints(repeats).c_str());
    int64_t s;
    KILN_RETURN_IF_ERROR(checked_mul(op, "output size", have, repeats[d], &s));
    in_sizes.push(have);
    sizes.push(s);
  }
  KILN_RETURN_IF_ERROR(check_shape(op, "output", sizes.span()));
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], sizes.span()));
  const int64_t n = out[0]->numel();
  if (n == 0) return Status::ok();
  int64_t in_strides[kMaxDims];
  contiguous_strides(in_sizes.span(), in_strides);
  const size_t elem = element_size(x->dtype());
  const char* src = static_cast<const char*>(x->data());
  char* dst = static_cast<char*>(out[0]->data());
  // Odometer over the output; the last dim is copied a run of its input row at a time.
  int64_t idx[kMaxDims] = {};
  const int last = nd - 1;
  const int64_t row = nd > 0 ? in_sizes[last] : 1;
  for (int64_t o = 0; o < n; o += row) {
    int64_t off = 0;
    for (int d = 0; d < last; ++d) off += (idx[d] % in_sizes[d]) * in_strides[d];
    copy_elements(dst + o * static_cast<int64_t>(elem), src + off * static_cast<int64_t>(elem), row, elem);
    if (nd == 0) break;
    idx[last] += row;
    for (int d = last; d > 0 && idx[d] >= sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::diagonal.default", "*", diagonal_run);
KILN_REGISTER_KERNEL("aten::repeat.default", "*", repeat_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
