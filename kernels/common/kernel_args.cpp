// Kernel argument getters and checks (kernel_args.h).
#include "kernel_args.h"

#include <algorithm>
#include <limits>

// Exactly one library of a package holds the argument helpers (docs/architecture.md, "One GEMM").
KILN_KERNEL_CODE_NOTE("kernel_args")

namespace kiln {
namespace kernels {

namespace {

const char* kind_of(const Value* v) { return v == nullptr ? "null" : value_kind_name(v->kind); }

Status wrong_kind(const char* op, size_t i, const char* name, const char* expected, const Value* v) {
  return Status(Error::KernelFailure,
                format("%s: argument %zu (%s) must be %s, got %s", op, i, name, expected, kind_of(v)));
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
  const int64_t numel = numel_of(t.sizes());
  const size_t elem = element_size(t.dtype());
  if (numel > 0 && elem > 0 && static_cast<uint64_t>(numel) <= std::numeric_limits<size_t>::max() / elem)
    n = std::max(n, static_cast<size_t>(numel) * elem);
  r.end = n > std::numeric_limits<uintptr_t>::max() - r.begin ? std::numeric_limits<uintptr_t>::max() : r.begin + n;
  return r;
}

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
  KILN_CHECK_OR_RETURN(in.size() == n_in, KernelFailure, "%s: expected %zu arguments, got %zu", op, n_in, in.size());
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

Status prepare_tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  const Value* v = in[i];
  if (v == nullptr || !v->is_tensor() || v->tensor == nullptr) return wrong_kind(op, i, name, "a Tensor", v);
  int64_t numel;
  KILN_RETURN_IF_ERROR(shape_numel(op, name, v->tensor->sizes(), &numel));
  *out = v->tensor;
  return Status::ok();
}

Status optional_tensor_arg(const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  const Value* v = in[i];
  if (v != nullptr && v->is_none()) {
    *out = nullptr;
    return Status::ok();
  }
  if (v == nullptr || !v->is_tensor() || v->tensor == nullptr) return wrong_kind(op, i, name, "a Tensor or None", v);
  KILN_RETURN_IF_ERROR(check_tensor(op, name, *v->tensor));
  *out = v->tensor;
  return Status::ok();
}

Status tensor_arg(bool at_prepare, const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  return at_prepare ? prepare_tensor_arg(op, in, i, name, out) : tensor_arg(op, in, i, name, out);
}

Status optional_tensor_arg(bool at_prepare, const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  if (!at_prepare) return optional_tensor_arg(op, in, i, name, out);
  const Value* v = in[i];
  if (v != nullptr && v->is_none()) {
    *out = nullptr;
    return Status::ok();
  }
  if (v == nullptr || !v->is_tensor() || v->tensor == nullptr) return wrong_kind(op, i, name, "a Tensor or None", v);
  return prepare_tensor_arg(op, in, i, name, out);
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
  KILN_CHECK_OR_RETURN(v->ints.size == 0 || v->ints.data != nullptr, KernelFailure, "%s: argument %zu (%s) has no data",
                       op, i, name);
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

Status pair_arg(const char* op, Inputs in, size_t i, const char* name, int64_t out[2], bool empty_ok, bool* empty) {
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
  KILN_CHECK_OR_RETURN(list.size() == 1 || list.size() == 2, KernelFailure, "%s: %s must have 1 or 2 elements, got %zu",
                       op, name, list.size());
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
  KILN_CHECK_OR_RETURN(code >= 0 && code < kNumScalarTypes, KernelFailure, "%s: %s %lld is not a dtype code", op, name,
                       static_cast<long long>(code));
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

Status wrap_dim(const char* op, int64_t dim, int rank, int64_t* out) {
  const int64_t r = rank > 0 ? rank : 1;
  KILN_CHECK_OR_RETURN(dim >= -r && dim < r, KernelFailure, "%s: dim %lld out of range for a %d-D tensor", op,
                       static_cast<long long>(dim), rank);
  *out = dim < 0 ? dim + r : dim;
  return Status::ok();
}

Status check_residual(const char* op, const Tensor* residual, const Tensor& y) {
  if (residual == nullptr) return Status::ok();
  KILN_RETURN_IF_ERROR(check_dtype(op, *residual, "residual", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(same_sizes(residual->sizes(), y.sizes()), KernelFailure,
                       "%s: residual must have the output's shape %s, got %s", op, describe_sizes(y.sizes()).c_str(),
                       describe(*residual).c_str());
  return Status::ok();
}

Status resize_output(const char* op, Tensor* out, Span<const int64_t> sizes) {
  KILN_RETURN_IF_ERROR(check_shape(op, "output shape", sizes));
  Status s = out->resize(sizes);
  if (!s.is_ok()) return Status(Error::KernelFailure, format("%s: cannot resize output: %s", op, s.message().c_str()));
  return Status::ok();
}

Status resize_data_dependent(const char* op, const char* what, Tensor* out, Span<const int64_t> sizes) {
  int64_t numel = 0;
  KILN_RETURN_IF_ERROR(shape_numel(op, what, sizes, &numel));
  const size_t bytes = static_cast<size_t>(numel) * element_size(out->dtype());
  KILN_CHECK_OR_RETURN(bytes <= out->capacity(), KernelFailure,
                       "%s: the %s has %s elements (%zu bytes), more than the %zu bytes the program planned for "
                       "its bound",
                       op, what, describe_sizes(sizes).c_str(), bytes, out->capacity());
  return resize_output(op, out, sizes);
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

}  // namespace kernels
}  // namespace kiln
