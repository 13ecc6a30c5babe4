// Comparisons (eq/ne/lt/le/gt/ge, .Tensor and .Scalar, bool output), maximum/minimum, logical_* and
// bitwise_* (bool and integers). Comparisons and logical ops accept operands of different dtypes and
// compare them in the type ATen would promote to (f64 > f32 > i64).
#include <cmath>

#include "common/elementwise.h"
#include "common/kernel_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };

template <typename C>
bool compare(Cmp k, C a, C b) {
  switch (k) {
    case Cmp::Eq: return a == b;
    case Cmp::Ne: return a != b;
    case Cmp::Lt: return a < b;
    case Cmp::Le: return a <= b;
    case Cmp::Gt: return a > b;
    default: return a >= b;
  }
}

// Element i of a tensor of dtype t as C (bools read as bytes, see load()).
template <typename C>
C read_as(const void* base, ScalarType t, int64_t i) {
  switch (t) {
    case ScalarType::Float32: return convert<C>(static_cast<const float*>(base)[i]);
    case ScalarType::Float64: return convert<C>(static_cast<const double*>(base)[i]);
    case ScalarType::Int64: return convert<C>(static_cast<const int64_t*>(base)[i]);
    case ScalarType::Int32: return convert<C>(static_cast<const int32_t*>(base)[i]);
    case ScalarType::Int8: return convert<C>(static_cast<const int8_t*>(base)[i]);
    case ScalarType::UInt8: return convert<C>(static_cast<const uint8_t*>(base)[i]);
    case ScalarType::Bool: return convert<C>(static_cast<const uint8_t*>(base)[i] != 0);
    default: return C{};
  }
}

bool has_ctype(ScalarType t) { return t != ScalarType::Float16 && t != ScalarType::BFloat16 && element_size(t) > 0; }

// The type two operands are compared in: f64 if either is, else f32 if either is, else i64.
int promoted(ScalarType a, ScalarType b) {
  if (a == ScalarType::Float64 || b == ScalarType::Float64) return 2;
  if (a == ScalarType::Float32 || b == ScalarType::Float32) return 1;
  return 0;
}

// y = f(a, b) over broadcast operands of any dtypes, each read as C.
template <typename C, typename U, typename F>
void mixed_map(const Tensor& a, const Tensor& b, Tensor& y, const Dims& sizes, F f) {
  const Tensor* ins[2] = {&a, &b};
  const BroadcastPlan<2> plan = make_broadcast_plan<2>(sizes, ins);
  const int64_t sa = plan.strides[0][plan.ndim - 1], sb = plan.strides[1][plan.ndim - 1];
  const ScalarType ta = a.dtype(), tb = b.dtype();
  U* yp = y.data_as<U>();
  parallel_rows(plan, [&](int64_t o, const int64_t* off, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      yp[o + i] = f(read_as<C>(a.data(), ta, off[0] + i * sa), read_as<C>(b.data(), tb, off[1] + i * sb));
  });
}

// Common prologue of (self, other) kernels with broadcasting: shapes, output resize.
Status binary_setup(const char* op, Inputs in, Outputs out, const Tensor** a, const Tensor** b, Dims* sizes) {
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", a));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "other", b));
  KILN_CHECK_OR_RETURN(has_ctype((*a)->dtype()) && has_ctype((*b)->dtype()), KernelFailure,
                       "%s: unsupported dtypes %s and %s", op, describe(**a).c_str(), describe(**b).c_str());
  const Tensor* ins[2] = {*a, *b};
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, ins, 2, sizes));
  return resize_output(op, out[0], sizes->span());
}

// binary_setup for operators whose operands and output share one dtype (the exporter casts).
Status same_dtype_binary_setup(const char* op, Inputs in, Outputs out, const Tensor** a, const Tensor** b,
                               Dims* sizes) {
  KILN_RETURN_IF_ERROR(binary_setup(op, in, out, a, b, sizes));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, **a, "self", **b, "other"));
  return check_same_dtype(op, **a, "self", *out[0], "output");
}

Status compare_tensor(const char* op, Cmp k, Inputs in, Outputs out) {
  const Tensor *a, *b;
  Dims sizes;
  KILN_RETURN_IF_ERROR(binary_setup(op, in, out, &a, &b, &sizes));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Bool));
  if (a->dtype() == b->dtype() && a->dtype() != ScalarType::Bool && dispatch_real(a->dtype(), [&](auto tag) {
        using T = decltype(tag);
        binary_map<T, bool>(*a, *b, y, sizes, [k](T p, T q) { return compare(k, p, q); });
      }))
    return Status::ok();
  switch (promoted(a->dtype(), b->dtype())) {
    case 2: mixed_map<double, bool>(*a, *b, y, sizes, [k](double p, double q) { return compare(k, p, q); }); break;
    case 1: mixed_map<float, bool>(*a, *b, y, sizes, [k](float p, float q) { return compare(k, p, q); }); break;
    default: mixed_map<int64_t, bool>(*a, *b, y, sizes, [k](int64_t p, int64_t q) { return compare(k, p, q); }); break;
  }
  return Status::ok();
}

// other is a Scalar: a float tensor compares in its own type (the scalar rounded to it, as ATen does);
// an integer or bool tensor compares in f32 against a Double scalar and in i64 against an Int or Bool one.
Status compare_scalar(const char* op, Cmp k, Inputs in, Outputs out) {
  const Tensor* x;
  double s;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 1, "other", &s));
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Bool));
  KILN_CHECK_OR_RETURN(has_ctype(x->dtype()), KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, &y, x->sizes()));
  const ScalarType t = x->dtype();
  const void* xp = x->data();
  bool* yp = y.data_as<bool>();
  auto run = [&](auto c) {
    using C = decltype(c);
    parallel_for(x->numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) yp[i] = compare(k, read_as<C>(xp, t, i), c);
    });
  };
  if (t == ScalarType::Float64)
    run(s);
  else if (t == ScalarType::Float32 || in[1]->kind == ValueKind::Double)
    run(static_cast<float>(s));
  else if (in[1]->kind == ValueKind::Int)
    run(in[1]->i);
  else
    run(saturate_cast<int64_t>(s));
  return Status::ok();
}

// maximum / minimum: same dtype (the exporter casts), NaN propagates.
Status extremum(const char* op, bool is_max, Inputs in, Outputs out) {
  const Tensor *a, *b;
  Dims sizes;
  KILN_RETURN_IF_ERROR(same_dtype_binary_setup(op, in, out, &a, &b, &sizes));
  Tensor& y = *out[0];
  const bool ok = dispatch_real(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    binary_map<T>(*a, *b, y, sizes, [is_max](T p, T q) {
      if constexpr (std::is_floating_point_v<T>) {
        if (p != p) return p;
        if (q != q) return q;
      }
      return is_max ? (p > q ? p : q) : (p < q ? p : q);
    });
  });
  if (!ok && a->dtype() == ScalarType::Bool)
    mixed_map<bool, bool>(*a, *b, y, sizes, [is_max](bool p, bool q) { return is_max ? (p || q) : (p && q); });
  KILN_CHECK_OR_RETURN(ok || a->dtype() == ScalarType::Bool, KernelFailure, "%s: unsupported dtype %s", op,
                       describe(*a).c_str());
  return Status::ok();
}

enum class Logic { And, Or, Xor };

Status logical_binary(const char* op, Logic k, Inputs in, Outputs out) {
  const Tensor *a, *b;
  Dims sizes;
  KILN_RETURN_IF_ERROR(binary_setup(op, in, out, &a, &b, &sizes));
  KILN_RETURN_IF_ERROR(check_dtype(op, *out[0], "output", ScalarType::Bool));
  mixed_map<bool, bool>(*a, *b, *out[0], sizes, [k](bool p, bool q) {
    return k == Logic::And ? (p && q) : k == Logic::Or ? (p || q) : (p != q);
  });
  return Status::ok();
}

// bitwise and/or/xor: bool or integer operands of one dtype (the exporter casts).
Status bitwise_binary(const char* op, Logic k, Inputs in, Outputs out) {
  const Tensor *a, *b;
  Dims sizes;
  KILN_RETURN_IF_ERROR(same_dtype_binary_setup(op, in, out, &a, &b, &sizes));
  Tensor& y = *out[0];
  const ScalarType t = a->dtype();
  if (t == ScalarType::Bool) return logical_binary(op, k, in, out);
  const bool ok = t != ScalarType::Float32 && t != ScalarType::Float64 && dispatch_all(t, [&](auto tag) {
                    using T = decltype(tag);
                    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
                      binary_map<T>(*a, *b, y, sizes, [k](T p, T q) {
                        return static_cast<T>(k == Logic::And ? (p & q) : k == Logic::Or ? (p | q) : (p ^ q));
                      });
                  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: self must be bool or an integer, got %s", op, describe(*a).c_str());
  return Status::ok();
}

}  // namespace

#define KILN_COMPARE(name, kind)                                          \
  Status name##_tensor_run(KernelContext&, Inputs in, Outputs out) {      \
    return compare_tensor("aten::" #name ".Tensor", Cmp::kind, in, out);  \
  }                                                                       \
  Status name##_scalar_run(KernelContext&, Inputs in, Outputs out) {      \
    return compare_scalar("aten::" #name ".Scalar", Cmp::kind, in, out);  \
  }                                                                       \
  KILN_REGISTER_KERNEL("aten::" #name ".Tensor", "*", name##_tensor_run); \
  KILN_REGISTER_KERNEL("aten::" #name ".Scalar", "*", name##_scalar_run);
KILN_COMPARE(eq, Eq)
KILN_COMPARE(ne, Ne)
KILN_COMPARE(lt, Lt)
KILN_COMPARE(le, Le)
KILN_COMPARE(gt, Gt)
KILN_COMPARE(ge, Ge)
#undef KILN_COMPARE

Status maximum_run(KernelContext&, Inputs in, Outputs out) { return extremum("aten::maximum.default", true, in, out); }
Status minimum_run(KernelContext&, Inputs in, Outputs out) { return extremum("aten::minimum.default", false, in, out); }

Status logical_not_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::logical_not.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 1, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(check_dtype(op, *out[0], "output", ScalarType::Bool));
  KILN_CHECK_OR_RETURN(has_ctype(x->dtype()), KernelFailure, "%s: unsupported dtype %s", op, describe(*x).c_str());
  KILN_RETURN_IF_ERROR(resize_output(op, out[0], x->sizes()));
  bool* yp = out[0]->data_as<bool>();
  parallel_for(x->numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) yp[i] = !read_as<bool>(x->data(), x->dtype(), i);
  });
  return Status::ok();
}

Status bitwise_not_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::bitwise_not.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(unary_setup(op, in, out, 1, &x));
  const ScalarType t = x->dtype();
  const bool ok = t != ScalarType::Float32 && t != ScalarType::Float64 && dispatch_all(t, [&](auto tag) {
                    using T = decltype(tag);
                    if constexpr (std::is_same_v<T, bool>)
                      map_elements<T>(*x, *out[0], [](bool v) { return !v; });
                    else if constexpr (std::is_integral_v<T>)
                      map_elements<T>(*x, *out[0], [](T v) { return static_cast<T>(~v); });
                  });
  KILN_CHECK_OR_RETURN(ok, KernelFailure, "%s: self must be bool or an integer, got %s", op, describe(*x).c_str());
  return Status::ok();
}

Status logical_and_run(KernelContext&, Inputs in, Outputs out) {
  return logical_binary("aten::logical_and.default", Logic::And, in, out);
}
Status logical_or_run(KernelContext&, Inputs in, Outputs out) {
  return logical_binary("aten::logical_or.default", Logic::Or, in, out);
}
Status logical_xor_run(KernelContext&, Inputs in, Outputs out) {
  return logical_binary("aten::logical_xor.default", Logic::Xor, in, out);
}
Status bitwise_and_run(KernelContext&, Inputs in, Outputs out) {
  return bitwise_binary("aten::bitwise_and.Tensor", Logic::And, in, out);
}
Status bitwise_or_run(KernelContext&, Inputs in, Outputs out) {
  return bitwise_binary("aten::bitwise_or.Tensor", Logic::Or, in, out);
}
Status bitwise_xor_run(KernelContext&, Inputs in, Outputs out) {
  return bitwise_binary("aten::bitwise_xor.Tensor", Logic::Xor, in, out);
}

KILN_REGISTER_KERNEL("aten::maximum.default", "*", maximum_run);
KILN_REGISTER_KERNEL("aten::minimum.default", "*", minimum_run);
KILN_REGISTER_KERNEL("aten::logical_not.default", "*", logical_not_run);
KILN_REGISTER_KERNEL("aten::logical_and.default", "*", logical_and_run);
KILN_REGISTER_KERNEL("aten::logical_or.default", "*", logical_or_run);
KILN_REGISTER_KERNEL("aten::logical_xor.default", "*", logical_xor_run);
KILN_REGISTER_KERNEL("aten::bitwise_not.default", "*", bitwise_not_run);
KILN_REGISTER_KERNEL("aten::bitwise_and.Tensor", "*", bitwise_and_run);
KILN_REGISTER_KERNEL("aten::bitwise_or.Tensor", "*", bitwise_or_run);
KILN_REGISTER_KERNEL("aten::bitwise_xor.Tensor", "*", bitwise_xor_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
