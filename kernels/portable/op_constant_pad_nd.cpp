// constant_pad_nd: pads (or, with negative pads, crops) the trailing dims and fills new cells with a value.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// Output row r (over all dims but the last) of y copies from x or is all fill. `lo[d]` is the
// (clamped) number of cells added before dim d: output index o reads input index o - lo[d].
template <typename U>
void pad_rows(const Tensor& x, Tensor& y, const int64_t* lo, U fill) {
  const int nd = y.dim();
  const U* xp = x.data_as<const U>();
  U* yp = y.data_as<U>();
  if (nd == 0) {
    yp[0] = xp[0];
    return;
  }
  const int64_t out_last = y.sizes()[nd - 1], in_last = x.sizes()[nd - 1];
  const int64_t rows = y.numel() / out_last;
  // Columns [c0, c1) of every copied row come from the input; lo is clamped to [-in_last, out_last].
  const int64_t c0 = std::min(std::max<int64_t>(lo[nd - 1], 0), out_last);
  const int64_t c1 = std::max(c0, std::min(lo[nd - 1] + in_last, out_last));
  parallel_for(rows, grain_for(out_last), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      U* row = yp + r * out_last;
      int64_t rem = r, src = 0, stride = in_last;
      bool inside = true;
      for (int d = nd - 2; d >= 0 && inside; --d) {
        const int64_t o = rem % y.sizes()[d];
        rem /= y.sizes()[d];
        const int64_t i = o - lo[d];
        inside = i >= 0 && i < x.sizes()[d];  // only then is i * stride an offset into x
        if (inside) src += i * stride;
        stride *= x.sizes()[d];
      }
      if (!inside) {
        std::fill(row, row + out_last, fill);
        continue;
      }
      std::fill(row, row + c0, fill);
      if (c1 > c0) std::memcpy(row + c0, xp + src + (c0 - lo[nd - 1]), static_cast<size_t>(c1 - c0) * sizeof(U));
      std::fill(row + c1, row + out_last, fill);
    }
  });
}

// The unsigned integer type of T's width: rows are copied and filled as raw bits.
template <typename T>
using Bits = std::conditional_t<
    sizeof(T) == 1, uint8_t,
    std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

}  // namespace

// constant_pad_nd(self, pad: int[], value: Scalar): pad = [before_last, after_last, before_prev, ...].
Status constant_pad_nd_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::constant_pad_nd.default";
  const Tensor* x;
  Span<const int64_t> pad;
  double value;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 3, &x));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 1, "pad", &pad));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 2, "value", &value));
  const int nd = x->dim();
  KILN_CHECK_OR_RETURN(pad.size() % 2 == 0 && pad.size() <= 2 * static_cast<size_t>(nd), KernelFailure,
                       "%s: pad %s must have an even length of at most twice the rank of %s", op,
                       describe_ints(pad).c_str(), describe(*x).c_str());
  Dims sizes(x->sizes());
  int64_t lo[kMaxDims] = {};
  for (size_t p = 0; p < pad.size() / 2; ++p) {
    const int d = nd - 1 - static_cast<int>(p);
    int64_t n;
    KILN_RETURN_IF_ERROR(checked_add(op, "padded size", sizes[d], pad[2 * p], &n));
    KILN_RETURN_IF_ERROR(checked_add(op, "padded size", n, pad[2 * p + 1], &n));
    KILN_CHECK_OR_RETURN(n >= 0, KernelFailure, "%s: pad %s makes dim %d of %s negative", op,
                         describe_ints(pad).c_str(), d, describe(*x).c_str());
    sizes[d] = n;
    // Clamping to [-size, new size] changes no index's fate (inside or not), and keeps o - lo small.
    lo[d] = std::min(std::max(pad[2 * p], -x->sizes()[d]), n);
  }
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (y.numel() == 0) return Status::ok();
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    using U = Bits<T>;
    const T v = saturate_cast<T>(value);
    U fill;
    std::memcpy(&fill, &v, sizeof fill);
    pad_rows<U>(*x, y, lo, fill);
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::constant_pad_nd.default", "*", constant_pad_nd_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
