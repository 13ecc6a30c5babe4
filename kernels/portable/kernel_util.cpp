// Shared helpers of the portable kernels (argument checks, broadcasting, strided copies).
#include "kernel_util.h"

#include <cmath>

namespace kiln {
namespace portable {
namespace {

const char* kind_of(const Value* v) { return v == nullptr ? "null" : value_kind_name(v->kind); }

Status wrong_kind(const char* op, size_t i, const char* name, const char* expected, const Value* v) {
  return Status(Error::KernelFailure,
                format("%s: argument %zu (%s) must be %s, got %s", op, i, name, expected, kind_of(v)));
}

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

// [begin, end) byte range of the memory a tensor may touch.
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool overlaps(const ByteRange& o) const { return begin < end && o.begin < o.end && begin < o.end && o.begin < end; }
};

ByteRange bytes_of(const Tensor& t) {
  ByteRange r;
  if (t.data() == nullptr) return r;
  r.begin = reinterpret_cast<uintptr_t>(t.data());
  // An input's current bytes never exceed its capacity (check_tensor), but be safe.
  size_t n = t.capacity();
  const int64_t numel = saturating_prod(t.sizes().data(), t.sizes().size());
  const size_t elem = element_size(t.dtype());
  if (numel > 0 && elem > 0 && static_cast<uint64_t>(numel) <= std::numeric_limits<size_t>::max() / elem)
    n = std::max(n, static_cast<size_t>(numel) * elem);
  r.end = n > std::numeric_limits<uintptr_t>::max() - r.begin ? std::numeric_limits<uintptr_t>::max() : r.begin + n;
  return r;
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

namespace {

// check_no_alias; with `self_ok`, output 0 may be exactly argument 0.
Status no_alias(const char* op, Inputs in, Outputs out, bool self_ok) {
  for (size_t o = 0; o < out.size(); ++o) {
    const Tensor* y = out[o];
    if (y == nullptr) continue;
    const ByteRange yr = bytes_of(*y);
    auto check = [&](const Tensor* t, size_t i) -> Status {
      if (t == nullptr) return Status::ok();
      if (self_ok && o == 0 && i == 0 && t->data() == y->data() && t->data() != nullptr && t->dtype() == y->dtype())
        return Status::ok();
      KILN_CHECK_OR_RETURN(t != y && !yr.overlaps(bytes_of(*t)), KernelFailure,
                           "%s: output %zu shares memory with argument %zu", op, o, i);
      return Status::ok();
    };
    for (size_t i = 0; i < in.size(); ++i) {
      const Value* v = in[i];
      if (v == nullptr) continue;
      if (v->kind == ValueKind::Tensor) {
        KILN_RETURN_IF_ERROR(check(v->tensor, i));
      } else if (v->kind == ValueKind::TensorList && v->tensors.data != nullptr) {
        for (Tensor* t : v->as_tensors()) KILN_RETURN_IF_ERROR(check(t, i));
      }
    }
  }
  return Status::ok();
}

Status arity(const char* op, Inputs in, Outputs out, size_t n_in, size_t n_out, bool extra_outputs_ok) {
  KILN_CHECK_OR_RETURN(in.size() == n_in, KernelFailure, "%s: expected %zu arguments, got %zu", op, n_in,
                       in.size());
  KILN_CHECK_OR_RETURN(extra_outputs_ok ? out.size() >= n_out : out.size() == n_out, KernelFailure,
                       "%s: expected %s%zu output(s), got %zu", op, extra_outputs_ok ? "at least " : "", n_out,
                       out.size());
  for (size_t i = 0; i < n_out; ++i)
    KILN_CHECK_OR_RETURN(out[i] != nullptr, KernelFailure, "%s: output %zu is null", op, i);
  return Status::ok();
}

}  // namespace

Status check_no_alias(const char* op, Inputs in, Outputs out) { return no_alias(op, in, out, false); }

Status check_arity(const char* op, Inputs in, Outputs out, size_t n_in, size_t n_out, bool extra_outputs_ok) {
  KILN_RETURN_IF_ERROR(arity(op, in, out, n_in, n_out, extra_outputs_ok));
  return check_no_alias(op, in, out);
}

Status check_arity_inplace(const char* op, Inputs in, Outputs out, size_t n_in, size_t n_out, bool* in_place) {
  KILN_RETURN_IF_ERROR(arity(op, in, out, n_in, n_out, false));
  KILN_RETURN_IF_ERROR(no_alias(op, in, out, true));
  const Value* v = n_in > 0 ? in[0] : nullptr;
  *in_place = v != nullptr && v->kind == ValueKind::Tensor && v->tensor != nullptr && v->tensor->data() != nullptr &&
              v->tensor->data() == out[0]->data();
  return Status::ok();
}

Status tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  const Value* v = in[i];
  if (v == nullptr || !v->is_tensor() || v->tensor == nullptr) return wrong_kind(op, i, name, "a Tensor", v);
  KILN_RETURN_IF_ERROR(check_tensor(op, name, *v->tensor));
  *out = v->tensor;
  return Status::ok();
}

Status optional_tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  const Value* v = in[i];
  if (v != nullptr && v->is_none()) {
    *out = nullptr;
    return Status::ok();
  }
  if (v == nullptr || !v->is_tensor() || v->tensor == nullptr)
    return wrong_kind(op, i, name, "a Tensor or None", v);
  KILN_RETURN_IF_ERROR(check_tensor(op, name, *v->tensor));
  *out = v->tensor;
  return Status::ok();
}

Status int_arg(const char* op, Inputs in, size_t i, const char* name, int64_t* out) {
  const Value* v = in[i];
  if (v == nullptr || v->kind != ValueKind::Int) return wrong_kind(op, i, name, "an Int", v);
  *out = v->i;
  return Status::ok();
}

Status optional_int_arg(const char* op, Inputs in, size_t i, const char* name, int64_t* out, bool* present) {
  const Value* v = in[i];
  if (v != nullptr && v->is_none()) {
    *present = false;
    return Status::ok();
  }
  if (v == nullptr || v->kind != ValueKind::Int) return wrong_kind(op, i, name, "an Int or None", v);
  *out = v->i;
  *present = true;
  return Status::ok();
}

Status bool_arg(const char* op, Inputs in, size_t i, const char* name, bool* out) {
  const Value* v = in[i];
  if (v == nullptr || v->kind != ValueKind::Bool) return wrong_kind(op, i, name, "a Bool", v);
  *out = v->b;
  return Status::ok();
}

Status scalar_arg(const char* op, Inputs in, size_t i, const char* name, double* out) {
  const Value* v = in[i];
  if (v == nullptr || !v->is_scalar()) return wrong_kind(op, i, name, "a Scalar (Int, Double or Bool)", v);
  *out = v->to_double();
  return Status::ok();
}

Status optional_scalar_arg(const char* op, Inputs in, size_t i, const char* name, double* out, bool* present) {
  const Value* v = in[i];
  if (v != nullptr && v->is_none()) {
    *present = false;
    return Status::ok();
  }
  if (v == nullptr || !v->is_scalar()) return wrong_kind(op, i, name, "a Scalar or None", v);
  *out = v->to_double();
  *present = true;
  return Status::ok();
}

Status int_list_arg(const char* op, Inputs in, size_t i, const char* name, Span<const int64_t>* out) {
  const Value* v = in[i];
  if (v == nullptr || v->kind != ValueKind::IntList) return wrong_kind(op, i, name, "an int list", v);
  KILN_CHECK_OR_RETURN(v->ints.size == 0 || v->ints.data != nullptr, KernelFailure,
                       "%s: argument %zu (%s) has no data", op, i, name);
  // The list points into the program file; a corrupt file may leave it
  // misaligned, and reading a misaligned int64 is undefined behaviour.
  KILN_CHECK_OR_RETURN(v->ints.size == 0 || reinterpret_cast<uintptr_t>(v->ints.data) % alignof(int64_t) == 0,
                       KernelFailure, "%s: argument %zu (%s) is misaligned", op, i, name);
  *out = v->as_ints();
  return Status::ok();
}

Status optional_int_list_arg(const char* op, Inputs in, size_t i, const char* name, Span<const int64_t>* out,
                             bool* present) {
  const Value* v = in[i];
  if (v != nullptr && v->is_none()) {
    *present = false;
    *out = {};
    return Status::ok();
  }
  *present = true;
  return int_list_arg(op, in, i, name, out);
}

Status pair_arg(const char* op, Inputs in, size_t i, const char* name, int64_t out[2], bool empty_ok,
                bool* empty) {
  const Value* v = in[i];
  if (empty != nullptr) *empty = false;
  if (v != nullptr && v->kind == ValueKind::Int) {
    out[0] = out[1] = v->i;
    return Status::ok();
  }
  Span<const int64_t> list;
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, i, name, &list));
  if (list.size() == 0 && empty_ok) {
    if (empty != nullptr) *empty = true;
    out[0] = out[1] = 0;
    return Status::ok();
  }
  KILN_CHECK_OR_RETURN(list.size() == 1 || list.size() == 2, KernelFailure,
                       "%s: %s must have 1 or 2 elements, got %zu", op, name, list.size());
  out[0] = list[0];
  out[1] = list[list.size() - 1];
  return Status::ok();
}

Status string_arg(const char* op, Inputs in, size_t i, const char* name, const char** data, size_t* size) {
  const Value* v = in[i];
  if (v == nullptr || v->kind != ValueKind::String) return wrong_kind(op, i, name, "a String", v);
  *data = v->str.data != nullptr ? v->str.data : "";
  *size = v->str.data != nullptr ? v->str.size : 0;
  return Status::ok();
}

Status optional_dtype_arg(const char* op, Inputs in, size_t i, const char* name, ScalarType* out, bool* present) {
  int64_t code = 0;
  KILN_RETURN_IF_ERROR(optional_int_arg(op, in, i, name, &code, present));
  if (!*present) return Status::ok();
  KILN_CHECK_OR_RETURN(code >= 0 && code < kNumScalarTypes, KernelFailure, "%s: %s %lld is not a dtype code",
                       op, name, static_cast<long long>(code));
  *out = static_cast<ScalarType>(code);
  return Status::ok();
}

Status check_dtype(const char* op, const Tensor& t, const char* name, ScalarType expected) {
  KILN_CHECK_OR_RETURN(t.dtype() == expected, KernelFailure, "%s: %s must be %s, got %s", op, name,
                       scalar_type_name(expected), describe(t).c_str());
  return Status::ok();
}

Status check_same_dtype(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  KILN_CHECK_OR_RETURN(a.dtype() == b.dtype(), KernelFailure, "%s: %s and %s must have the same dtype, got %s and %s",
                       op, an, bn, describe(a).c_str(), describe(b).c_str());
  return Status::ok();
}

std::string describe_ints(Span<const int64_t> values) {
  constexpr size_t kShown = kMaxDims + 1;
  if (values.size() <= kShown) return describe_sizes(values);
  std::string s = describe_sizes(Span<const int64_t>(values.data(), kShown));
  s.pop_back();
  return s + format(", ... (%zu values)]", values.size());
}

Status wrap_dim(const char* op, int64_t dim, int rank, int64_t* out) {
  const int64_t r = rank > 0 ? rank : 1;
  KILN_CHECK_OR_RETURN(dim >= -r && dim < r, KernelFailure, "%s: dim %lld out of range for a %d-D tensor", op,
                       static_cast<long long>(dim), rank);
  *out = dim < 0 ? dim + r : dim;
  return Status::ok();
}

Status resize_output(const char* op, Tensor* out, Span<const int64_t> sizes) {
  KILN_RETURN_IF_ERROR(check_shape(op, "output shape", sizes));
  Status s = out->resize(sizes);
  if (!s.is_ok()) return Status(Error::KernelFailure, format("%s: cannot resize output: %s", op, s.message().c_str()));
  return Status::ok();
}

Status unary_setup(const char* op, Inputs in, Outputs out, size_t n_in, const Tensor** x) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, n_in, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", x));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, **x, "self", *out[0], "output"));
  return resize_output(op, out[0], (*x)->sizes());
}

Status copy_setup(const char* op, Inputs in, Outputs out, size_t n_in, const Tensor** x) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, n_in, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", x));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, **x, "self", *out[0], "output"));
  KILN_CHECK_OR_RETURN(element_size((*x)->dtype()) > 0, KernelFailure, "%s: unknown dtype in %s", op,
                       describe(**x).c_str());
  return Status::ok();
}

void contiguous_strides(Span<const int64_t> sizes, int64_t* strides) {
  int64_t s = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= sizes[d];
  }
}

int64_t pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                            bool ceil_mode) {
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
  KILN_CHECK_OR_RETURN(in >= 1 && in <= kMaxElements, KernelFailure, "%s: input %s %lld must be in [1, %lld]", op,
                       axis, static_cast<long long>(in), static_cast<long long>(kMaxElements));
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

Status broadcast_shapes(const char* op, const Tensor* const* tensors, int count, Dims* out) {
  int nd = 0;
  for (int k = 0; k < count; ++k) nd = std::max(nd, tensors[k]->dim());
  out->n = nd;
  for (int d = 0; d < nd; ++d) {
    int64_t size = 1;
    for (int k = 0; k < count; ++k) {
      const Tensor& t = *tensors[k];
      const int td = d - (nd - t.dim());
      if (td < 0) continue;
      const int64_t s = t.sizes()[td];
      if (s == 1) continue;
      if (size != 1 && size != s) {
        std::string shapes;
        for (int j = 0; j < count; ++j) shapes += (j ? " and " : "") + describe(*tensors[j]);
        return Status(Error::KernelFailure, format("%s: shapes %s are not broadcastable", op, shapes.c_str()));
      }
      size = s;
    }
    (*out)[d] = size;
  }
  return Status::ok();
}

namespace {

template <typename T>
void strided_copy_typed(T* dst, const T* src, const Dims& sizes, const int64_t* strides) {
  const int nd = sizes.n;
  if (nd == 0) {
    *dst = *src;
    return;
  }
  const int64_t inner = sizes[nd - 1], is = strides[nd - 1];
  const int64_t rows = sizes.numel() / std::max<int64_t>(inner, 1);
  if (inner == 0 || rows == 0) return;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / inner);
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxDims] = {};
    int64_t off = 0, rem = begin;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
      off += idx[d] * strides[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      T* o = dst + r * inner;
      const T* s = src + off;
      if (is == 1) {
        std::memcpy(o, s, static_cast<size_t>(inner) * sizeof(T));
      } else {
        for (int64_t i = 0; i < inner; ++i) o[i] = s[i * is];
      }
      for (int d = nd - 2; d >= 0; --d) {
        off += strides[d];
        if (++idx[d] < sizes[d]) break;
        off -= sizes[d] * strides[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

void strided_copy(void* dst, const void* src, size_t elem, const Dims& in_sizes, const int64_t* in_strides) {
  // Drop size-1 dims and merge dims the source walks contiguously, so that
  // rows get as long as possible (slices and cats become plain memcpys).
  Dims sizes;
  int64_t strides[kMaxDims];
  for (int d = 0; d < in_sizes.n; ++d) {
    if (in_sizes[d] == 0) return;
    if (in_sizes[d] == 1) continue;
    if (sizes.n > 0 && strides[sizes.n - 1] == in_strides[d] * in_sizes[d]) {
      sizes[sizes.n - 1] *= in_sizes[d];
      strides[sizes.n - 1] = in_strides[d];
    } else {
      strides[sizes.n] = in_strides[d];
      sizes.push(in_sizes[d]);
    }
  }
  switch (elem) {
    case 1: strided_copy_typed(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), sizes, strides); break;
    case 2: strided_copy_typed(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), sizes, strides); break;
    case 4: strided_copy_typed(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), sizes, strides); break;
    default: strided_copy_typed(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), sizes, strides); break;
  }
}

}  // namespace portable
}  // namespace kiln
