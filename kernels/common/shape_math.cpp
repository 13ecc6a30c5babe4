// Shapes and checked arithmetic (shape_math.h).
#include "shape_math.h"

#include <cmath>

namespace kiln {
namespace kernels {

namespace {

// Saturating product of n sizes: 0 if any is 0, else INT64_MAX if it overflows (or a size is negative).
int64_t saturating_prod(const int64_t* sizes, size_t n) {
  int64_t p = 1;
  bool saturated = false;
  for (size_t i = 0; i < n; ++i) {
    if (sizes[i] == 0) return 0;
    if (saturated) continue;
    if (sizes[i] < 0 || mul_overflows(p, sizes[i], &p) || p < 0) saturated = true;
  }
  return saturated ? std::numeric_limits<int64_t>::max() : p;
}

}  // namespace

int64_t Dims::numel() const { return saturating_prod(v, static_cast<size_t>(n)); }

int64_t numel_of(Span<const int64_t> sizes) { return saturating_prod(sizes.data(), sizes.size()); }

int64_t prod(Span<const int64_t> sizes, int begin, int end) {
  if (begin >= end) return 1;
  return saturating_prod(sizes.data() + begin, static_cast<size_t>(end - begin));
}

Status checked_mul(const char* op, const char* what, int64_t a, int64_t b, int64_t* out) {
  KILN_CHECK_OR_RETURN(!mul_overflows(a, b, out), KernelFailure, "%s: %s overflows (%lld * %lld)", op, what,
                       static_cast<long long>(a), static_cast<long long>(b));
  return Status::ok();
}

Status checked_add(const char* op, const char* what, int64_t a, int64_t b, int64_t* out) {
  KILN_CHECK_OR_RETURN(!add_overflows(a, b, out), KernelFailure, "%s: %s overflows (%lld + %lld)", op, what,
                       static_cast<long long>(a), static_cast<long long>(b));
  return Status::ok();
}

int64_t mul_div(int64_t a, int64_t b, int64_t c, bool round_up) {
#if defined(__SIZEOF_INT128__)
  using U = unsigned __int128;
  const U p = static_cast<U>(a) * static_cast<U>(b);
  return static_cast<int64_t>((round_up ? p + static_cast<U>(c) - 1 : p) / static_cast<U>(c));
#else
  // a * b = a * q * c + a * r with b = q * c + r.
  const int64_t q = b / c, r = b % c;
  int64_t ar;
  if (!mul_overflows(a, r, &ar)) return a * q + (round_up ? ar / c + (ar % c != 0) : ar / c);
  const long double f = static_cast<long double>(a) * static_cast<long double>(r) / static_cast<long double>(c);
  return a * q + static_cast<int64_t>(round_up ? std::ceil(f) : std::floor(f));
#endif
}

std::string describe_ints(Span<const int64_t> values) {
  constexpr size_t kShown = kMaxDims + 1;
  if (values.size() <= kShown) return describe_sizes(values);
  std::string s = describe_sizes(Span<const int64_t>(values.data(), kShown));
  s.pop_back();
  return s + format(", ... (%zu values)]", values.size());
}

Status check_shape(const char* op, const char* what, Span<const int64_t> sizes) {
  KILN_CHECK_OR_RETURN(sizes.size() <= static_cast<size_t>(kMaxDims), KernelFailure,
                       "%s: %s has %zu dims, at most %d are supported", op, what, sizes.size(), kMaxDims);
  int64_t p = 1;
  for (int64_t s : sizes) {
    KILN_CHECK_OR_RETURN(s >= 0, KernelFailure, "%s: %s %s has a negative size", op, what,
                         describe_ints(sizes).c_str());
    if (s == 0) continue;
    KILN_CHECK_OR_RETURN(!mul_overflows(p, s, &p) && p <= kMaxElements, KernelFailure,
                         "%s: %s %s has too many elements", op, what, describe_ints(sizes).c_str());
  }
  return Status::ok();
}

Status shape_numel(const char* op, const char* what, Span<const int64_t> sizes, int64_t* numel) {
  KILN_RETURN_IF_ERROR(check_shape(op, what, sizes));
  *numel = numel_of(sizes);
  return Status::ok();
}

Status check_tensor(const char* op, const char* name, const Tensor& t) {
  int64_t n;
  KILN_RETURN_IF_ERROR(shape_numel(op, name, t.sizes(), &n));
  // n <= 2^59 and element sizes are at most 8: the product fits.
  const uint64_t bytes = static_cast<uint64_t>(n) * element_size(t.dtype());
  KILN_CHECK_OR_RETURN(bytes <= t.capacity() && (bytes == 0 || t.data() != nullptr), KernelFailure,
                       "%s: %s %s has %llu bytes of data but %zu bytes of storage", op, name, describe(t).c_str(),
                       static_cast<unsigned long long>(bytes), t.data() != nullptr ? t.capacity() : size_t{0});
  return Status::ok();
}

}  // namespace kernels
}  // namespace kiln
