// Operators whose output size depends on the data: nonzero.default (the i64 [n, ndim] coordinates of the
// non-zero elements, row-major; a 0-D input gives [n, 0]) and masked_select.default (the elements of self
// where the mask, broadcast with self, is true, row-major). The exporter planned each output for its bound
// (every element selected); the count is made first and checked against the output's capacity
// (resize_data_dependent) before a byte is written.
#include <cstring>

#include "common/broadcast.h"
#include "common/dtype_dispatch.h"
#include "common/kernel_args.h"
#include "common/strided_copy.h"
#include "data_dependent.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

template <typename T>
bool nonzero_element(const void* data, int64_t i) {
  return load(static_cast<const T*>(data) + i) != T(0);  // NaN is non-zero, -0.0 is zero (as in ATen)
}

bool nonzero_half(const void* data, int64_t i) {  // f16 and bf16: any bit but the sign
  uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(data) + 2 * i, 2);
  return (bits & 0x7fff) != 0;
}

}  // namespace

NonzeroFn nonzero_fn(ScalarType t) {
  switch (t) {
    case ScalarType::Float32: return nonzero_element<float>;
    case ScalarType::Float64: return nonzero_element<double>;
    case ScalarType::Int64: return nonzero_element<int64_t>;
    case ScalarType::Int32: return nonzero_element<int32_t>;
    case ScalarType::Bool: return nonzero_element<bool>;
    case ScalarType::UInt8: return nonzero_element<uint8_t>;
    case ScalarType::Int8: return nonzero_element<int8_t>;
    case ScalarType::Float16:
    case ScalarType::BFloat16: return nonzero_half;
  }
  return nullptr;
}

namespace {

Status nonzero_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::nonzero.default";
  const Tensor* x;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 1, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(check_dtype(op, *out[0], "output", ScalarType::Int64));
  const NonzeroFn is_set = nonzero_fn(x->dtype());
  KILN_CHECK_OR_RETURN(is_set != nullptr, KernelFailure, "%s: unsupported dtype in %s", op, describe(*x).c_str());
  const int64_t total = x->numel();
  const void* data = x->data();
  int64_t n = 0;
  for (int64_t i = 0; i < total; ++i) n += is_set(data, i) ? 1 : 0;
  const int nd = x->dim();
  const int64_t sizes[2] = {n, nd};
  KILN_RETURN_IF_ERROR(resize_data_dependent(op, "result", out[0], Span<const int64_t>(sizes, 2)));
  int64_t* y = out[0]->data_as<int64_t>();
  int64_t coord[kMaxDims] = {};
  int64_t row = 0;
  for (int64_t i = 0; i < total && row < n; ++i) {
    if (is_set(data, i)) {
      for (int d = 0; d < nd; ++d) y[row * nd + d] = coord[d];
      ++row;
    }
    for (int d = nd - 1; d >= 0; --d) {
      if (++coord[d] < x->sizes()[d]) break;
      coord[d] = 0;
    }
  }
  return Status::ok();
}

// Element strides of `t` over the broadcast shape `shape` (right-aligned; 0 where broadcast).
void broadcast_strides(const Tensor& t, const Dims& shape, int64_t* strides) {
  int64_t s = 1;
  for (int d = shape.n - 1; d >= 0; --d) {
    const int e = d - (shape.n - t.dim());
    if (e < 0) {
      strides[d] = 0;
      continue;
    }
    strides[d] = t.sizes()[e] == 1 ? 0 : s;
    s *= t.sizes()[e];
  }
}

Status masked_select_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::masked_select.default";
  const Tensor *x, *mask;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 2, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "self", &x));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "mask", &mask));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *x, "self", *out[0], "output"));
  KILN_CHECK_OR_RETURN(mask->dtype() == ScalarType::Bool || mask->dtype() == ScalarType::UInt8, KernelFailure,
                       "%s: the mask must be bool or u8, got %s", op, describe(*mask).c_str());
  const size_t elem = element_size(x->dtype());
  KILN_CHECK_OR_RETURN(elem > 0, KernelFailure, "%s: unknown dtype in %s", op, describe(*x).c_str());
  const Tensor* both[2] = {x, mask};
  Dims shape;
  KILN_RETURN_IF_ERROR(broadcast_shapes(op, both, 2, &shape));
  int64_t xs[kMaxDims] = {}, ms[kMaxDims] = {};
  broadcast_strides(*x, shape, xs);
  broadcast_strides(*mask, shape, ms);
  const int64_t total = shape.numel();
  const NonzeroFn is_set = nonzero_fn(mask->dtype());
  const void* mdata = mask->data();
  // Two walks over the broadcast positions: count, then copy.
  auto walk = [&](auto&& visit) {
    int64_t coord[kMaxDims] = {};
    int64_t xo = 0, mo = 0;
    for (int64_t i = 0; i < total; ++i) {
      if (is_set(mdata, mo) && !visit(xo)) return;
      for (int d = shape.n - 1; d >= 0; --d) {
        xo += xs[d], mo += ms[d];
        if (++coord[d] < shape[d]) break;
        xo -= xs[d] * shape[d], mo -= ms[d] * shape[d];
        coord[d] = 0;
      }
    }
  };
  int64_t n = 0;
  walk([&](int64_t) { return ++n, true; });
  const int64_t sizes[1] = {n};
  KILN_RETURN_IF_ERROR(resize_data_dependent(op, "result", out[0], Span<const int64_t>(sizes, 1)));
  const char* src = static_cast<const char*>(x->data());
  char* dst = static_cast<char*>(out[0]->data());
  int64_t k = 0;
  walk([&](int64_t xo) {
    if (k >= n) return false;
    std::memcpy(dst + static_cast<size_t>(k++) * elem, src + static_cast<size_t>(xo) * elem, elem);
    return true;
  });
  return Status::ok();
}

}  // namespace

KILN_REGISTER_KERNEL("aten::nonzero.default", "*", nonzero_run);
KILN_REGISTER_KERNEL("aten::masked_select.default", "*", masked_select_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
