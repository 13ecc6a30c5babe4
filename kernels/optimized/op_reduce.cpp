// Optimized float32 aten::mean.dim over trailing dims (RMSNorm's mean of squares, token pooling):
// one mean per contiguous row. Other reductions are left to the portable kernel.
#include "common/kernel_args.h"
#include "kiln/thread_pool.h"
#include "optimized/f32_pool.h"

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

constexpr const char* kOp = "aten::mean.dim";

// Checks the arguments; *trailing says whether the reduced dims are exactly the last ones (then
// *rows means of *n elements each), and the output is resized (at run; at prepare the input has
// sizes but no data yet and the output is left alone).
Status mean_args(bool at_prepare, Inputs in, Outputs out, bool* trailing, int64_t* rows, int64_t* n) {
  KILN_RETURN_IF_ERROR(check_arity(kOp, in, out, 4, 1));
  const Tensor* x;
  Span<const int64_t> dims;
  bool dims_given, keepdim, dtype_given;
  ScalarType dtype = ScalarType::Float32;
  KILN_RETURN_IF_ERROR(tensor_arg(at_prepare, kOp, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_int_list_arg(kOp, in, 1, "dim", &dims, &dims_given));
  KILN_RETURN_IF_ERROR(bool_arg(kOp, in, 2, "keepdim", &keepdim));
  KILN_RETURN_IF_ERROR(optional_dtype_arg(kOp, in, 3, "dtype", &dtype, &dtype_given));
  const int nd = x->dim();
  bool reduce[kMaxDims] = {};
  for (int64_t d : dims) {
    int64_t w;
    KILN_RETURN_IF_ERROR(wrap_dim(kOp, d, nd, &w));
    if (nd == 0) continue;
    KILN_CHECK_OR_RETURN(!reduce[w], KernelFailure, "%s: dim %lld appears more than once", kOp,
                         static_cast<long long>(d));
    reduce[w] = true;
  }
  int first = nd;  // the reduced dims must be [first, nd)
  while (first > 0 && reduce[first - 1]) --first;
  bool others = false;
  for (int d = 0; d < first; ++d) others = others || reduce[d];
  *trailing = nd > 0 && dims_given && first < nd && !others && dtype == ScalarType::Float32 &&
              out[0]->dtype() == ScalarType::Float32;
  if (!*trailing) return Status::ok();
  *rows = prod(x->sizes(), 0, first), *n = prod(x->sizes(), first, nd);
  if (at_prepare) return Status::ok();
  Dims sizes;
  for (int d = 0; d < nd; ++d) {
    if (d < first)
      sizes.push(x->sizes()[d]);
    else if (keepdim)
      sizes.push(1);
  }
  return resize_output(kOp, out[0], sizes.span());
}

// Malformed arguments: the portable kernel serves, and reports them at run.
Status mean_prepare(KernelContext&, Inputs in, Outputs out, void**) {
  bool trailing;
  int64_t rows, n;
  const Status st = mean_args(/*at_prepare=*/true, in, out, &trailing, &rows, &n);
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  if (!trailing) return Status(Error::NotSupported, "not a float32 mean over the trailing dims");
  return Status::ok();
}

Status mean_run(KernelContext& ctx, Inputs in, Outputs out) {
  bool trailing;
  int64_t rows = 0, n = 0;
  KILN_RETURN_IF_ERROR(mean_args(/*at_prepare=*/false, in, out, &trailing, &rows, &n));
  KILN_CHECK_OR_RETURN(trailing, KernelFailure, "%s: the reduced dims changed after prepare", kOp);
  const auto mean_rows = f32_pool_for(ctx.isa).mean_rows;
  const float* xp = in[0]->tensor->data_as<const float>();
  float* yp = out[0]->data_as<float>();
  parallel_for(rows, grain_for(n), [&](int64_t r0, int64_t r1) { mean_rows(xp + r0 * n, r1 - r0, n, yp + r0); });
  return Status::ok();
}

}  // namespace

KILN_REGISTER_TIERED_KERNEL(kTierOptimized, "aten::mean.dim", "f32", mean_run, mean_prepare);

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
