// var.correction: the variance over dims with a correction (Bessel's by default), two passes in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/kernel_args.h"
#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// The reduced dims of a contiguous input, walked as an odometer from a kept position's offset.
struct Reduced {
  int n = 0;
  int64_t sizes[kMaxDims] = {}, strides[kMaxDims] = {};
  int64_t count = 1;
};

template <typename T, typename F>
void walk(const T* base, const Reduced& r, F&& f) {
  int64_t idx[kMaxDims] = {}, off = 0;
  for (int64_t q = 0; q < r.count; ++q) {
    f(static_cast<double>(base[off]));
    for (int d = r.n - 1; d >= 0; --d) {
      off += r.strides[d];
      if (++idx[d] < r.sizes[d]) break;
      off -= r.sizes[d] * r.strides[d];
      idx[d] = 0;
    }
  }
}

template <typename T>
void var_typed(const Tensor& x, Tensor& y, const Dims& kept, const int64_t* kept_strides, const Reduced& r,
               double correction) {
  const T* xp = x.data_as<const T>();
  T* yp = y.data_as<T>();
  // sum / max(count - correction, 0), as ATen: a zero divisor gives inf or NaN.
  const double divisor = std::max(static_cast<double>(r.count) - correction, 0.0);
  parallel_for(kept.numel(), grain_for(2 * r.count), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      int64_t base = 0, rem = o;
      for (int d = kept.n - 1; d >= 0; --d) {
        base += (rem % kept[d]) * kept_strides[d];
        rem /= kept[d];
      }
      double sum = 0;
      walk(xp + base, r, [&](double v) { sum += v; });
      const double mean = sum / static_cast<double>(r.count);  // NaN for no elements
      double sq = 0;
      walk(xp + base, r, [&](double v) { sq += (v - mean) * (v - mean); });
      yp[o] = static_cast<T>(r.count == 0 ? std::numeric_limits<double>::quiet_NaN() : sq / divisor);
    }
  });
}

}  // namespace

// var.correction(self, dim: int[]?, *, correction: Scalar?, keepdim: bool); no dims (None or []) reduces all.
Status var_correction_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::var.correction";
  const Tensor* x;
  Span<const int64_t> dims;
  bool has_dims, has_correction, keepdim;
  double correction = 1;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 4, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_int_list_arg(op, in, 1, "dim", &dims, &has_dims));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 2, "correction", &correction, &has_correction));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "keepdim", &keepdim));
  if (!has_correction) correction = 1;
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  const ScalarType t = x->dtype();
  KILN_CHECK_OR_RETURN(t == ScalarType::Float32 || t == ScalarType::Float64, KernelFailure,
                       "%s: self must be f32 or f64, got %s", op, describe(*x).c_str());
  KILN_CHECK_OR_RETURN(correction == correction, KernelFailure, "%s: correction is NaN", op);
  bool reduce[kMaxDims] = {};
  const bool all = dims.empty();
  for (int d = 0; d < x->dim(); ++d) reduce[d] = all;
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(op, d, x->dim(), &w));
    if (x->dim() == 0) continue;
    KILN_CHECK_OR_RETURN(!reduce[w], KernelFailure, "%s: dim %lld appears more than once", op,
                         static_cast<long long>(d));
    reduce[w] = true;
  }
  Dims out_sizes, kept;
  int64_t kept_strides[kMaxDims] = {}, strides[kMaxDims] = {}, stride = 1;
  Reduced r;
  for (int d = x->dim() - 1; d >= 0; --d) strides[d] = stride, stride *= x->sizes()[d];
  for (int d = 0; d < x->dim(); ++d) {
    const int64_t size = x->sizes()[d];
    if (reduce[d]) {
      if (keepdim) out_sizes.push(1);
      r.sizes[r.n] = size, r.strides[r.n] = strides[d], ++r.n;
      r.count *= size;
    } else {
      out_sizes.push(size);
      kept_strides[kept.n] = strides[d];
      kept.push(size);
    }
  }
  KILN_RETURN_IF_ERROR(resize_output(op, &y, out_sizes.span()));
  if (y.numel() == 0) return Status::ok();
  if (t == ScalarType::Float32) var_typed<float>(*x, y, kept, kept_strides, r, correction);
  else var_typed<double>(*x, y, kept, kept_strides, r, correction);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::var.correction", "f32|f64", var_correction_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
