// Scatter along one dim: scatter (src and value), scatter_add and scatter_reduce.two (sum, prod, mean,
// amax, amin; include_self or not). out = self, then for every position p of index:
// out[p with p[dim] = index[p]] (op)= src[p]. Like ATen, indices are in [0, self.size(dim)) (no wrapping
// of negative ones); every index is checked before anything is written, and an index read again while
// writing is re-checked (memory read twice is never trusted). Duplicate indices apply in index order
// along dim (the last one wins for scatter), as on ATen's CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

enum class Reduce : uint8_t { None, Sum, Prod, Mean, Amax, Amin };

int64_t read_index(const Tensor& t, int64_t i) {
  return t.dtype() == ScalarType::Int64 ? t.data_as<const int64_t>()[i]
                                        : static_cast<int64_t>(t.data_as<const int32_t>()[i]);
}

// The geometry of one scatter: self, index and src seen with the same rank (0-D as [1]).
struct ScatterGeometry {
  int nd = 1;
  int d = 0;
  int64_t xs[kMaxDims], is[kMaxDims], xst[kMaxDims], ist[kMaxDims], sst[kMaxDims];
  int64_t lines = 0;  // positions of index outside dim
};

Status scatter_geometry(const char* op, const Tensor& x, int64_t dim, const Tensor& idx, const Tensor* src,
                        ScatterGeometry* g) {
  KILN_CHECK_OR_RETURN(idx.dtype() == ScalarType::Int64 || idx.dtype() == ScalarType::Int32, KernelFailure,
                       "%s: index must be i64 or i32, got %s", op, describe(idx).c_str());
  int64_t d;
  KILN_RETURN_IF_ERROR(wrap_dim(op, dim, x.dim(), &d));
  g->d = static_cast<int>(d);
  g->nd = std::max(x.dim(), 1);
  if (idx.numel() == 0) {
    g->lines = 0;
    return Status::ok();  // ATen checks nothing more for an empty index
  }
  KILN_CHECK_OR_RETURN(std::max(idx.dim(), 1) == g->nd, KernelFailure, "%s: index %s must have as many dims as self %s",
                       op, describe(idx).c_str(), describe(x).c_str());
  if (src != nullptr)
    KILN_CHECK_OR_RETURN(std::max(src->dim(), 1) == g->nd, KernelFailure,
                         "%s: src %s must have as many dims as self %s", op, describe(*src).c_str(),
                         describe(x).c_str());
  int64_t ss[kMaxDims];
  for (int i = 0; i < g->nd; ++i) {
    g->xs[i] = x.dim() == 0 ? 1 : x.sizes()[i];
    g->is[i] = idx.dim() == 0 ? 1 : idx.sizes()[i];
    ss[i] = src == nullptr ? g->is[i] : (src->dim() == 0 ? 1 : src->sizes()[i]);
    KILN_CHECK_OR_RETURN(i == g->d || g->is[i] <= g->xs[i], KernelFailure,
                         "%s: index %s is larger than self %s outside dim %lld", op, describe(idx).c_str(),
                         describe(x).c_str(), static_cast<long long>(d));
    KILN_CHECK_OR_RETURN(g->is[i] <= ss[i], KernelFailure, "%s: index %s is larger than src %s", op,
                         describe(idx).c_str(), src ? describe(*src).c_str() : "");
  }
  int64_t a = 1, b = 1, c = 1;
  for (int i = g->nd - 1; i >= 0; --i) {
    g->xst[i] = a, a *= g->xs[i];
    g->ist[i] = b, b *= g->is[i];
    g->sst[i] = c, c *= ss[i];
  }
  g->lines = idx.numel() / g->is[g->d];
  const int64_t size = g->xs[g->d];
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int64_t v = read_index(idx, i);
    KILN_CHECK_OR_RETURN(v >= 0 && v < size, KernelFailure,
                         "%s: index %lld is out of bounds for dimension %lld with size %lld", op,
                         static_cast<long long>(v), static_cast<long long>(d), static_cast<long long>(size));
  }
  return Status::ok();
}

// Offsets in index, self and src of line `o` (the positions of index outside dim, row-major).
void line_bases(const ScatterGeometry& g, int64_t o, int64_t* ib, int64_t* xb, int64_t* sb) {
  *ib = *xb = *sb = 0;
  for (int i = g.nd - 1; i >= 0; --i) {
    if (i == g.d) continue;
    const int64_t pos = o % g.is[i];
    o /= g.is[i];
    *ib += pos * g.ist[i], *xb += pos * g.xst[i], *sb += pos * g.sst[i];
  }
}

template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<T>(a * b);
  }
}

template <typename T>
T combine(Reduce r, T a, T b) {
  switch (r) {
    case Reduce::Sum:
    case Reduce::Mean: return wrapping_add(a, b);
    case Reduce::Prod: return wrapping_mul(a, b);
    case Reduce::Amax:
    case Reduce::Amin:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;  // NaN propagates, as in ATen
      }
      return r == Reduce::Amax ? std::max(a, b) : std::min(a, b);
    default: return b;
  }
}

template <typename T>
T identity(Reduce r) {
  if (r == Reduce::Prod) return T(1);
  if (r != Reduce::Amax && r != Reduce::Amin) return T(0);
  if constexpr (std::is_floating_point_v<T>) {
    return r == Reduce::Amax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  } else {
    return r == Reduce::Amax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
}

// Integer mean rounds down, as ATen's div(count, rounding_mode="floor").
template <typename T>
T divide(T sum, int64_t count) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(sum / static_cast<T>(count));
  } else {
    const int64_t s = static_cast<int64_t>(sum);
    int64_t q = s / count;
    if (s % count != 0 && s < 0) --q;
    return static_cast<T>(q);
  }
}

constexpr int64_t kCountChunk = 1024;

// y (a copy of self) updated in place; src is null for the value overload (then `value`).
template <typename T>
void scatter_lines(const ScatterGeometry& g, const Tensor& idx, const T* src, T value, Reduce r, bool include_self,
                   T* y) {
  const int64_t size = g.xs[g.d], n = g.is[g.d];
  const int64_t xd = g.xst[g.d], id = g.ist[g.d], sd = g.sst[g.d];
  parallel_for(g.lines, grain_for(n), [&](int64_t o0, int64_t o1) {
    int64_t counts[kCountChunk];
    for (int64_t o = o0; o < o1; ++o) {
      int64_t ib, xb, sb;
      line_bases(g, o, &ib, &xb, &sb);
      auto target = [&](int64_t k) {  // -1 when the index (read again) is out of range
        const int64_t v = read_index(idx, ib + k * id);
        return v >= 0 && v < size ? v : -1;
      };
      if (r != Reduce::None && !include_self)
        for (int64_t k = 0; k < n; ++k) {
          const int64_t v = target(k);
          if (v >= 0) y[xb + v * xd] = identity<T>(r);
        }
      for (int64_t k = 0; k < n; ++k) {
        const int64_t v = target(k);
        if (v < 0) continue;
        const T s = src ? load(src + sb + k * sd) : value;
        T& t = y[xb + v * xd];
        t = r == Reduce::None ? s : combine(r, t, s);
      }
      if (r != Reduce::Mean) continue;
      // count[j] = how many values went to y[j] (plus self's), in chunks of targets: no allocation.
      for (int64_t j0 = 0; j0 < size; j0 += kCountChunk) {
        const int64_t j1 = std::min(size, j0 + kCountChunk);
        std::fill(counts, counts + (j1 - j0), include_self ? 1 : 0);
        for (int64_t k = 0; k < n; ++k) {
          const int64_t v = target(k);
          if (v >= j0 && v < j1) ++counts[v - j0];
        }
        for (int64_t j = j0; j < j1; ++j)
          if (counts[j - j0] > 1) y[xb + j * xd] = divide(y[xb + j * xd], counts[j - j0]);
      }
    }
  });
}

Status scatter_common(const char* op, Inputs in, Outputs out, size_t n_in, bool value_overload, Reduce r,
                      bool include_self) {
  const Tensor *x, *idx, *src = nullptr;
  int64_t dim;
  double value = 0.0;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, n_in, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "dim", &dim));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "index", &idx));
  if (value_overload) {
    KILN_RETURN_IF_ERROR(scalar_arg(op, in, 3, "value", &value));
  } else {
    KILN_RETURN_IF_ERROR(tensor_arg(op, in, 3, "src", &src));
    KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *src, "src"));
  }
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", y, "output"));
  KILN_CHECK_OR_RETURN(r == Reduce::None || x->dtype() != ScalarType::Bool, KernelFailure,
                       "%s: unsupported dtype %s (a reduction of bools)", op, describe(*x).c_str());
  ScatterGeometry g;
  KILN_RETURN_IF_ERROR(scatter_geometry(op, *x, dim, *idx, src, &g));
  const Dims sizes(x->sizes());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_as<T>();
    const T* xp = x->data_as<const T>();
    copy_elements(yp, xp, x->numel(), sizeof(T));
    if (g.lines == 0) return;
    scatter_lines<T>(g, *idx, src ? src->data_as<const T>() : nullptr, saturate_cast<T>(value), r, include_self, yp);
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

bool same(const char* s, size_t n, const char* lit) { return std::strlen(lit) == n && std::memcmp(s, lit, n) == 0; }

}  // namespace

Status scatter_src_run(KernelContext&, Inputs in, Outputs out) {
  return scatter_common("aten::scatter.src", in, out, 4, false, Reduce::None, true);
}

Status scatter_value_run(KernelContext&, Inputs in, Outputs out) {
  return scatter_common("aten::scatter.value", in, out, 4, true, Reduce::None, true);
}

Status scatter_add_run(KernelContext&, Inputs in, Outputs out) {
  return scatter_common("aten::scatter_add.default", in, out, 4, false, Reduce::Sum, true);
}

// scatter_reduce.two (self, dim, index, src, reduce, include_self).
Status scatter_reduce_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::scatter_reduce.two";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  const char* s;
  size_t n;
  bool include_self;
  KILN_RETURN_IF_ERROR(string_arg(op, in, 4, "reduce", &s, &n));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "include_self", &include_self));
  Reduce r = Reduce::None;
  if (same(s, n, "sum"))
    r = Reduce::Sum;
  else if (same(s, n, "prod"))
    r = Reduce::Prod;
  else if (same(s, n, "mean"))
    r = Reduce::Mean;
  else if (same(s, n, "amax"))
    r = Reduce::Amax;
  else if (same(s, n, "amin"))
    r = Reduce::Amin;
  KILN_CHECK_OR_RETURN(r != Reduce::None, KernelFailure, "%s: reduce must be sum, prod, mean, amax or amin, got '%.*s'",
                       op, static_cast<int>(std::min<size_t>(n, 32)), s);
  return scatter_common(op, in, out, 6, false, r, include_self);
}

KILN_REGISTER_KERNEL("aten::scatter.src", "*", scatter_src_run);
KILN_REGISTER_KERNEL("aten::scatter.value", "*", scatter_value_run);
KILN_REGISTER_KERNEL("aten::scatter_add.default", "*", scatter_add_run);
KILN_REGISTER_KERNEL("aten::scatter_reduce.two", "*", scatter_reduce_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
