// aten::embedding.default: gathers rows of weight by i64/i32 indices; bad indices fail, never read out of bounds.
#include <cstring>

#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

template <typename I>
Status gather_rows(const char* op, const Tensor& w, const Tensor& idx, Tensor& y) {
  const I* ip = idx.data_as<const I>();
  const int64_t n = idx.numel(), rows = w.size(0), cols = w.size(1);
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK_OR_RETURN(ip[i] >= 0 && ip[i] < rows, KernelFailure, "%s: index %lld out of range for %lld embeddings",
                         op, static_cast<long long>(ip[i]), static_cast<long long>(rows));
  const size_t row_bytes = static_cast<size_t>(cols) * element_size(w.dtype());
  const char* src = static_cast<const char*>(w.data());
  char* dst = static_cast<char*>(y.data());
  parallel_for(n, grain_for(cols), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      // Each index is read once more, checked again: the copy never trusts
      // memory it read earlier (check_no_alias also keeps y off the indices).
      const int64_t r = static_cast<int64_t>(ip[i]);
      if (r >= 0 && r < rows) std::memcpy(dst + i * row_bytes, src + r * row_bytes, row_bytes);
    }
  });
  return Status::ok();
}

}  // namespace

Status embedding_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::embedding.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 1));
  const Tensor *w, *idx;
  int64_t padding_idx;
  bool scale_grad, sparse;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "weight", &w));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "indices", &idx));
  // padding_idx, scale_grad_by_freq and sparse only affect the gradient.
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "padding_idx", &padding_idx));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "scale_grad_by_freq", &scale_grad));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 4, "sparse", &sparse));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *w, "weight", y, "output"));
  KILN_CHECK_OR_RETURN(element_size(w->dtype()) > 0, KernelFailure, "%s: unknown dtype %s", op, describe(*w).c_str());
  KILN_CHECK_OR_RETURN(w->dim() == 2, KernelFailure, "%s: weight must be 2-D, got %s", op, describe(*w).c_str());
  // Unused by the forward pass, but like PyTorch only -1 (none) or a row of
  // weight, possibly counted from the end.
  KILN_CHECK_OR_RETURN(padding_idx == -1 || (padding_idx >= -w->size(0) && padding_idx < w->size(0)), KernelFailure,
                       "%s: padding_idx %lld out of range for %lld embeddings", op, static_cast<long long>(padding_idx),
                       static_cast<long long>(w->size(0)));
  KILN_CHECK_OR_RETURN(idx->dtype() == ScalarType::Int64 || idx->dtype() == ScalarType::Int32, KernelFailure,
                       "%s: indices must be i64 or i32, got %s", op, describe(*idx).c_str());
  KILN_CHECK_OR_RETURN(idx->dim() < kMaxDims, KernelFailure, "%s: indices %s have too many dims", op,
                       describe(*idx).c_str());
  Dims sizes(idx->sizes());
  sizes.push(w->size(1));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  return idx->dtype() == ScalarType::Int64 ? gather_rows<int64_t>(op, *w, *idx, y)
                                           : gather_rows<int32_t>(op, *w, *idx, y);
}

KILN_REGISTER_KERNEL("aten::embedding.default", "*", embedding_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
