// aten::_to_copy.default: dtype conversion copy among f32, f64, i64, i32, bool, u8, i8, and float16 and
// bfloat16 (through float, as PyTorch converts them).
#include "common/elementwise.h"
#include "common/half.h"
#include "common/kernel_args.h"
#include "common/strided_copy.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

bool kind_in(const Value* v, ValueKind a, ValueKind b) { return v != nullptr && (v->kind == a || v->kind == b); }

bool is_16bit_float(ScalarType t) { return t == ScalarType::Float16 || t == ScalarType::BFloat16; }

// Calls fn with a converter from float to `to` (float16 or bfloat16 bits) and one back.
template <typename F>
void with_16bit(ScalarType t, F&& fn) {
  if (t == ScalarType::Float16)
    fn([](float f) { return float_to_half(f); }, [](uint16_t h) { return half_to_float(h); });
  else
    fn([](float f) { return float_to_bfloat16(f); }, [](uint16_t h) { return bfloat16_to_float(h); });
}

// A conversion from or to float16 / bfloat16; false if the other dtype has no C++ type.
bool convert_16bit(const Tensor& x, Tensor& y) {
  const ScalarType from = x.dtype(), to = y.dtype();
  if (is_16bit_float(from) && is_16bit_float(to)) {
    with_16bit(from, [&](auto, auto widen) {
      with_16bit(to, [&](auto narrow, auto) {
        map_elements<uint16_t, uint16_t>(x, y, [&](uint16_t h) { return narrow(widen(h)); });
      });
    });
    return true;
  }
  bool ok = false;
  if (is_16bit_float(from)) {
    with_16bit(from, [&](auto, auto widen) {
      ok = dispatch_all(to, [&](auto to_type) {
        using U = decltype(to_type);
        map_elements<uint16_t, U>(x, y, [&](uint16_t h) { return convert<U>(widen(h)); });
      });
    });
  } else {
    with_16bit(to, [&](auto narrow, auto) {
      ok = dispatch_all(from, [&](auto from_type) {
        using T = decltype(from_type);
        map_elements<T, uint16_t>(x, y, [&](T v) { return narrow(convert<float>(v)); });
      });
    });
  }
  return ok;
}

}  // namespace

Status to_copy_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::_to_copy.default";
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 7, 1));
  const Tensor* x;
  ScalarType dtype;
  bool has_dtype, non_blocking;
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(optional_dtype_arg(op, in, 1, "dtype", &dtype, &has_dtype));
  // Layout, device and memory format have one meaning here (strided, CPU, contiguous).
  KILN_CHECK_OR_RETURN(kind_in(in[2], ValueKind::None, ValueKind::Int), KernelFailure, "%s: layout must be None", op);
  KILN_CHECK_OR_RETURN(kind_in(in[3], ValueKind::None, ValueKind::String), KernelFailure, "%s: device must be None",
                       op);
  KILN_CHECK_OR_RETURN(kind_in(in[4], ValueKind::None, ValueKind::Bool), KernelFailure,
                       "%s: pin_memory must be None or a Bool", op);
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "non_blocking", &non_blocking));
  KILN_CHECK_OR_RETURN(kind_in(in[6], ValueKind::None, ValueKind::Int), KernelFailure,
                       "%s: memory_format must be None or an Int", op);
  Tensor& y = *out[0];
  if (!has_dtype) dtype = x->dtype();
  KILN_CHECK_OR_RETURN(y.dtype() == dtype, KernelFailure, "%s: output must be %s, got %s", op, scalar_type_name(dtype),
                       describe(y).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  if (x->dtype() == dtype) {
    KILN_CHECK_OR_RETURN(element_size(dtype) > 0, KernelFailure, "%s: unknown dtype %s", op, describe(*x).c_str());
    copy_elements(y.data(), x->data(), x->numel(), element_size(dtype));
    return Status::ok();
  }
  bool ok = false;
  if (is_16bit_float(x->dtype()) || is_16bit_float(dtype)) {
    ok = convert_16bit(*x, y);
  } else {
    dispatch_all(x->dtype(), [&](auto ti) {
      ok = dispatch_all(dtype, [&](auto to) {
        using T = decltype(ti);
        using U = decltype(to);
        map_elements<T, U>(*x, y, [](T v) { return convert<U>(v); });
      });
    });
  }
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: cannot convert %s to %s", op, describe(*x).c_str(),
                       scalar_type_name(dtype));
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::_to_copy.default", "*", to_copy_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
