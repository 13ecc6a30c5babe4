// Tensor factories: arange (start_step, start, default), full, full_like, scalar_tensor. The output
// dtype is the planned output's (the exporter resolves dtype=None); sizes come from the arguments on
// every call, so they may change between calls within the planned capacity.
#include <cmath>

#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

bool is_float(ScalarType t) { return t == ScalarType::Float32 || t == ScalarType::Float64; }

// Arguments [first, first + 4) are dtype, layout, device, pin_memory (+ memory_format when `n` is 5):
// layout/device/memory format have one meaning here; dtype, when given, must be the output's.
Status factory_options(const char* op, Inputs in, size_t first, size_t n, const Tensor& y) {
  ScalarType dtype;
  bool has_dtype;
  KILN_RETURN_IF_ERROR(optional_dtype_arg(op, in, first, "dtype", &dtype, &has_dtype));
  KILN_CHECK_OR_RETURN(!has_dtype || dtype == y.dtype(), KernelFailure, "%s: dtype %s does not match the output %s", op,
                       scalar_type_name(dtype), describe(y).c_str());
  for (size_t i = first + 1; i < first + n; ++i) {
    const Value* v = in[i];
    KILN_CHECK_OR_RETURN(v != nullptr && (v->is_none() || v->kind == ValueKind::Int || v->kind == ValueKind::Bool ||
                                          v->kind == ValueKind::String),
                         KernelFailure, "%s: argument %zu must be None, an Int, a Bool or a String", op, i);
  }
  return Status::ok();
}

Status scalar_value(const char* op, Inputs in, size_t i, const char* name, const Value** v) {
  double unused;
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, i, name, &unused));
  *v = in[i];
  return Status::ok();
}

// A Scalar as T: Int values exactly for integer T, everything else through a saturating cast.
template <typename T>
T scalar_as(const Value& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.kind == ValueKind::Int) {
      if (v.i < static_cast<int64_t>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
      if (v.i > static_cast<int64_t>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
      return static_cast<T>(v.i);
    }
  }
  return saturate_cast<T>(v.to_double());
}

Status fill(const char* op, Tensor& y, const Value& v) {
  const bool ok = dispatch_all(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T value = scalar_as<T>(v);
    T* yp = y.data_as<T>();
    parallel_for(y.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) yp[i] = value;
    });
  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: unsupported output dtype %s", op, describe(y).c_str());
  return Status::ok();
}

// start + i * step for i in [0, n), sizes computed like ATen's arange.
Status arange(const char* op, const Value* start, const Value* end, const Value* step, Tensor& y) {
  const ScalarType t = y.dtype();
  if (is_float(t)) {
    const double s = start->to_double(), e = end->to_double(), st = step->to_double();
    KILN_CHECK_OR_RETURN(std::isfinite(s) && std::isfinite(e) && std::isfinite(st), KernelFailure,
                         "%s: start %g, end %g and step %g must be finite", op, s, e, st);
    KILN_CHECK_OR_RETURN(st != 0, KernelFailure, "%s: step must be nonzero", op);
    KILN_CHECK_OR_RETURN((st > 0 && e >= s) || (st < 0 && e <= s), KernelFailure,
                         "%s: end %g is on the wrong side of start %g for step %g", op, e, s, st);
    const double n = std::ceil((e - s) / st);
    KILN_CHECK_OR_RETURN(n >= 0 && n <= static_cast<double>(kMaxElements), KernelFailure,
                         "%s: %g elements is too many (start %g, end %g, step %g)", op, n, s, e, st);
    const int64_t len = static_cast<int64_t>(n);
    KILN_RETURN_IF_ERROR(resize_output(op, &y, Span<const int64_t>(&len, 1)));
    dispatch_real(t, [&](auto tag) {
      using T = decltype(tag);
      T* yp = y.data_as<T>();
      parallel_for(len, kElementwiseGrain, [&](int64_t b, int64_t en) {
        for (int64_t i = b; i < en; ++i) yp[i] = static_cast<T>(s + st * static_cast<double>(i));
      });
    });
    return Status::ok();
  }
  KILN_CHECK_OR_RETURN(
      t == ScalarType::Int64 || t == ScalarType::Int32 || t == ScalarType::Int8 || t == ScalarType::UInt8,
      KernelFailure, "%s: unsupported output dtype %s", op, describe(y).c_str());
  auto as_int = [](const Value* v, int64_t* out) {
    if (v->kind == ValueKind::Int) return *out = v->i, true;
    const double d = v->to_double();
    if (!std::isfinite(d) || d < -9.2e18 || d > 9.2e18) return false;
    *out = static_cast<int64_t>(d);  // truncates, as ATen's Scalar::to<int64_t>
    return true;
  };
  int64_t s, e, st, diff;
  KILN_CHECK_OR_RETURN(as_int(start, &s) && as_int(end, &e) && as_int(step, &st), KernelFailure,
                       "%s: start, end and step must be finite and fit in int64", op);
  KILN_CHECK_OR_RETURN(st != 0, KernelFailure, "%s: step must be nonzero", op);
  KILN_CHECK_OR_RETURN((st > 0 && e >= s) || (st < 0 && e <= s), KernelFailure,
                       "%s: end %lld is on the wrong side of start %lld for step %lld", op, static_cast<long long>(e),
                       static_cast<long long>(s), static_cast<long long>(st));
  KILN_CHECK_OR_RETURN(!__builtin_sub_overflow(e, s, &diff), KernelFailure, "%s: end - start overflows", op);
  // diff and st have the same sign (or diff is 0): n = ceil(diff / st).
  const int64_t len = diff / st + (diff % st != 0 ? 1 : 0);
  KILN_RETURN_IF_ERROR(resize_output(op, &y, Span<const int64_t>(&len, 1)));
  dispatch_real(t, [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_as<T>();
    // i * st stays within [0, diff): no overflow.
    parallel_for(len, kElementwiseGrain, [&](int64_t b, int64_t en) {
      for (int64_t i = b; i < en; ++i) yp[i] = static_cast<T>(s + i * st);
    });
  });
  if (t == ScalarType::Int8 || t == ScalarType::UInt8) {
    const bool narrow = t == ScalarType::Int8;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t v = s + i * st;
      if (narrow)
        y.data_as<int8_t>()[i] = static_cast<int8_t>(v);
      else
        y.data_as<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
  }
  return Status::ok();
}

}  // namespace

Status arange_start_step_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::arange.start_step";
  const Value *start, *end, *step;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 0, "start", &start));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 1, "end", &end));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 2, "step", &step));
  KILN_RETURN_IF_ERROR(factory_options(op, in, 3, 4, *out[0]));
  return arange(op, start, end, step, *out[0]);
}

Status arange_start_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::arange.start";
  const Value *start, *end;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 0, "start", &start));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 1, "end", &end));
  KILN_RETURN_IF_ERROR(factory_options(op, in, 2, 4, *out[0]));
  Value one;
  one.kind = ValueKind::Int;
  one.i = 1;
  return arange(op, start, end, &one, *out[0]);
}

Status arange_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::arange.default";
  const Value* end;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 1));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 0, "end", &end));
  KILN_RETURN_IF_ERROR(factory_options(op, in, 1, 4, *out[0]));
  Value zero, one;
  zero.kind = one.kind = ValueKind::Int;
  zero.i = 0;
  one.i = 1;
  return arange(op, &zero, end, &one, *out[0]);
}

Status full_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::full.default";
  Span<const int64_t> size;
  const Value* value;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  KILN_RETURN_IF_ERROR(int_list_arg(op, in, 0, "size", &size));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 1, "fill_value", &value));
  KILN_RETURN_IF_ERROR(factory_options(op, in, 2, 4, *out[0]));
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], size));
  return fill(op, *out[0], *value);
}

Status full_like_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::full_like.default";
  const Tensor* x;
  const Value* value;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 1, "fill_value", &value));
  KILN_RETURN_IF_ERROR(factory_options(op, in, 2, 5, *out[0]));
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], x->sizes()));
  return fill(op, *out[0], *value);
}

Status scalar_tensor_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::scalar_tensor.default";
  const Value* value;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 5, 1));
  KILN_RETURN_IF_ERROR(scalar_value(op, in, 0, "s", &value));
  KILN_RETURN_IF_ERROR(factory_options(op, in, 1, 4, *out[0]));
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], Span<const int64_t>()));
  return fill(op, *out[0], *value);
}

KILN_REGISTER_KERNEL("aten::arange.start_step", "*", arange_start_step_run);
KILN_REGISTER_KERNEL("aten::arange.start", "*", arange_start_run);
KILN_REGISTER_KERNEL("aten::arange.default", "*", arange_run);
KILN_REGISTER_KERNEL("aten::full.default", "*", full_run);
KILN_REGISTER_KERNEL("aten::full_like.default", "*", full_like_run);
KILN_REGISTER_KERNEL("aten::scalar_tensor.default", "*", scalar_tensor_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
