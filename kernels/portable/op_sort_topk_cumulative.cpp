// Along one dim: topk.default (values + i64 indices, always sorted; the outputs double as the
// selection heap, so nothing is allocated), sort.default / sort.stable (topk of every element: a
// heap sort whose ties go to the lower index, i.e. a stable sort), cumsum.default and cumprod.default.
#include <cmath>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// x viewed as [outer, len, inner] around dim d.
struct Axis {
  int64_t outer = 1, len = 1, inner = 1;
};

Axis axis_of(const Tensor& x, int d) {
  Axis a;
  if (x.dim() == 0) return a;
  a.outer = prod(x.sizes(), 0, d);
  a.len = x.sizes()[d];
  a.inner = prod(x.sizes(), d + 1, x.dim());
  return a;
}

// Is (a, ia) ranked before (b, ib)? NaN is the largest value; ties go to the lower index.
template <typename T>
bool ranks_before(T a, int64_t ia, T b, int64_t ib, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = a != a, nb = b != b;
    if (na || nb) {
      if (na && nb) return ia < ib;
      return largest ? na : nb;
    }
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

// The k best of one row, best first, written to values/indices at stride `os` (a heap of the
// current k best with the worst on top, then heap-sorted).
template <typename T>
void topk_row(const T* x, int64_t xs, int64_t len, int64_t k, bool largest, T* vals, int64_t* idx, int64_t os) {
  auto worse = [&](int64_t i, int64_t j) {  // heap position i ranks after j
    return ranks_before(vals[j * os], idx[j * os], vals[i * os], idx[i * os], largest);
  };
  auto swap = [&](int64_t i, int64_t j) {
    std::swap(vals[i * os], vals[j * os]);
    std::swap(idx[i * os], idx[j * os]);
  };
  auto sift_down = [&](int64_t i, int64_t n) {
    for (;;) {
      int64_t w = i;
      const int64_t l = 2 * i + 1, r = l + 1;
      if (l < n && worse(l, w)) w = l;
      if (r < n && worse(r, w)) w = r;
      if (w == i) return;
      swap(i, w);
      i = w;
    }
  };
  if (k == 0) return;
  for (int64_t i = 0; i < len; ++i) {
    const T v = load(x + i * xs);
    if (i < k) {
      vals[i * os] = v, idx[i * os] = i;
      for (int64_t c = i; c > 0;) {  // sift up
        const int64_t p = (c - 1) / 2;
        if (!worse(c, p)) break;
        swap(c, p);
        c = p;
      }
    } else if (ranks_before(v, i, vals[0], idx[0], largest)) {
      vals[0] = v, idx[0] = i;
      sift_down(0, k);
    }
  }
  for (int64_t n = k - 1; n > 0; --n) {  // the worst goes last
    swap(0, n);
    sift_down(0, n);
  }
}

// Integer products wrap around like PyTorch's (no signed-overflow UB).
template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) * static_cast<std::make_unsigned_t<T>>(b));
  } else {
    return a * b;
  }
}

// cumsum / cumprod (self, dim, *, dtype=None): floats accumulate in double, integers in wrapping i64.
Status cumulative(const char* op, bool product, Inputs in, Outputs out) {
  const Tensor* x;
  int64_t dim, d;
  bool has_dtype;
  ScalarType dtype;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(optional_dtype_arg(op, in, 2, "dtype", &dtype, &has_dtype));
  Tensor& y = *out[0];
  KILN_CHECK_OR_RETURN(!has_dtype || dtype == y.dtype(), KernelFailure, "%s: dtype %s does not match the output %s", op,
                       scalar_type_name(dtype), describe(y).c_str());
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  const Axis a = axis_of(*x, static_cast<int>(d));
  bool ok = false;
  dispatch_all(x->dtype(), [&](auto ti) {
    ok = dispatch_real(y.dtype(), [&](auto to) {
      using T = decltype(ti);
      using U = decltype(to);
      using Acc = std::conditional_t<std::is_floating_point_v<U>, double, int64_t>;
      const T* xp = x->data_as<const T>();
      U* yp = y.data_as<U>();
      parallel_for(a.outer * a.inner, grain_for(a.len), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t base = (r / a.inner) * a.len * a.inner + r % a.inner;
          Acc acc = product ? 1 : 0;
          for (int64_t i = 0; i < a.len; ++i) {
            const Acc v = static_cast<Acc>(convert<U>(load(xp + base + i * a.inner)));
            acc = product ? wrapping_mul(acc, v) : wrapping_add(acc, v);
            yp[base + i * a.inner] = convert<U>(acc);
          }
        }
      });
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtypes %s -> %s", op, describe(*x).c_str(),
                       describe(y).c_str());
  return Status::ok();
}

}  // namespace

Status topk_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::topk.default";
  const Tensor* x;
  int64_t k, dim, d;
  bool largest, sorted;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 2));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "k", &k));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "dim", &dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "largest", &largest));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 4, "sorted", &sorted));
  Tensor &v = *out[0], &ix = *out[1];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", v, "values"));
  KILN_RETURN_IF_ERROR(check_dtype(op, ix, "indices", ScalarType::Int64));
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x->dim(), &d));
  const Axis a = axis_of(*x, static_cast<int>(d));
  KILN_CHECK_OR_RETURN(k >= 0 && k <= a.len, KernelFailure, "%s: k %lld out of range for dim %lld of %s", op,
                       static_cast<long long>(k), static_cast<long long>(d), describe(*x).c_str());
  Dims sizes(x->sizes());
  if (x->dim() > 0) sizes[static_cast<int>(d)] = k;
  KILN_RETURN_IF_ERROR(resize_output(op, &v, sizes.span()));
  KILN_RETURN_IF_ERROR(resize_output(op, &ix, sizes.span()));
  const bool ok = dispatch_real(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    T* vp = v.data_as<T>();
    int64_t* ip = ix.data_as<int64_t>();
    parallel_for(a.outer * a.inner, grain_for(sat_mul(a.len, 4)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r / a.inner, i = r % a.inner;
        topk_row(xp + o * a.len * a.inner + i, a.inner, a.len, k, largest, vp + o * k * a.inner + i,
                 ip + o * k * a.inner + i, a.inner);
      }
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

namespace {

// values, indices = x sorted along dim; NaN is the largest value (last ascending, first descending).
Status sort_common(const char* op, const Tensor& x, int64_t dim, bool descending, Tensor& v, Tensor& ix) {
  int64_t d;
  KILN_RETURN_IF_ERROR(check_same_dtype(op, x, "self", v, "values"));
  KILN_RETURN_IF_ERROR(check_dtype(op, ix, "indices", ScalarType::Int64));
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x.dim(), &d));
  const Axis a = axis_of(x, static_cast<int>(d));
  KILN_RETURN_IF_ERROR(resize_output(op, &v, x.sizes()));
  KILN_RETURN_IF_ERROR(resize_output(op, &ix, x.sizes()));
  const bool ok = dispatch_real(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_as<const T>();
    T* vp = v.data_as<T>();
    int64_t* ip = ix.data_as<int64_t>();
    parallel_for(a.outer * a.inner, grain_for(sat_mul(a.len, 16)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t base = (r / a.inner) * a.len * a.inner + r % a.inner;
        topk_row(xp + base, a.inner, a.len, a.len, descending, vp + base, ip + base, a.inner);
      }
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(x).c_str());
  return Status::ok();
}

}  // namespace

// sort(self, dim=-1, descending=False) -> (values, indices).
Status sort_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::sort.default";
  const Tensor* x;
  int64_t dim;
  bool descending;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 3, 2));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "descending", &descending));
  return sort_common(op, *x, dim, descending, *out[0], *out[1]);
}

// sort.stable(self, *, stable: bool?, dim=-1, descending=False): every sort here is stable.
Status sort_stable_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::sort.stable";
  const Tensor* x;
  int64_t dim;
  bool descending, stable, has_stable = in.size() > 1 && in[1] != nullptr && !in[1]->is_none();
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 4, 2));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  if (has_stable) KILN_RETURN_IF_ERROR(bool_arg(op, in, 1, "stable", &stable));  // checked, then moot
  (void)stable;
  KILN_RETURN_IF_ERROR(int_arg(op, in, 2, "dim", &dim));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 3, "descending", &descending));
  return sort_common(op, *x, dim, descending, *out[0], *out[1]);
}

// cumsum(self, dim, *, dtype=None): floats accumulate in double, integers in wrapping i64.
Status cumsum_run(KernelContext&, Inputs in, Outputs out) { return cumulative("aten::cumsum.default", false, in, out); }

// cumprod(self, dim, *, dtype=None): the same, multiplying.
Status cumprod_run(KernelContext&, Inputs in, Outputs out) {
  return cumulative("aten::cumprod.default", true, in, out);
}

KILN_REGISTER_KERNEL("aten::topk.default", "*", topk_run);
KILN_REGISTER_KERNEL("aten::sort.default", "*", sort_run);
KILN_REGISTER_KERNEL("aten::sort.stable", "*", sort_stable_run);
KILN_REGISTER_KERNEL("aten::cumsum.default", "*", cumsum_run);
KILN_REGISTER_KERNEL("aten::cumprod.default", "*", cumprod_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
