// Elementwise loops on the thread pool: unary maps and broadcast binary maps.
#pragma once

#include <cstdint>

#include "broadcast.h"
#include "dtype_dispatch.h"
#include "kiln/thread_pool.h"
#include "shape_math.h"

namespace kiln {
namespace kernels {

// y[i] = f(x[i]) over contiguous tensors of equal numel, on the thread pool.
template <typename T, typename U = T, typename F>
void map_elements(const Tensor& x, Tensor& y, F f) {
  const T* xp = x.data_as<const T>();
  U* yp = y.data_as<U>();
  parallel_for(x.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) yp[i] = f(load(xp + i));
  });
}

// y = f(a, b) with numpy broadcasting into y's (already resized) shape `out`.
// The row loop is specialised for the stride patterns that vectorise.
template <typename T, typename U = T, typename F>
void binary_map(const Tensor& a, const Tensor& b, Tensor& y, const Dims& out, F f) {
  const Tensor* ins[2] = {&a, &b};
  const BroadcastPlan<2> plan = make_broadcast_plan<2>(out, ins);
  const T* ap = a.data_as<const T>();
  const T* bp = b.data_as<const T>();
  U* yp = y.data_as<U>();
  const int64_t sa = plan.strides[0][plan.ndim - 1], sb = plan.strides[1][plan.ndim - 1];
  parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t n) {
    const T* x = ap + off[0];
    const T* z = bp + off[1];
    U* r = yp + o;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) r[i] = f(x[i], z[i]);
    } else if (sa == 0 && sb == 1) {
      const T xv = *x;
      for (int64_t i = 0; i < n; ++i) r[i] = f(xv, z[i]);
    } else if (sa == 1 && sb == 0) {
      const T zv = *z;
      for (int64_t i = 0; i < n; ++i) r[i] = f(x[i], zv);
    } else {
      for (int64_t i = 0; i < n; ++i) r[i] = f(x[i * sa], z[i * sb]);
    }
  });
}

}  // namespace kernels
}  // namespace kiln
