// Sliding-window geometry (window.h).
#include "window.h"

#include <algorithm>

#include "kernel_args.h"

namespace kiln {
namespace kernels {

int64_t pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Floor division (num may be negative for a window larger than the input).
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Status window_geometry(const char* op, const char* axis, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                       int64_t dilation, bool ceil_mode, bool pad_max_half_kernel, Window* w) {
  auto in_range = [](int64_t v, int64_t lo) { return v >= lo && v <= kMaxWindowParam; };
  KILN_CHECK_OR_RETURN(in_range(kernel, 1), KernelFailure, "%s: kernel size %lld (%s) must be in [1, %lld]", op,
                       static_cast<long long>(kernel), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(in_range(stride, 1), KernelFailure, "%s: stride %lld (%s) must be in [1, %lld]", op,
                       static_cast<long long>(stride), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(in_range(dilation, 1), KernelFailure, "%s: dilation %lld (%s) must be in [1, %lld]", op,
                       static_cast<long long>(dilation), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(in_range(pad, 0), KernelFailure, "%s: padding %lld (%s) must be in [0, %lld]", op,
                       static_cast<long long>(pad), axis, static_cast<long long>(kMaxWindowParam));
  KILN_CHECK_OR_RETURN(!pad_max_half_kernel || pad <= kernel / 2, KernelFailure,
                       "%s: padding %lld (%s) must be at most half the kernel size %lld", op,
                       static_cast<long long>(pad), axis, static_cast<long long>(kernel));
  KILN_CHECK_OR_RETURN(in >= 1 && in <= kMaxElements, KernelFailure, "%s: input %s %lld must be in [1, %lld]", op, axis,
                       static_cast<long long>(in), static_cast<long long>(kMaxElements));
  // Every term is at most 2^60, so none of this overflows.
  const int64_t extent = dilation * (kernel - 1) + 1;
  KILN_CHECK_OR_RETURN(extent <= in + 2 * pad, KernelFailure,
                       "%s: the %s of the padded input (%lld + 2 * %lld) is smaller than the (dilated) kernel %lld", op,
                       axis, static_cast<long long>(in), static_cast<long long>(pad), static_cast<long long>(extent));
  w->in = in, w->kernel = kernel, w->stride = stride, w->pad = pad, w->dilation = dilation;
  w->out = pooling_output_size(in, kernel, pad, stride, dilation, ceil_mode);
  KILN_CHECK_OR_RETURN(w->out >= 1, KernelFailure, "%s: output %s %lld is too small", op, axis,
                       static_cast<long long>(w->out));
  return Status::ok();
}

void window_taps(const Window& w, int64_t start, int64_t* t0, int64_t* t1) {
  // First tap at or after position 0, last tap before position in; all terms stay below 2^62.
  const int64_t lo = start >= 0 ? 0 : (-start + w.dilation - 1) / w.dilation;
  const int64_t last = w.in - 1 - start;  // tap position <= last
  const int64_t hi = last < 0 ? 0 : std::min(w.kernel, last / w.dilation + 1);
  *t0 = std::min(lo, hi);
  *t1 = hi;
}

Status pool_input(const char* op, const Tensor& x, PoolInput* out) {
  KILN_RETURN_IF_ERROR(check_dtype(op, x, "self", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x.dim() == 3 || x.dim() == 4, KernelFailure, "%s: self must be 3-D or 4-D, got %s", op,
                       describe(x).c_str());
  out->batched = x.dim() == 4;
  out->planes = prod(x.sizes(), 0, x.dim() - 2);
  out->h = x.size(-2);
  out->w = x.size(-1);
  KILN_CHECK_OR_RETURN(out->h > 0 && out->w > 0, KernelFailure, "%s: self %s has an empty spatial dim", op,
                       describe(x).c_str());
  return Status::ok();
}

Dims pool_output_sizes(const Tensor& x, int64_t oh, int64_t ow) {
  Dims d;
  for (int i = 0; i < x.dim() - 2; ++i) d.push(x.sizes()[i]);
  d.push(oh);
  d.push(ow);
  return d;
}

}  // namespace kernels
}  // namespace kiln
