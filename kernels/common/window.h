// Sliding-window geometry for convolutions and pools.
#pragma once

#include <cstdint>

#include "kiln/kernel.h"
#include "shape_math.h"

namespace kiln {
namespace kernels {

// ---- sliding windows (conv2d, max_pool2d, avg_pool2d)

// Bound of every window parameter (kernel size, stride, padding, dilation):
// far beyond any real model, and small enough that no window arithmetic on
// inputs of at most kMaxElements elements can overflow int64.
constexpr int64_t kMaxWindowParam = int64_t{1} << 30;

// Output length of a pooling window sweep (PyTorch's pooling_output_shape):
// ceil_mode rounds up, but the last window must start inside the input or its
// left padding. May be <= 0. Precondition: parameters validated as window_geometry does.
int64_t pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode);

// One spatial dim of a validated sliding window.
struct Window {
  int64_t in = 0;  // input length
  int64_t kernel = 1, stride = 1, pad = 0, dilation = 1;
  int64_t out = 0;  // number of window positions, >= 1
};
// Validates one spatial dim (`axis`, "height" or "width") of a window over `in`
// elements and computes its output length: kernel, stride and dilation in
// [1, kMaxWindowParam], pad in [0, kMaxWindowParam] (and at most half the kernel
// when `pad_max_half_kernel`, PyTorch's rule for pools), and the dilated kernel
// no larger than the padded input, so that there is at least one output.
Status window_geometry(const char* op, const char* axis, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                       int64_t dilation, bool ceil_mode, bool pad_max_half_kernel, Window* w);
// The taps t in [0, kernel) of the window starting at `start` (in input
// coordinates, may be negative) whose position start + t * dilation lies in
// [0, in): [*t0, *t1), empty when none does. O(1), so a huge kernel over a
// small input costs nothing.
void window_taps(const Window& w, int64_t start, int64_t* t0, int64_t* t1);

// The window at output position `o` of one dim: where it starts in the input and its taps inside.
struct WindowSpan {
  int64_t start = 0;       // o * stride - pad
  int64_t t0 = 0, t1 = 0;  // window_taps
};
inline WindowSpan window_at(const Window& w, int64_t o) {
  WindowSpan s;
  s.start = o * w.stride - w.pad;
  window_taps(w, s.start, &s.t0, &s.t1);
  return s;
}

// Calls f(index, spans...) for every output position of a window sweep over 2 or 3 dims, in
// row-major order of the output (index counts from 0): the loop of every windowed kernel.
template <typename F>
void for_each_window(const Window& wh, const Window& ww, F f) {
  for (int64_t i = 0; i < wh.out; ++i) {
    const WindowSpan h = window_at(wh, i);
    for (int64_t j = 0; j < ww.out; ++j) f(i * ww.out + j, h, window_at(ww, j));
  }
}
template <typename F>
void for_each_window(const Window& wd, const Window& wh, const Window& ww, F f) {
  for (int64_t e = 0; e < wd.out; ++e) {
    const WindowSpan d = window_at(wd, e);
    for_each_window(wh, ww,
                    [&](int64_t o, const WindowSpan& h, const WindowSpan& w) { f(e * wh.out * ww.out + o, d, h, w); });
  }
}

// A 2-D pooling input: [C, H, W] or [N, C, H, W], seen as `planes` H x W planes.
struct PoolInput {
  int64_t planes = 0, h = 0, w = 0;
  bool batched = false;
};
Status pool_input(const char* op, const Tensor& x, PoolInput* out);
// Output sizes [N,] C, oh, ow for a pooling input.
Dims pool_output_sizes(const Tensor& x, int64_t oh, int64_t ow);

}  // namespace kernels
}  // namespace kiln
