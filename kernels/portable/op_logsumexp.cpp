// logsumexp.default: log(sum(exp(x))) over dims, shifted by the maximum as ATen does.
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

template <typename T>
void logsumexp_typed(const Tensor& x, Tensor& y, const Dims& kept, const int64_t* kept_strides, const Reduced& r) {
  const T* xp = x.data_as<const T>();
  T* yp = y.data_as<T>();
  parallel_for(kept.numel(), grain_for(r.count), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      int64_t base = 0, rem = o;
      for (int d = kept.n - 1; d >= 0; --d) {
        base += (rem % kept[d]) * kept_strides[d];
        rem /= kept[d];
      }
      if (r.count == 0) {  // the sum of no exponentials is 0
        yp[o] = -std::numeric_limits<T>::infinity();
        continue;
      }
      // Pass 1: the maximum (NaN wins); pass 2: the shifted sum, in double.
      auto walk = [&](auto&& f) {
        int64_t idx[kMaxDims] = {}, off = base;
        for (int64_t q = 0; q < r.count; ++q) {
          f(static_cast<double>(xp[off]));
          for (int d = r.n - 1; d >= 0; --d) {
            off += r.strides[d];
            if (++idx[d] < r.sizes[d]) break;
            off -= r.sizes[d] * r.strides[d];
            idx[d] = 0;
          }
        }
      };
      double m = -std::numeric_limits<double>::infinity();
      walk([&](double v) {
        if (v != v) m = v;
        else if (m == m && v > m) m = v;
      });
      if (std::isinf(m)) m = 0;  // all -inf: log(0) = -inf; an inf: inf
      double sum = 0;
      walk([&](double v) { sum += std::exp(v - m); });
      yp[o] = static_cast<T>(std::log(sum) + m);
    }
  });
}

}  // namespace

// logsumexp(self, dim: int[], keepdim: bool); self is f32/f64 (the exporter casts integers).
Status logsumexp_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::logsumexp.default";
  const Tensor* x;
  Span<const int64_t> dims;
  bool keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *out[0], "output"));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "dim", &dims));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  const ScalarType t = x->dtype();
  KILN_CHECK_OR_RETURN(t == ScalarType::Float32 || t == ScalarType::Float64, KernelFailure,
                       "%s: self must be f32 or f64, got %s", op, describe(*x).c_str());
  // ATen's eager kernel fails on an empty dim list for most ranks; refuse it rather than guess.
  KILN_CHECK_OR_RETURN(!dims.empty(), KernelFailure, "%s: dim must name at least one dim", op);
  bool reduce[kMaxDims] = {};
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(op, d, x->dim(), &w));
    if (x->dim() == 0) continue;
    KILN_CHECK_OR_RETURN(!reduce[w], KernelFailure, "%s: dim %lld appears more than once", op,
                         static_cast<long long>(d));
    reduce[w] = true;
  }
  Dims out_sizes, kept;
  int64_t kept_strides[kMaxDims] = {};
  Reduced r;
  int64_t stride = 1;
  int64_t strides[kMaxDims] = {};
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
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(resize_output(op, &y, out_sizes.span()));
  if (y.numel() == 0) return Status::ok();
  if (t == ScalarType::Float32) logsumexp_typed<float>(*x, y, kept, kept_strides, r);
  else logsumexp_typed<double>(*x, y, kept, kept_strides, r);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::logsumexp.default", "f32|f64", logsumexp_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
