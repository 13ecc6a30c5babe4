// A reduction of a contiguous tensor over some of its dims (logsumexp, var): the kept dims give
// the output's positions; from each position's offset the reduced dims are walked as an odometer.
#pragma once

#include "common/kernel_args.h"
#include "common/shape_math.h"

namespace kiln {
namespace kernels {

struct ReductionPlan {
  Dims out_sizes;                       // with keepdim, the reduced dims as 1
  Dims kept;                            // the sizes of the dims not reduced
  int64_t kept_strides[kMaxDims] = {};  // their strides in the input
  int n_reduced = 0;
  int64_t reduced_sizes[kMaxDims] = {}, reduced_strides[kMaxDims] = {};
  int64_t count = 1;  // elements per output position (0 when a reduced dim is empty)

  // The input offset of output position `o` (row-major over `kept`).
  int64_t offset_of(int64_t o) const {
    int64_t base = 0;
    for (int d = kept.n - 1; d >= 0; --d) {
      base += (o % kept[d]) * kept_strides[d];
      o /= kept[d];
    }
    return base;
  }

  // f(double(value)) for the `count` values reduced into the position whose offset is `base`.
  template <typename T, typename F>
  void walk(const T* base, F&& f) const {
    int64_t idx[kMaxDims] = {}, off = 0;
    for (int64_t q = 0; q < count; ++q) {
      f(static_cast<double>(base[off]));
      for (int d = n_reduced - 1; d >= 0; --d) {
        off += reduced_strides[d];
        if (++idx[d] < reduced_sizes[d]) break;
        off -= reduced_sizes[d] * reduced_strides[d];
        idx[d] = 0;
      }
    }
  }
};

// The plan of reducing `x` over `dims` (each wrapped, at most once; none reduces every dim when
// `empty_means_all`, as var's dim=None does).
inline Status plan_reduction(const char* op, const Tensor& x, Span<const int64_t> dims, bool empty_means_all,
                             bool keepdim, ReductionPlan* plan) {
  bool reduce[kMaxDims] = {};
  for (int d = 0; d < x.dim(); ++d) reduce[d] = empty_means_all && dims.empty();
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(op, d, x.dim(), &w));
    if (x.dim() == 0) continue;  // a 0-d tensor reduces over dim 0 or -1 to itself
    KILN_CHECK_OR_RETURN(!reduce[w], KernelFailure, "%s: dim %lld appears more than once", op,
                         static_cast<long long>(d));
    reduce[w] = true;
  }
  ReductionPlan& p = *plan;
  int64_t strides[kMaxDims] = {}, stride = 1;
  for (int d = x.dim() - 1; d >= 0; --d) strides[d] = stride, stride *= x.sizes()[d];
  for (int d = 0; d < x.dim(); ++d) {
    const int64_t size = x.sizes()[d];
    if (reduce[d]) {
      if (keepdim) p.out_sizes.push(1);
      p.reduced_sizes[p.n_reduced] = size, p.reduced_strides[p.n_reduced] = strides[d], ++p.n_reduced;
      p.count *= size;
    } else {
      p.out_sizes.push(size);
      p.kept_strides[p.kept.n] = strides[d];
      p.kept.push(size);
    }
  }
  return Status::ok();
}

}  // namespace kernels
}  // namespace kiln
