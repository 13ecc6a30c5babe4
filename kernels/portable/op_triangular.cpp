// Triangular parts of the last two dims: tril.default and triu.default (with a diagonal offset).
#include <algorithm>
#include <cstring>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// Keeps x[..., i, j] where j - i <= diagonal (lower) or j - i >= diagonal (upper); zeros elsewhere.
Status triangular(const char* op, bool lower, Inputs in, Outputs out) {
  const Tensor* x;
  int64_t diagonal;
  KILN_RETURN_IF_ERROR(copy_setup(op, in, out, 2, &x));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 1, "diagonal", &diagonal));
  KILN_CHECK_OR_RETURN(x->dim() >= 2, KernelFailure, "%s: self must have at least 2 dims, got %s", op,
                       describe(*x).c_str());
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  if (x->numel() == 0) return Status::ok();
  const int64_t m = x->size(-2), n = x->size(-1);
  // j - i lies in [-(m - 1), n - 1]: clamping the diagonal to [-m, n] keeps every comparison and
  // makes the column bounds below overflow-free.
  const int64_t k = std::min(std::max(diagonal, -m), n);
  const size_t elem = element_size(x->dtype());
  const char* xp = static_cast<const char*>(x->data());
  char* yp = static_cast<char*>(y.data());
  const int64_t rows = x->numel() / n;
  parallel_for(rows, grain_for(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % m;
      // Kept columns [c0, c1): lower keeps j <= i + k, upper keeps j >= i + k.
      const int64_t c0 = lower ? 0 : std::min(std::max<int64_t>(i + k, 0), n);
      const int64_t c1 = lower ? std::min(std::max<int64_t>(i + k + 1, 0), n) : n;
      char* row = yp + static_cast<size_t>(r * n) * elem;
      const char* src = xp + static_cast<size_t>(r * n) * elem;
      std::memset(row, 0, static_cast<size_t>(c0) * elem);
      if (c1 > c0) std::memcpy(row + c0 * elem, src + c0 * elem, static_cast<size_t>(c1 - c0) * elem);
      std::memset(row + std::max(c0, c1) * elem, 0, static_cast<size_t>(n - std::max(c0, c1)) * elem);
    }
  });
  return Status::ok();
}

}  // namespace

Status tril_run(KernelContext&, Inputs in, Outputs out) { return triangular("aten::tril.default", true, in, out); }
Status triu_run(KernelContext&, Inputs in, Outputs out) { return triangular("aten::triu.default", false, in, out); }

// Zero is all-zero bytes in every dtype kiln has (floats, integers, bool).
KILN_REGISTER_KERNEL("aten::tril.default", "*", tril_run);
KILN_REGISTER_KERNEL("aten::triu.default", "*", triu_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
