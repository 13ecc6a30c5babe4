// Reductions along dims that keep ATen's arg/extremum semantics: argmax/argmin, max.dim/min.dim
// (values + i64 indices), amax/amin, linalg_vector_norm. NaN wins every max/min (the first one
// for the index); ties give the first index.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

bool is_float(ScalarType t) { return t == ScalarType::Float32 || t == ScalarType::Float64; }

// x split into kept and reduced dims: output o reads x[base(o) + red_offset(q)] for q in [0, count).
struct DimReduce {
  Dims out_sizes;                                  // with or without the kept 1s
  Dims kept, red;                                  // sizes
  int64_t kst[kMaxDims] = {}, rst[kMaxDims] = {};  // their strides in x
  int64_t outputs = 1, count = 1;

  int64_t base(int64_t o) const {
    int64_t off = 0;
    for (int d = kept.n - 1; d >= 0; --d) off += (o % kept[d]) * kst[d], o /= kept[d];
    return off;
  }
  int64_t red_offset(int64_t q) const {
    int64_t off = 0;
    for (int d = red.n - 1; d >= 0; --d) off += (q % red[d]) * rst[d], q /= red[d];
    return off;
  }
};

// dims empty (or absent) reduces every dim.
Status make_reduce(const char* op, const Tensor& x, Span<const int64_t> dims, bool keepdim, DimReduce* r) {
  bool reduce[kMaxDims] = {};
  const bool all = dims.empty();
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(op, d, x.dim(), &w));
    if (x.dim() == 0) continue;
    KILN_CHECK_OR_RETURN(!reduce[w], KernelFailure, "%s: dim %lld appears more than once", op,
                         static_cast<long long>(d));
    reduce[w] = true;
  }
  int64_t strides[kMaxDims];
  contiguous_strides(x.sizes(), strides);
  for (int d = 0; d < x.dim(); ++d) {
    const bool red = all || reduce[d];
    if (red) {
      r->rst[r->red.n] = strides[d];
      r->red.push(x.sizes()[d]);
      r->count *= x.sizes()[d];
      if (keepdim) r->out_sizes.push(1);
    } else {
      r->kst[r->kept.n] = strides[d];
      r->kept.push(x.sizes()[d]);
      r->outputs *= x.sizes()[d];
      r->out_sizes.push(x.sizes()[d]);
    }
  }
  return Status::ok();
}

// Index (into the reduced positions) of the max (or min) of output o; NaN wins, ties keep the first.
template <typename T>
int64_t arg_extremum(const T* xp, const DimReduce& r, int64_t o, bool is_max) {
  const T* base = xp + r.base(o);
  int64_t best_i = 0;
  T best = load(base + r.red_offset(0));
  for (int64_t q = 1; q < r.count; ++q) {
    if constexpr (std::is_floating_point_v<T>)
      if (best != best) break;
    const T v = load(base + r.red_offset(q));
    bool better = is_max ? v > best : v < best;
    if constexpr (std::is_floating_point_v<T>) better = better || v != v;
    if (better) best = v, best_i = q;
  }
  return best_i;
}

Status optional_dim_list(const char* op, Inputs in, size_t i, Span<const int64_t>* dims, int64_t* storage) {
  const Value* v = in[i];
  if (v != nullptr && v->kind == ValueKind::Int) {
    *storage = v->i;
    *dims = Span<const int64_t>(storage, 1);
    return Status::ok();
  }
  bool present;
  return optional_int_list_arg(op, in, i, "dim", dims, &present);
}

// argmax / argmin (self, dim?, keepdim) -> i64.
Status arg_reduce(const char* op, bool is_max, Inputs in, Outputs out) {
  const Tensor* x;
  int64_t dim = 0;
  bool has_dim, keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, 1, "dim", &dim, &has_dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Int64));
  KILN_CHECK_OR_RETURN(x->numel() > 0, KernelFailure, "%s: cannot reduce the empty tensor %s", op,
                       describe(*x).c_str());
  DimReduce r;
  KILN_RETURN_IF_ERROR(
      make_reduce(op, *x, has_dim ? Span<const int64_t>(&dim, 1) : Span<const int64_t>(), keepdim, &r));
  if (!has_dim && !keepdim) r.out_sizes.n = 0;
  KILN_RETURN_IF_ERROR(resize_output(op, &y, r.out_sizes.span()));
  int64_t* yp = y.data_as<int64_t>();
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    parallel_for(r.outputs, grain_for(r.count), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) yp[o] = arg_extremum(xp, r, o, is_max);
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

// max.dim / min.dim (self, dim, keepdim) -> (values, indices).
Status extremum_dim(const char* op, bool is_max, Inputs in, Outputs out) {
  const Tensor* x;
  int64_t dim;
  bool keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 2));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  Tensor &v = *out[0], &ix = *out[1];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", v, "values"));
  KILN_RETURN_IF_ERROR(check_dtype(op, ix, "indices", ScalarType::Int64));
  DimReduce r;
  KILN_RETURN_IF_ERROR(make_reduce(op, *x, Span<const int64_t>(&dim, 1), keepdim, &r));
  KILN_CHECK_OR_RETURN(r.count > 0, KernelFailure, "%s: cannot reduce an empty dim of %s", op, describe(*x).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, &v, r.out_sizes.span()));
  KILN_RETURN_IF_ERROR(resize_output(op, &ix, r.out_sizes.span()));
  int64_t* ip = ix.data_as<int64_t>();
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    T* vp = v.data_as<T>();
    parallel_for(r.outputs, grain_for(r.count), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const int64_t q = arg_extremum(xp, r, o, is_max);
        ip[o] = q;
        vp[o] = load(xp + r.base(o) + r.red_offset(q));
      }
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

// amax / amin (self, dim[], keepdim).
Status amax_amin(const char* op, bool is_max, Inputs in, Outputs out) {
  const Tensor* x;
  Span<const int64_t> dims;
  int64_t one;
  bool keepdim;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_dim_list(op, in, 1, &dims, &one));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  DimReduce r;
  KILN_RETURN_IF_ERROR(make_reduce(op, *x, dims, keepdim, &r));
  KILN_CHECK_OR_RETURN(r.count > 0 || r.outputs == 0, KernelFailure, "%s: cannot reduce an empty dim of %s", op,
                       describe(*x).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, r.out_sizes.span()));
  if (r.outputs == 0) return Status::ok();
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    T* yp = y.data_as<T>();
    parallel_for(r.outputs, grain_for(r.count), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) yp[o] = load(xp + r.base(o) + r.red_offset(arg_extremum(xp, r, o, is_max)));
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

}  // namespace

Status argmax_run(KernelContext&, Inputs in, Outputs out) { return arg_reduce("aten::argmax.default", true, in, out); }
Status argmin_run(KernelContext&, Inputs in, Outputs out) { return arg_reduce("aten::argmin.default", false, in, out); }
Status max_dim_run(KernelContext&, Inputs in, Outputs out) { return extremum_dim("aten::max.dim", true, in, out); }
Status min_dim_run(KernelContext&, Inputs in, Outputs out) { return extremum_dim("aten::min.dim", false, in, out); }
Status amax_run(KernelContext&, Inputs in, Outputs out) { return amax_amin("aten::amax.default", true, in, out); }
Status amin_run(KernelContext&, Inputs in, Outputs out) { return amax_amin("aten::amin.default", false, in, out); }

// linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None): f32/f64, accumulated in double.
Status linalg_vector_norm_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::linalg_vector_norm.default";
  const Tensor* x;
  double ord;
  Span<const int64_t> dims;
  int64_t one;
  bool keepdim, has_dtype;
  ScalarType dtype;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "ord", &ord));
  KILN_RETURN_IF_ERROR(optional_dim_list(op, in, 2, &dims, &one));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "keepdim", &keepdim));
  KILN_RETURN_IF_ERROR(optional_dtype_arg(op, in, 4, "dtype", &dtype, &has_dtype));
  Tensor& y = *out[0];
  KILN_CHECK_OR_RETURN(is_float(x->dtype()), KernelFailure, "%s: self must be f32 or f64, got %s", op,
                       describe(*x).c_str());
  KILN_CHECK_OR_RETURN(is_float(y.dtype()) && (!has_dtype || dtype == y.dtype()), KernelFailure,
                       "%s: output %s must be f32 or f64 (and the dtype argument)", op, describe(y).c_str());
  KILN_CHECK_OR_RETURN(ord == ord, KernelFailure, "%s: ord must not be NaN", op);
  DimReduce r;
  KILN_RETURN_IF_ERROR(make_reduce(op, *x, dims, keepdim, &r));
  KILN_CHECK_OR_RETURN(r.count > 0 || ord >= 0, KernelFailure,
                       "%s: a negative or infinite ord needs a non-empty input, got %s", op, describe(*x).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, r.out_sizes.span()));
  const bool inf = std::isinf(ord);
  dispatch_real(x->dtype(), [&](auto ti) {
    using T = decltype(ti);
    if constexpr (std::is_floating_point_v<T>) {
      dispatch_real(y.dtype(), [&](auto to) {
        using U = decltype(to);
        if constexpr (std::is_floating_point_v<U>) {
          const T* xp = x->data_as<const T>();
          U* yp = y.data_as<U>();
          parallel_for(r.outputs, grain_for(r.count), [&](int64_t o0, int64_t o1) {
            for (int64_t o = o0; o < o1; ++o) {
              const T* base = xp + r.base(o);
              double acc = inf ? (ord > 0 ? 0.0 : std::numeric_limits<double>::infinity()) : 0.0;
              for (int64_t q = 0; q < r.count; ++q) {
                const double a = std::fabs(static_cast<double>(base[r.red_offset(q)]));
                if (a != a)
                  acc = a;
                else if (acc != acc)
                  continue;
                else if (inf)
                  acc = ord > 0 ? std::max(acc, a) : std::min(acc, a);
                else if (ord == 2)
                  acc += a * a;
                else if (ord == 1)
                  acc += a;
                else if (ord == 0)
                  acc += a != 0 ? 1.0 : 0.0;
                else
                  acc += std::pow(a, ord);
              }
              double v = acc;
              if (!inf && ord == 2)
                v = std::sqrt(acc);
              else if (!inf && ord != 1 && ord != 0)
                v = std::pow(acc, 1.0 / ord);
              yp[o] = static_cast<U>(v);
            }
          });
        }
      });
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::argmax.default", "*", argmax_run);
KILN_REGISTER_KERNEL("aten::argmin.default", "*", argmin_run);
KILN_REGISTER_KERNEL("aten::max.dim", "*", max_dim_run);
KILN_REGISTER_KERNEL("aten::min.dim", "*", min_dim_run);
KILN_REGISTER_KERNEL("aten::amax.default", "*", amax_run);
KILN_REGISTER_KERNEL("aten::amin.default", "*", amin_run);
KILN_REGISTER_KERNEL("aten::linalg_vector_norm.default", "f32|f64", linalg_vector_norm_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
