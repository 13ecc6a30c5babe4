// Sum and mean reductions: sum.dim_IntList, mean.dim, sum.default, mean.default.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// The input split into kept and reduced dims (size-1 dims dropped, runs of
// same-kind dims merged), each with its element strides in the input.
struct ReducePlan {
  Dims kept, reduced;
  int64_t kept_strides[kMaxDims] = {}, reduced_strides[kMaxDims] = {};
  bool inner_reduced = true;  // is the innermost (stride-1) run reduced?
  int64_t count = 1;          // elements per output
};

ReducePlan make_plan(const Tensor& x, const bool* reduce) {
  ReducePlan p;
  int last = -1;  // kind of the previous run: 0 kept, 1 reduced
  int64_t stride = 1;
  // Walk from the innermost dim so strides accumulate; then reverse.
  Dims ks, rs;
  int64_t kst[kMaxDims], rst[kMaxDims];
  for (int d = x.dim() - 1; d >= 0; --d) {
    const int64_t size = x.sizes()[d];
    if (reduce[d]) p.count *= size;
    if (size != 1) {
      const int kind = reduce[d] ? 1 : 0;
      Dims& dims = kind ? rs : ks;
      int64_t* st = kind ? rst : kst;
      if (last == kind) {
        dims[dims.n - 1] *= size;
      } else {
        if (last == -1) p.inner_reduced = kind == 1;
        st[dims.n] = stride;
        dims.push(size);
      }
      last = kind;
    }
    stride *= size;
  }
  if (last == -1) {  // every dim has size 1: one output, one element
    p.inner_reduced = false;
    ks.push(1);
    kst[0] = 0;
  }
  for (int i = 0; i < ks.n; ++i) p.kept.push(ks[ks.n - 1 - i]), p.kept_strides[i] = kst[ks.n - 1 - i];
  for (int i = 0; i < rs.n; ++i) p.reduced.push(rs[rs.n - 1 - i]), p.reduced_strides[i] = rst[rs.n - 1 - i];
  return p;
}

// Offset of flat index `i` over `dims` (row-major) with `strides`.
int64_t offset_of(int64_t i, const Dims& dims, const int64_t* strides, int first, int last) {
  int64_t off = 0;
  for (int d = last - 1; d >= first; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

template <typename T, typename U>
void reduce_typed(const ReducePlan& p, const Tensor& x, Tensor& y, bool mean) {
  // Integer sums wrap around like PyTorch's (wrapping_add: no signed-overflow UB).
  using Acc = std::conditional_t<std::is_floating_point_v<U>, double, int64_t>;
  const T* xp = x.data_as<const T>();
  U* yp = y.data_as<U>();
  const int64_t outputs = p.kept.numel();
  if (outputs == 0) return;
  const double scale = 1.0 / static_cast<double>(p.count);  // inf for an empty mean -> NaN below, as 0/0
  auto finish = [&](Acc acc) -> U {
    if (mean) return convert<U>(p.count == 0 ? std::numeric_limits<double>::quiet_NaN() : acc * scale);
    return convert<U>(acc);
  };
  const Dims& r = p.reduced;
  if (p.inner_reduced) {
    // Each output sums contiguous runs of the innermost reduced dim.
    const int64_t inner = r[r.n - 1], outer_count = p.count / std::max<int64_t>(inner, 1);
    parallel_for(outputs, grain_for(p.count), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const T* base = xp + offset_of(o, p.kept, p.kept_strides, 0, p.kept.n);
        Acc acc = 0;
        for (int64_t q = 0; q < outer_count; ++q) {
          const T* run = base + offset_of(q, r, p.reduced_strides, 0, r.n - 1);
          Acc part[4] = {0, 0, 0, 0};  // independent partial sums vectorise
          int64_t i = 0;
          for (; i + 4 <= inner; i += 4)
            for (int j = 0; j < 4; ++j)
              part[j] = wrapping_add(part[j], static_cast<Acc>(convert<U>(load(run + i + j))));
          for (; i < inner; ++i) part[0] = wrapping_add(part[0], static_cast<Acc>(convert<U>(load(run + i))));
          acc = wrapping_add(acc, wrapping_add(wrapping_add(part[0], part[1]), wrapping_add(part[2], part[3])));
        }
        yp[o] = finish(acc);
      }
    });
    return;
  }
  // The innermost dim is kept: add whole rows of it into a stack accumulator
  // chunk, walking the reduced positions in the middle.
  constexpr int64_t kChunk = 256;
  const Dims& k = p.kept;
  const int64_t inner = k[k.n - 1], outer = outputs / inner;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  parallel_for(outer * chunks, grain_for(sat_mul(p.count, kChunk)), [&](int64_t t0, int64_t t1) {
    Acc acc[kChunk];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / chunks, c0 = (t % chunks) * kChunk, len = std::min(kChunk, inner - c0);
      const T* base = xp + offset_of(o, k, p.kept_strides, 0, k.n - 1) + c0;
      for (int64_t j = 0; j < len; ++j) acc[j] = 0;
      for (int64_t q = 0; q < p.count; ++q) {
        const T* row = base + offset_of(q, r, p.reduced_strides, 0, r.n);
        for (int64_t j = 0; j < len; ++j) acc[j] = wrapping_add(acc[j], static_cast<Acc>(convert<U>(load(row + j))));
      }
      U* yo = yp + o * inner + c0;
      for (int64_t j = 0; j < len; ++j) yo[j] = finish(acc[j]);
    }
  });
}

// Shared body: dims (null = all), keepdim, optional dtype.
Status reduce_common(const char* op, bool mean, Inputs in, Outputs out, bool has_dims) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, has_dims ? 4 : 2, 1));
  const Tensor* x;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  Span<const int64_t> dims;
  bool dims_given = false, keepdim = false, dtype_given;
  ScalarType dtype = ScalarType::Float32;
  if (has_dims) {
    KILN_RETURN_IF_ERROR(optional_int_list_arg(op, in, 1, "dim", &dims, &dims_given));
    KILN_RETURN_IF_ERROR(bool_arg(op, in, 2, "keepdim", &keepdim));
  }
  KILN_RETURN_IF_ERROR(optional_dtype_arg(op, in, has_dims ? 3 : 1, "dtype", &dtype, &dtype_given));
  Tensor& y = *out[0];

  const ScalarType it = x->dtype();
  const bool in_float = it == ScalarType::Float32 || it == ScalarType::Float64;
  if (!dtype_given) dtype = in_float ? it : ScalarType::Int64;  // integer sums widen to i64
  KILN_CHECK_OR_RETURN(!mean || dtype == ScalarType::Float32 || dtype == ScalarType::Float64, KernelFailure,
                       "%s: mean needs a floating result dtype, got input %s", op, describe(*x).c_str());
  KILN_CHECK_OR_RETURN(y.dtype() == dtype, KernelFailure, "%s: output must be %s, got %s", op, scalar_type_name(dtype),
                       describe(y).c_str());

  bool reduce[kMaxDims] = {};
  const bool all = !dims_given || dims.empty();
  for (int d = 0; d < x->dim(); ++d) reduce[d] = all;
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(op, d, x->dim(), &w));
    if (x->dim() == 0) continue;
    KILN_CHECK_OR_RETURN(!reduce[w], KernelFailure, "%s: dim %lld appears more than once", op,
                         static_cast<long long>(d));
    reduce[w] = true;
  }
  Dims sizes;
  for (int d = 0; d < x->dim(); ++d) {
    if (!reduce[d])
      sizes.push(x->sizes()[d]);
    else if (keepdim)
      sizes.push(1);
  }
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));

  const ReducePlan plan = make_plan(*x, reduce);
  bool supported = false;
  dispatch_all(it, [&](auto ti) {
    supported = dispatch_real(dtype, [&](auto to) { reduce_typed<decltype(ti), decltype(to)>(plan, *x, y, mean); });
  });
  KILN_CHECK_OR_RETURN(supported, KernelFailure, "%s: unsupported dtypes %s -> %s", op, describe(*x).c_str(),
                       scalar_type_name(dtype));
  return Status::ok();
}

}  // namespace

Status sum_dim_run(KernelContext&, Inputs in, Outputs out) {
  return reduce_common("aten::sum.dim_IntList", false, in, out, true);
}
Status mean_dim_run(KernelContext&, Inputs in, Outputs out) {
  return reduce_common("aten::mean.dim", true, in, out, true);
}
Status sum_run(KernelContext&, Inputs in, Outputs out) {
  return reduce_common("aten::sum.default", false, in, out, false);
}
Status mean_run(KernelContext&, Inputs in, Outputs out) {
  return reduce_common("aten::mean.default", true, in, out, false);
}

KILN_REGISTER_KERNEL("aten::sum.dim_IntList", "*", sum_dim_run);
KILN_REGISTER_KERNEL("aten::mean.dim", "*", mean_dim_run);
KILN_REGISTER_KERNEL("aten::sum.default", "*", sum_run);
KILN_REGISTER_KERNEL("aten::mean.default", "*", mean_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
