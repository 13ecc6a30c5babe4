// Shapes and checked arithmetic on untrusted sizes, shared by every kernel library.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "common/internal_api.h"
#include "kiln/kernel.h"

namespace kiln {
namespace kernels {

// Elementwise loops hand out chunks of at least this many elements per thread.
constexpr int64_t kElementwiseGrain = 32768;

// A shape with inline storage, so building one never allocates.
struct Dims {
  int64_t v[kMaxDims] = {};
  int n = 0;

  Dims() = default;
  // Keeps at most kMaxDims entries; callers reject longer shapes first.
  explicit Dims(Span<const int64_t> s) : n(static_cast<int>(std::min<size_t>(s.size(), kMaxDims))) {
    for (int i = 0; i < n; ++i) v[i] = s[i];
  }
  Span<const int64_t> span() const { return {v, static_cast<size_t>(n)}; }
  int64_t operator[](int i) const { return v[i]; }
  int64_t& operator[](int i) { return v[i]; }
  // Appends; callers check n < kMaxDims first (see push_checked).
  void push(int64_t x) { v[n++] = x; }
  // Saturating (never overflows); exact for validated shapes (see check_shape).
  int64_t numel() const;
};

// ---- checked arithmetic on untrusted ints
//
// Scalar arguments (strides, paddings, sizes, dims, ...) come straight from the
// program file and may be any int64. Shape arithmetic on them goes through these
// helpers; arithmetic on the sizes of tensors that passed check_shape (every
// tensor argument and every resized output) cannot overflow and may be plain.

// No tensor the kernels accept has more elements than this, counting only its
// non-zero sizes (so that every partial product of its sizes, in any order,
// fits in int64 with room to spare, and so does numel * element size).
constexpr int64_t kMaxElements = int64_t{1} << 59;

// a * b and a + b; false (leaving *out unspecified) on int64 overflow.
inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_mul_overflow(a, b, out);
#else
  if (a != 0 && b != 0) {
    const bool neg = (a < 0) != (b < 0);
    const uint64_t ua = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
    const uint64_t ub = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
    const uint64_t lim = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    if (ua > lim / ub) return true;
    *out = neg ? static_cast<int64_t>(0 - ua * ub) : static_cast<int64_t>(ua * ub);
    return false;
  }
  *out = 0;
  return false;
#endif
}
inline bool add_overflows(int64_t a, int64_t b, int64_t* out) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_add_overflow(a, b, out);
#else
  if ((b > 0 && a > std::numeric_limits<int64_t>::max() - b) || (b < 0 && a < std::numeric_limits<int64_t>::min() - b))
    return true;
  *out = a + b;
  return false;
#endif
}

// Status-returning forms: KernelFailure "<op>: <what> overflows" on overflow.
KILN_INTERNAL_API Status checked_mul(const char* op, const char* what, int64_t a, int64_t b, int64_t* out);
KILN_INTERNAL_API Status checked_add(const char* op, const char* what, int64_t a, int64_t b, int64_t* out);

// Saturating product of non-negative values, for work estimates (grains) only.
inline int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return mul_overflows(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
// parallel_for grain for items that each cost `work` elementary steps.
inline int64_t grain_for(int64_t work) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(work, 1)); }

// floor(a * b / c), or the ceiling when `round_up`, for a, b >= 0 and c > 0,
// without overflowing the product (the result must fit: a <= c makes it <= b).
KILN_INTERNAL_API int64_t mul_div(int64_t a, int64_t b, int64_t c, bool round_up);

// Products of sizes, saturating at INT64_MAX instead of overflowing (0 if any
// size is 0). Exact for shapes that passed check_shape.
KILN_INTERNAL_API int64_t numel_of(Span<const int64_t> sizes);
// Product of sizes[begin:end].
KILN_INTERNAL_API int64_t prod(Span<const int64_t> sizes, int begin, int end);

// describe_sizes for an int list from the file, which may be arbitrarily long:
// at most kMaxDims + 1 values are printed, then the count.
KILN_INTERNAL_API std::string describe_ints(Span<const int64_t> values);

// A valid shape: at most kMaxDims sizes, each >= 0, and the product of the
// non-zero sizes at most kMaxElements. `what` names the shape in the message.
KILN_INTERNAL_API Status check_shape(const char* op, const char* what, Span<const int64_t> sizes);
// check_shape, then *numel = the product of the sizes.
KILN_INTERNAL_API Status shape_numel(const char* op, const char* what, Span<const int64_t> sizes, int64_t* numel);
// A tensor argument a kernel may index freely: a valid shape, and data for
// numel * element size bytes within its capacity.
KILN_INTERNAL_API Status check_tensor(const char* op, const char* name, const Tensor& t);

}  // namespace kernels
}  // namespace kiln
