// Numpy-style broadcasting: output shapes and loop plans over broadcast operands.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kiln/kernel.h"
#include "kiln/thread_pool.h"
#include "shape_math.h"

namespace kiln {
namespace kernels {

// Numpy-style broadcast of `count` shapes into *out.
Status broadcast_shapes(const char* op, const Tensor* const* tensors, int count, Dims* out);

// A loop nest over an output shape with N broadcast inputs, after dropping
// size-1 dims and merging dims that are contiguous for every operand. Work is
// handed out as rows: the innermost dim is a row walked with per-operand strides.
template <int N>
struct BroadcastPlan {
  int ndim = 1;
  int64_t sizes[kMaxDims] = {1};
  int64_t strides[N][kMaxDims] = {};  // element strides of input k; 0 where broadcast

  int64_t inner() const { return sizes[ndim - 1]; }
  int64_t rows() const {
    int64_t r = 1;
    for (int d = 0; d + 1 < ndim; ++d) r *= sizes[d];
    return r;
  }
};

template <int N>
BroadcastPlan<N> make_broadcast_plan(const Dims& out, const Tensor* const (&in)[N]) {
  BroadcastPlan<N> p;
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];
  int nd = 0;
  for (int d = 0; d < out.n; ++d) {
    if (out[d] == 1) continue;  // contributes nothing to any offset
    sizes[nd] = out[d];
    for (int k = 0; k < N; ++k) {
      const Tensor& t = *in[k];
      const int td = d - (out.n - t.dim());
      int64_t stride = 0;
      if (td >= 0 && t.sizes()[td] != 1) {
        stride = 1;
        for (int e = td + 1; e < t.dim(); ++e) stride *= t.sizes()[e];
      }
      strides[k][nd] = stride;
    }
    ++nd;
  }
  if (nd == 0) {
    sizes[0] = 1;
    for (int k = 0; k < N; ++k) strides[k][0] = 0;
    nd = 1;
  }
  // Merge dim d into the previous one when every operand walks them as one.
  p.ndim = 0;
  for (int d = 0; d < nd; ++d) {
    bool merge = p.ndim > 0;
    for (int k = 0; k < N && merge; ++k) merge = p.strides[k][p.ndim - 1] == strides[k][d] * sizes[d];
    if (merge) {
      p.sizes[p.ndim - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) p.strides[k][p.ndim - 1] = strides[k][d];
    } else {
      p.sizes[p.ndim] = sizes[d];
      for (int k = 0; k < N; ++k) p.strides[k][p.ndim] = strides[k][d];
      ++p.ndim;
    }
  }
  return p;
}

// Calls fn(out_offset, in_offsets) for rows [row_begin, row_end) of the plan;
// out_offset is in elements of the contiguous output.
template <int N, typename F>
void for_each_row(const BroadcastPlan<N>& p, int64_t row_begin, int64_t row_end, F&& fn) {
  const int outer = p.ndim - 1;
  int64_t idx[kMaxDims] = {};
  int64_t off[N] = {};
  int64_t rem = row_begin;
  for (int d = outer - 1; d >= 0; --d) {
    idx[d] = rem % p.sizes[d];
    rem /= p.sizes[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  const int64_t inner = p.inner();
  for (int64_t r = row_begin; r < row_end; ++r) {
    fn(r * inner, static_cast<const int64_t*>(off));
    for (int d = outer - 1; d >= 0; --d) {  // odometer increment
      for (int k = 0; k < N; ++k) off[k] += p.strides[k][d];
      if (++idx[d] < p.sizes[d]) break;
      for (int k = 0; k < N; ++k) off[k] -= p.sizes[d] * p.strides[k][d];
      idx[d] = 0;
    }
  }
}

// Runs fn(out_offset, in_offsets, len) over the whole plan on the thread pool.
// Rows are cut into pieces of at most kElementwiseGrain elements, so a plan
// that collapsed to one long row (same-shape operands) still runs in parallel.
template <int N, typename F>
void parallel_rows(const BroadcastPlan<N>& p, F&& fn) {
  const int64_t inner = p.inner();
  if (inner <= 0) return;
  const int64_t pieces = (inner + kElementwiseGrain - 1) / kElementwiseGrain;
  const int64_t piece_len = (inner + pieces - 1) / pieces;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::min(inner, piece_len));
  parallel_for(p.rows() * pieces, grain, [&](int64_t t0, int64_t t1) {
    for_each_row(p, t0 / pieces, (t1 - 1) / pieces + 1, [&](int64_t o, const int64_t* off) {
      const int64_t r = o / inner;
      const int64_t first = std::max(t0, r * pieces) - r * pieces, last = std::min(t1, (r + 1) * pieces) - r * pieces;
      const int64_t begin = first * piece_len, end = std::min(inner, last * piece_len);
      int64_t shifted[N];
      for (int k = 0; k < N; ++k) shifted[k] = off[k] + begin * p.strides[k][p.ndim - 1];
      fn(o + begin, static_cast<const int64_t*>(shifted), end - begin);
    });
  });
}

}  // namespace kernels
}  // namespace kiln
