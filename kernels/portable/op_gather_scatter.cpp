// Indexing along one dim: index_select, gather (reads) and index_copy, slice_scatter (writes, in place
// when the output is self). Every index is checked before any element moves; like ATen, these ops take
// indices in [0, size) only (no wrapping of negative ones, unlike index.Tensor).
#include <algorithm>
#include <cstring>

#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

Status index_dtype(const char* op, const Tensor& idx) {
  KILN_CHECK_OR_RETURN(idx.dtype() == ScalarType::Int64 || idx.dtype() == ScalarType::Int32, KernelFailure,
                       "%s: index must be i64 or i32, got %s", op, describe(idx).c_str());
  return Status::ok();
}

int64_t read_index(const Tensor& t, int64_t i) {
  return t.dtype() == ScalarType::Int64 ? t.data_as<const int64_t>()[i]
                                        : static_cast<int64_t>(t.data_as<const int32_t>()[i]);
}

// Every index in [0, size), or a KernelFailure naming the first bad one.
Status check_indices(const char* op, const Tensor& idx, int64_t size, int64_t dim) {
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int64_t v = read_index(idx, i);
    KILN_CHECK_OR_RETURN(v >= 0 && v < size, KernelFailure,
                         "%s: index %lld is out of bounds for dim %lld with size %lld", op, static_cast<long long>(v),
                         static_cast<long long>(dim), static_cast<long long>(size));
  }
  return Status::ok();
}

// The index, or -1 when out of range (memory read twice is never trusted).
int64_t wrapped_index(const Tensor& t, int64_t i, int64_t size) {
  const int64_t v = read_index(t, i);
  return v >= 0 && v < size ? v : -1;
}

// A 0-D or 1-D index tensor.
Status vector_index(const char* op, const Tensor& idx) {
  KILN_RETURN_IF_ERROR(index_dtype(op, idx));
  KILN_CHECK_OR_RETURN(idx.dim() <= 1, KernelFailure, "%s: index must be 0-D or 1-D, got %s", op,
                       describe(idx).c_str());
  return Status::ok();
}

// Clamps slice bounds like ATen: a negative bound counts from the end once, then [0, size], end >= start.
void clamp_slice(int64_t size, int64_t* start, int64_t* end) {
  if (*start < 0) *start = *start < -size ? 0 : *start + size;
  if (*end < 0) *end = *end < -size ? 0 : *end + size;
  *start = std::min(*start, size);
  *end = std::min(std::max(*end, *start), size);
}

}  // namespace

Status index_select_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::index_select.default";
  const Tensor *x, *idx;
  int64_t dim, d;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "index", &idx));
  KILN_RETURN_IF_ERROR(vector_index(op, *idx));
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  const int di = static_cast<int>(d);
  const int64_t size = x->dim() == 0 ? 1 : x->sizes()[di];
  KILN_RETURN_IF_ERROR(check_indices(op, *idx, size, d));
  Dims sizes(x->sizes());
  if (x->dim() > 0)
    sizes[di] = idx->numel();
  else
    KILN_CHECK_OR_RETURN(idx->numel() == 1, KernelFailure, "%s: a 0-D self needs exactly one index, got %s", op,
                         describe(*idx).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], sizes.span()));
  if (out[0]->numel() == 0) return Status::ok();
  const int64_t pre = prod(x->sizes(), 0, di), post = x->dim() == 0 ? 1 : prod(x->sizes(), di + 1, x->dim());
  const int64_t n = idx->numel();
  const size_t elem = element_size(x->dtype()), row = static_cast<size_t>(post) * elem;
  const char* src = static_cast<const char*>(x->data());
  char* dst = static_cast<char*>(out[0]->data());
  parallel_for(pre * n, grain_for(post), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pi = t / n, v = wrapped_index(*idx, t % n, size);
      if (v >= 0) std::memcpy(dst + static_cast<size_t>(t) * row, src + static_cast<size_t>(pi * size + v) * row, row);
    }
  });
  return Status::ok();
}

Status gather_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::gather.default";
  const Tensor *x, *idx;
  int64_t dim, d;
  bool sparse_grad;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 4, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "index", &idx));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "sparse_grad", &sparse_grad));
  KILN_RETURN_IF_ERROR(index_dtype(op, *idx));
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  const int nd = std::max(x->dim(), 1);
  KILN_CHECK_OR_RETURN(std::max(idx->dim(), 1) == nd, KernelFailure, "%s: index %s must have as many dims as self %s",
                       op, describe(*idx).c_str(), describe(*x).c_str());
  int64_t xs[kMaxDims], is[kMaxDims];
  for (int i = 0; i < nd; ++i) {
    xs[i] = x->dim() == 0 ? 1 : x->sizes()[i];
    is[i] = idx->dim() == 0 ? 1 : idx->sizes()[i];
    KILN_CHECK_OR_RETURN(i == d || is[i] <= xs[i], KernelFailure,
                         "%s: index %s is larger than self %s outside dim %lld", op, describe(*idx).c_str(),
                         describe(*x).c_str(), static_cast<long long>(d));
  }
  KILN_RETURN_IF_ERROR(check_indices(op, *idx, xs[d], d));
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], idx->sizes()));
  const int64_t n = idx->numel();
  if (n == 0) return Status::ok();
  int64_t xst[kMaxDims];
  {
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; --i) xst[i] = s, s *= xs[i];
  }
  const size_t elem = element_size(x->dtype());
  const char* src = static_cast<const char*>(x->data());
  char* dst = static_cast<char*>(out[0]->data());
  parallel_for(n, kElementwiseGrain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t v = wrapped_index(*idx, t, xs[d]);
      if (v < 0) continue;
      int64_t off = 0, rem = t;
      for (int i = nd - 1; i >= 0; --i) {
        const int64_t pos = rem % is[i];
        rem /= is[i];
        off += (i == d ? v : pos) * xst[i];
      }
      std::memcpy(dst + static_cast<size_t>(t) * elem, src + static_cast<size_t>(off) * elem, elem);
    }
  });
  return Status::ok();
}

Status index_copy_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::index_copy.default";
  bool in_place;
  const Tensor *x, *idx, *source;
  int64_t dim, d;
  KILN_RETURN_IF_ERROR(check_arity_inplace(op, in, out, 4, 1, &in_place));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "index", &idx));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 3, "source", &source));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *source, "source"));
  KILN_CHECK_OR_RETURN(element_size(x->dtype()) > 0, KernelFailure, "%s: unknown dtype %s", op, describe(*x).c_str());
  KILN_RETURN_IF_ERROR(vector_index(op, *idx));
  KILN_CHECK_OR_RETURN(x->dim() > 0, KernelFailure, "%s: self must have at least 1 dim, got %s", op,
                       describe(*x).c_str());
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  const int di = static_cast<int>(d);
  const int64_t size = x->sizes()[di], n = idx->numel();
  // source is self with dim d of size numel(index) (a 0-D index may go with a source missing that dim).
  bool shape_ok = source->dim() == x->dim();
  for (int i = 0; shape_ok && i < x->dim(); ++i) shape_ok = source->sizes()[i] == (i == di ? n : x->sizes()[i]);
  if (!shape_ok && idx->dim() == 0 && source->dim() == x->dim() - 1) {
    shape_ok = true;
    for (int i = 0, j = 0; shape_ok && i < x->dim(); ++i)
      if (i != di) shape_ok = source->sizes()[j++] == x->sizes()[i];
  }
  KILN_CHECK_OR_RETURN(shape_ok, KernelFailure, "%s: source %s does not match self %s with %lld indices along dim %lld",
                       op, describe(*source).c_str(), describe(*x).c_str(), static_cast<long long>(n),
                       static_cast<long long>(d));
  KILN_RETURN_IF_ERROR(check_indices(op, *idx, size, d));
  const Dims self_sizes(x->sizes());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, self_sizes.span()));
  const size_t elem = element_size(x->dtype());
  if (!in_place) copy_elements(y.data(), x->data(), x->numel(), elem);
  const int64_t pre = prod(self_sizes.span(), 0, di), post = prod(self_sizes.span(), di + 1, self_sizes.n);
  const size_t row = static_cast<size_t>(post) * elem;
  const char* src = static_cast<const char*>(source->data());
  char* dst = static_cast<char*>(y.data());
  // Pre positions write disjoint rows; duplicate indices apply in order (the last wins).
  parallel_for(pre, grain_for(sat_mul(n, post)), [&](int64_t p0, int64_t p1) {
    for (int64_t pi = p0; pi < p1; ++pi)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = wrapped_index(*idx, i, size);
        if (v >= 0 && row > 0)
          std::memcpy(dst + static_cast<size_t>(pi * size + v) * row, src + static_cast<size_t>(pi * n + i) * row, row);
      }
  });
  return Status::ok();
}

Status slice_scatter_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::slice_scatter.default";
  bool in_place, has_start, has_end;
  const Tensor *x, *source;
  int64_t dim, d, start = 0, end = INT64_MAX, step;
  KILN_RETURN_IF_ERROR(check_arity_inplace(op, in, out, 6, 1, &in_place));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "src", &source));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "dim", &dim));
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 3, "start", &start, &has_start));
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 4, "end", &end, &has_end));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 5, "step", &step));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *source, "src"));
  KILN_CHECK_OR_RETURN(element_size(x->dtype()) > 0, KernelFailure, "%s: unknown dtype %s", op, describe(*x).c_str());
  KILN_CHECK_OR_RETURN(x->dim() > 0, KernelFailure, "%s: cannot slice a 0-D tensor", op);
  KILN_CHECK_OR_RETURN(step > 0, KernelFailure, "%s: step must be positive, got %lld", op,
                       static_cast<long long>(step));
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  if (!has_start) start = 0;
  if (!has_end) end = INT64_MAX;
  const int di = static_cast<int>(d);
  const int64_t size = x->sizes()[di];
  clamp_slice(size, &start, &end);
  const int64_t len = end > start ? (end - start - 1) / step + 1 : 0;
  if (len <= 1) step = 1;
  Dims slice(x->sizes());
  slice[di] = len;
  KILN_CHECK_OR_RETURN(same_sizes(source->sizes(), slice.span()), KernelFailure,
                       "%s: src %s does not match the slice %s of self %s", op, describe(*source).c_str(),
                       describe_sizes(slice.span()).c_str(), describe(*x).c_str());
  const Dims self_sizes(x->sizes());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, self_sizes.span()));
  const size_t elem = element_size(x->dtype());
  if (!in_place) copy_elements(y.data(), x->data(), x->numel(), elem);
  if (source->numel() == 0) return Status::ok();
  const int64_t pre = prod(self_sizes.span(), 0, di), post = prod(self_sizes.span(), di + 1, self_sizes.n);
  const size_t row = static_cast<size_t>(post) * elem;
  const char* src = static_cast<const char*>(source->data());
  char* dst = static_cast<char*>(y.data());
  parallel_for(pre * len, grain_for(post), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pi = t / len, i = t % len;
      std::memcpy(dst + static_cast<size_t>(pi * size + start + i * step) * row, src + static_cast<size_t>(t) * row,
                  row);
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::index_select.default", "*", index_select_run);
KILN_REGISTER_KERNEL("aten::gather.default", "*", gather_run);
KILN_REGISTER_KERNEL("aten::index_copy.default", "*", index_copy_run);
KILN_REGISTER_KERNEL("aten::slice_scatter.default", "*", slice_scatter_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
