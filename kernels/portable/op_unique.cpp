// _unique2.default(self, sorted, return_inverse, return_counts) -> (values, inverse, counts): the distinct
// elements of self in ascending order (ATen's CPU kernel sorts whether or not `sorted` is set), the
// position of each element of self among them (self's shape) and how often each occurs; inverse and
// counts are empty ([0]) when not asked for, as in ATen. NaNs are all distinct and come last, in the
// order they appear; -0.0 equals 0.0. The sort order is a permutation in planned scratch (8 bytes per
// element of self at its bound, reserved at prepare); the number of distinct values is checked against
// the planned capacity of the outputs before a byte is written.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

constexpr const char* kOp = "aten::_unique2.default";

Status unique_prepare(KernelContext& ctx, Inputs in, Outputs out, void**) {
  KILN_CHECK_OR_RETURN(in.size() == 4 && out.size() == 3, KernelFailure,
                       "%s: expected 4 arguments and 3 outputs, got %zu and %zu", kOp, in.size(), out.size());
  const Tensor* x;
  KILN_RETURN_IF_ERROR(prepare_tensor_arg(kOp, in, 0, "self", &x));
  ctx.scratch_bytes = static_cast<size_t>(x->numel()) * sizeof(int64_t);
  return Status::ok();
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

template <typename T>
void unique_typed(const Tensor& x, int64_t* perm, bool inverse_wanted, bool counts_wanted, Tensor& values,
                  Tensor& inverse, Tensor& counts, int64_t u) {
  const T* p = x.data_as<const T>();
  T* v = values.data_as<T>();
  int64_t* inv = inverse_wanted ? inverse.data_as<int64_t>() : nullptr;
  int64_t* cnt = counts_wanted ? counts.data_as<int64_t>() : nullptr;
  const int64_t n = x.numel();
  int64_t g = -1;
  for (int64_t i = 0; i < n; ++i) {
    const T cur = load(p + perm[i]);
    if (i == 0 || !(load(p + perm[i - 1]) == cur)) {  // NaN never equals anything: each is its own group
      if (++g >= u) return;                           // cannot happen: u was counted the same way
      v[g] = cur;
      if (cnt) cnt[g] = 0;
    }
    if (cnt) ++cnt[g];
    if (inv) inv[perm[i]] = g;
  }
}

// Sorts perm (0..n-1) by value, NaNs last, ties by position; returns the number of distinct values.
template <typename T>
int64_t sort_and_count(const Tensor& x, int64_t* perm) {
  const T* p = x.data_as<const T>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::sort(perm, perm + n, [p](int64_t a, int64_t b) {  // std::sort never allocates
    const T va = load(p + a), vb = load(p + b);
    const bool na = is_nan(va), nb = is_nan(vb);
    if (na || nb) return na == nb ? a < b : nb;
    if (va < vb) return true;
    if (vb < va) return false;
    return a < b;
  });
  int64_t u = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || !(load(p + perm[i - 1]) == load(p + perm[i]))) ++u;
  }
  return u;
}

Status unique_run(KernelContext& ctx, Inputs in, Outputs out) {
  const Tensor* x;
  bool sorted, inverse_wanted, counts_wanted;
  KILN_RETURN_IF_ERROR(check_arity(kOp, in, out, 4, 3));
  KILN_RETURN_IF_ERROR(tensor_arg(kOp, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(bool_arg(kOp, in, 1, "sorted", &sorted));
  KILN_RETURN_IF_ERROR(bool_arg(kOp, in, 2, "return_inverse", &inverse_wanted));
  KILN_RETURN_IF_ERROR(bool_arg(kOp, in, 3, "return_counts", &counts_wanted));
  Tensor &values = *out[0], &inverse = *out[1], &counts = *out[2];
  KILN_RETURN_IF_ERROR(check_same_dtype(kOp, *x, "self", values, "values"));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, inverse, "inverse", ScalarType::Int64));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, counts, "counts", ScalarType::Int64));
  const int64_t n = x->numel();
  KILN_CHECK_OR_RETURN(
      static_cast<uint64_t>(n) * sizeof(int64_t) <= ctx.scratch_bytes && (n == 0 || ctx.scratch != nullptr),
      KernelFailure, "%s: %s needs %llu bytes of scratch, %zu were planned", kOp, describe(*x).c_str(),
      static_cast<unsigned long long>(n) * sizeof(int64_t), ctx.scratch_bytes);
  int64_t* perm = static_cast<int64_t*>(ctx.scratch);
  int64_t u = 0;
  const bool ok = dispatch_all(x->dtype(), [&](auto tag) { u = sort_and_count<decltype(tag)>(*x, perm); });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported dtype in %s", kOp, describe(*x).c_str());
  const int64_t one[1] = {u}, none[1] = {0};
  KILN_RETURN_IF_ERROR(resize_data_dependent(kOp, "values", &values, Span<const int64_t>(one, 1)));
  KILN_RETURN_IF_ERROR(
      resize_data_dependent(kOp, "counts", &counts, Span<const int64_t>(counts_wanted ? one : none, 1)));
  if (inverse_wanted) {
    KILN_RETURN_IF_ERROR(resize_data_dependent(kOp, "inverse", &inverse, x->sizes()));
  } else {
    KILN_RETURN_IF_ERROR(resize_data_dependent(kOp, "inverse", &inverse, Span<const int64_t>(none, 1)));
  }
  dispatch_all(x->dtype(), [&](auto tag) {
    unique_typed<decltype(tag)>(*x, perm, inverse_wanted, counts_wanted, values, inverse, counts, u);
  });
  return Status::ok();
}

}  // namespace

KILN_REGISTER_KERNEL("aten::_unique2.default", "*", unique_run, unique_prepare);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
