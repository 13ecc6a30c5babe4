// Reorderings along dims: flip.default (reverse) and roll.default (cyclic shift).
#include <cstring>
#include <type_traits>

#include "common/kernel_args.h"
#include "common/strided_copy.h"
#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// The dims of `x` named by `dims` (wrapped), refusing repeats when `repeats_ok` is false.
Status marked_dims(const char* op, const Tensor& x, Span<const int64_t> dims, bool repeats_ok, bool* marked) {
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(op, d, x.dim(), &w));
    KILN_CHECK_OR_RETURN(repeats_ok || !marked[w], KernelFailure, "%s: dims %s has duplicates", op,
                         describe_ints(dims).c_str());
    marked[w] = true;
  }
  return Status::ok();
}

// y = x with every dim d moved cyclically by shift[d] in [0, size d): y[o] = x[(o - shift) mod size].
template <typename U>
void roll_rows(const U* xp, U* yp, const Dims& sizes, const int64_t* shift) {
  const int nd = sizes.n;
  const int64_t n = sizes[nd - 1], s = shift[nd - 1];
  const int64_t rows = sizes.numel() / n;
  parallel_for(rows, grain_for(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t rem = r, src = 0, stride = n;
      for (int d = nd - 2; d >= 0; --d) {
        const int64_t o = rem % sizes[d];
        rem /= sizes[d];
        int64_t i = o - shift[d];
        if (i < 0) i += sizes[d];
        src += i * stride;
        stride *= sizes[d];
      }
      const U* in_row = xp + src;
      U* row = yp + r * n;
      std::memcpy(row + s, in_row, static_cast<size_t>(n - s) * sizeof(U));
      std::memcpy(row, in_row + (n - s), static_cast<size_t>(s) * sizeof(U));
    }
  });
}

template <typename F>
void by_width(size_t elem, F&& f) {
  switch (elem) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

}  // namespace

Status flip_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::flip.default";
  const Tensor* x;
  Span<const int64_t> dims;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "dims", &dims));
  bool flip[kMaxDims] = {};
  KILN_RETURN_IF_ERROR(marked_dims(op, *x, dims, false, flip));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  if (x->numel() == 0) return Status::ok();
  // A view of x with negative strides along the flipped dims, starting at their last element.
  const size_t elem = element_size(x->dtype());
  int64_t strides[kMaxDims];
  contiguous_strides(x->sizes(), strides);
  int64_t start = 0;
  for (int d = 0; d < x->dim(); ++d) {
    if (!flip[d]) continue;
    start += (x->sizes()[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  strided_copy(y.data(), static_cast<const char*>(x->data()) + start * static_cast<int64_t>(elem), elem,
               Dims(x->sizes()), strides);
  return Status::ok();
}

// roll(self, shifts: int[], dims: int[]): with no dims, the flattened tensor rolls by shifts[0].
// A dim listed twice rolls by the sum of its shifts.
Status roll_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::roll.default";
  const Tensor* x;
  Span<const int64_t> shifts, dims;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "shifts", &shifts));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 2, "dims", &dims));
  if (dims.empty()) {
    KILN_CHECK_OR_RETURN(shifts.size() == 1, KernelFailure, "%s: without dims, shifts %s must have one element", op,
                         describe_ints(shifts).c_str());
  } else {
    KILN_CHECK_OR_RETURN(shifts.size() == dims.size(), KernelFailure,
                         "%s: shifts %s and dims %s must have the same length", op, describe_ints(shifts).c_str(),
                         describe_ints(dims).c_str());
  }
  bool marked[kMaxDims] = {};
  KILN_RETURN_IF_ERROR(marked_dims(op, *x, dims, true, marked));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  if (x->numel() == 0) return Status::ok();
  Dims sizes;
  int64_t shift[kMaxDims] = {};
  if (dims.empty() || x->dim() == 0) {
    sizes.push(x->numel());
    shift[0] = dims.empty() ? shifts[0] % x->numel() : 0;
    if (shift[0] < 0) shift[0] += x->numel();
  } else {
    sizes = Dims(x->sizes());
    for (size_t k = 0; k < dims.size(); ++k) {
      int64_t d;
      KILN_RETURN_IF_ERROR(wrap_dim(op, dims[k], x->dim(), &d));
      const int64_t n = sizes[static_cast<int>(d)];
      int64_t s = shifts[k] % n;  // n > 0: numel > 0
      if (s < 0) s += n;
      shift[d] = (shift[d] + s) % n;
    }
  }
  by_width(element_size(x->dtype()), [&](auto tag) {
    using U = decltype(tag);
    roll_rows<U>(x->data_as<const U>(), y.data_as<U>(), sizes, shift);
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::flip.default", "*", flip_run);
KILN_REGISTER_KERNEL("aten::roll.default", "*", roll_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
