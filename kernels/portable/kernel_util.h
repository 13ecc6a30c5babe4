// Shared helpers of the portable kernels: argument checks, dims, broadcasting, dtype dispatch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kiln/kernel.h"

namespace kiln {
namespace portable {

using Inputs = Span<const Value* const>;
using Outputs = Span<Tensor* const>;

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
Status checked_mul(const char* op, const char* what, int64_t a, int64_t b, int64_t* out);
Status checked_add(const char* op, const char* what, int64_t a, int64_t b, int64_t* out);

// Saturating product of non-negative values, for work estimates (grains) only.
inline int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return mul_overflows(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
// parallel_for grain for items that each cost `work` elementary steps.
inline int64_t grain_for(int64_t work) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(work, 1)); }

// floor(a * b / c), or the ceiling when `round_up`, for a, b >= 0 and c > 0,
// without overflowing the product (the result must fit: a <= c makes it <= b).
int64_t mul_div(int64_t a, int64_t b, int64_t c, bool round_up);

// Products of sizes, saturating at INT64_MAX instead of overflowing (0 if any
// size is 0). Exact for shapes that passed check_shape.
int64_t numel_of(Span<const int64_t> sizes);
// Product of sizes[begin:end].
int64_t prod(Span<const int64_t> sizes, int begin, int end);

// A valid shape: at most kMaxDims sizes, each >= 0, and the product of the
// non-zero sizes at most kMaxElements. `what` names the shape in the message.
Status check_shape(const char* op, const char* what, Span<const int64_t> sizes);
// check_shape, then *numel = the product of the sizes.
Status shape_numel(const char* op, const char* what, Span<const int64_t> sizes, int64_t* numel);
// A tensor argument a kernel may index freely: a valid shape, and data for
// numel * element size bytes within its capacity.
Status check_tensor(const char* op, const char* name, const Tensor& t);

// ---- argument checks: each returns KernelFailure naming `op` and the argument.

// Also rejects outputs that share memory with a tensor argument (see check_no_alias).
Status check_arity(const char* op, Inputs in, Outputs out, size_t n_in, size_t n_out,
                   bool extra_outputs_ok = false);
// Outputs may not share a byte with any tensor argument (tensor lists included),
// nor be the same Tensor. The memory planner never lets them (an instruction's
// inputs and outputs have overlapping lifetimes), so only a corrupt program
// does; a kernel resizing such an output would change its own input under it.
Status check_no_alias(const char* op, Inputs in, Outputs out);
// check_arity for kernels that may update `self` (argument 0) in place: output 0
// may be exactly self (same data pointer and dtype; the runtime aliases them to
// update state such as a KV cache without a copy). Any other sharing, and any
// partial overlap with self, is still refused. *in_place tells which case it is.
Status check_arity_inplace(const char* op, Inputs in, Outputs out, size_t n_in, size_t n_out, bool* in_place);
// Tensor arguments are checked with check_tensor.
Status tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out);
// None -> *out = nullptr.
Status optional_tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out);
Status int_arg(const char* op, Inputs in, size_t i, const char* name, int64_t* out);
// None -> *present = false.
Status optional_int_arg(const char* op, Inputs in, size_t i, const char* name, int64_t* out, bool* present);
Status bool_arg(const char* op, Inputs in, size_t i, const char* name, bool* out);
// Int, Double or Bool as a double.
Status scalar_arg(const char* op, Inputs in, size_t i, const char* name, double* out);
Status optional_scalar_arg(const char* op, Inputs in, size_t i, const char* name, double* out, bool* present);
Status int_list_arg(const char* op, Inputs in, size_t i, const char* name, Span<const int64_t>* out);
// None -> *present = false.
Status optional_int_list_arg(const char* op, Inputs in, size_t i, const char* name, Span<const int64_t>* out,
                             bool* present);
// An int[2] parameter (kernel_size, stride, ...): length 1 is repeated, a bare
// Int is accepted too; length 0 is allowed only when `empty_ok` (then *empty = true).
Status pair_arg(const char* op, Inputs in, size_t i, const char* name, int64_t out[2], bool empty_ok = false,
                bool* empty = nullptr);
Status string_arg(const char* op, Inputs in, size_t i, const char* name, const char** data, size_t* size);
// An optional ScalarType argument (None or Int holding a kiln ScalarType code).
Status optional_dtype_arg(const char* op, Inputs in, size_t i, const char* name, ScalarType* out, bool* present);

Status check_dtype(const char* op, const Tensor& t, const char* name, ScalarType expected);
Status check_same_dtype(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn);
// describe_sizes for an int list from the file, which may be arbitrarily long:
// at most kMaxDims + 1 values are printed, then the count.
std::string describe_ints(Span<const int64_t> values);
// Equal shapes.
inline bool same_sizes(Span<const int64_t> a, Span<const int64_t> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}
// Wraps a possibly negative dim into [0, rank); rank 0 accepts 0 and -1 like PyTorch.
Status wrap_dim(const char* op, int64_t dim, int rank, int64_t* out);
// Resizes an output after check_shape (so no product of its sizes overflows),
// naming the op when it does not fit.
Status resize_output(const char* op, Tensor* out, Span<const int64_t> sizes);

// ---- sliding windows (conv2d, max_pool2d, avg_pool2d)

// Bound of every window parameter (kernel size, stride, padding, dilation):
// far beyond any real model, and small enough that no window arithmetic on
// inputs of at most kMaxElements elements can overflow int64.
constexpr int64_t kMaxWindowParam = int64_t{1} << 30;

// Output length of a pooling window sweep (PyTorch's pooling_output_shape):
// ceil_mode rounds up, but the last window must start inside the input or its
// left padding. May be <= 0. Precondition: parameters validated as window_geometry does.
int64_t pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                            bool ceil_mode);

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

// A 2-D pooling input: [C, H, W] or [N, C, H, W], seen as `planes` H x W planes.
struct PoolInput {
  int64_t planes = 0, h = 0, w = 0;
  bool batched = false;
};
Status pool_input(const char* op, const Tensor& x, PoolInput* out);
// Output sizes [N,] C, oh, ow for a pooling input.
Dims pool_output_sizes(const Tensor& x, int64_t oh, int64_t ow);

// ---- broadcasting

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
    for (int k = 0; k < N && merge; ++k)
      merge = p.strides[k][p.ndim - 1] == strides[k][d] * sizes[d];
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

// ---- dtype dispatch

// Calls fn(T{}) with the C++ type of `t` for the listed dtypes; false if not listed.
template <typename F>
bool dispatch_real(ScalarType t, F&& fn) {  // f32 f64 i64 i32
  switch (t) {
    case ScalarType::Float32: fn(float{}); return true;
    case ScalarType::Float64: fn(double{}); return true;
    case ScalarType::Int64: fn(int64_t{}); return true;
    case ScalarType::Int32: fn(int32_t{}); return true;
    default: return false;
  }
}

template <typename F>
bool dispatch_all(ScalarType t, F&& fn) {  // every dtype with a C++ type (no f16/bf16)
  switch (t) {
    case ScalarType::Bool: fn(bool{}); return true;
    case ScalarType::UInt8: fn(uint8_t{}); return true;
    case ScalarType::Int8: fn(int8_t{}); return true;
    default: return dispatch_real(t, fn);
  }
}

// Common prologue of dtype-agnostic copy kernels: self is a tensor, the output
// has its dtype, and the dtype has a known element size.
Status copy_setup(const char* op, Inputs in, Outputs out, size_t n_in, const Tensor** x);
// Row-major element strides of `t`.
void contiguous_strides(Span<const int64_t> sizes, int64_t* strides);

// ---- elementwise loops

// Reads one element. A bool is read as a byte and normalised: memory from a
// corrupt program may hold any byte, and loading a bool that is not 0 or 1 is
// undefined behaviour.
template <typename T>
inline T load(const T* p) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b;
    std::memcpy(&b, p, 1);
    return b != 0;
  } else {
    return *p;
  }
}

// Two's-complement wrap-around a + b for integer T (no signed-overflow UB); plain + otherwise.
template <typename T>
inline T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
  } else {
    return a + b;
  }
}

// Common prologue of `y = f(x)` kernels: arity, x is a tensor of one of the
// dtypes `dispatch` accepts (checked by the caller), y has x's dtype and shape.
Status unary_setup(const char* op, Inputs in, Outputs out, size_t n_in, const Tensor** x);

// y[i] = f(x[i]) over contiguous tensors of equal numel, on the thread pool.
template <typename T, typename U = T, typename F>
void map_elements(const Tensor& x, Tensor& y, F f) {
  const T* xp = x.data_as<const T>();
  U* yp = y.data_as<U>();
  parallel_for(x.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) yp[i] = f(load(xp + i));
  });
}

// y = f(a, b) with numpy broadcasting into y's (already resized) shape `out`.
// The row loop is specialised for the stride patterns that vectorise.
template <typename T, typename U = T, typename F>
void binary_map(const Tensor& a, const Tensor& b, Tensor& y, const Dims& out, F f) {
  const Tensor* ins[2] = {&a, &b};
  const BroadcastPlan<2> plan = make_broadcast_plan<2>(out, ins);
  const T* ap = a.data_as<const T>();
  const T* bp = b.data_as<const T>();
  U* yp = y.data_as<U>();
  const int64_t sa = plan.strides[0][plan.ndim - 1], sb = plan.strides[1][plan.ndim - 1];
  parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t n) {
    const T* x = ap + off[0];
    const T* z = bp + off[1];
    U* r = yp + o;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) r[i] = f(x[i], z[i]);
    } else if (sa == 0 && sb == 1) {
      const T xv = *x;
      for (int64_t i = 0; i < n; ++i) r[i] = f(xv, z[i]);
    } else if (sa == 1 && sb == 0) {
      const T zv = *z;
      for (int64_t i = 0; i < n; ++i) r[i] = f(x[i], zv);
    } else {
      for (int64_t i = 0; i < n; ++i) r[i] = f(x[i * sa], z[i * sb]);
    }
  });
}

// Converts a double to T without undefined behaviour: NaN and out-of-range
// values saturate for integer T.
template <typename T>
T saturate_cast(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return 0;
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::min();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Converts one element between dtypes as PyTorch's casts do, minus the UB:
// float -> integer saturates (NaN -> 0), anything -> bool is `!= 0`.
template <typename U, typename T>
U convert(T v) {
  if constexpr (std::is_same_v<U, bool>) {
    return v != T(0);
  } else if constexpr (std::is_floating_point_v<T> && std::is_integral_v<U>) {
    return saturate_cast<U>(static_cast<double>(v));
  } else {
    return static_cast<U>(v);
  }
}

// Copies `n` elements of `elem` bytes each (dtype-agnostic kernels work on bytes).
inline void copy_elements(void* dst, const void* src, int64_t n, size_t elem) {
  if (n > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(n) * elem);
}

// Copies a strided view of `src` (sizes/strides in elements, up to kMaxDims dims)
// into contiguous `dst`; used by permute, expand and slice.
void strided_copy(void* dst, const void* src, size_t elem, const Dims& sizes, const int64_t* strides);

}  // namespace portable
}  // namespace kiln
