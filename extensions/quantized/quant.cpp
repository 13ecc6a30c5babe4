// Argument checks of the kiln_quantized operators (quant.h).
#include "quant.h"

#include <cmath>
#include <cstring>

namespace kiln {
namespace quantized {
namespace {

using namespace kernels;

// At prepare a method input has sizes but no storage: only its sizes are checked then.
Status tensor_at(bool prepare, const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  return prepare ? prepare_tensor_arg(op, in, i, name, out) : tensor_arg(op, in, i, name, out);
}

Status optional_tensor_at(bool prepare, const char* op, Inputs in, size_t i, const char* name, const Tensor** out) {
  if (in[i] != nullptr && in[i]->is_none()) {
    *out = nullptr;
    return Status::ok();
  }
  return tensor_at(prepare, op, in, i, name, out);
}

Status scheme_arg(const char* op, Inputs in, size_t i, Scheme* scheme) {
  const char* s;
  size_t n;
  KILN_RETURN_IF_ERROR(string_arg(op, in, i, "scheme", &s, &n));
  const std::string name(s, n);
  if (name == "q8_0") {
    *scheme = Scheme::Q8_0;
  } else if (name == "q4_0") {
    *scheme = Scheme::Q4_0;
  } else if (name == "q4_1") {
    *scheme = Scheme::Q4_1;
  } else {
    return Status(Error::KernelFailure,
                  format("%s: unknown scheme '%s' (expected q8_0, q4_0 or q4_1)", op, name.c_str()));
  }
  return Status::ok();
}

// The quantized matrix of arguments q_index (qweight), +1 (scales), +2 (mins), scheme and group_size.
// Weights are read whole by every call, so they must hold data even at prepare unless they are
// method inputs (then run checks them).
Status matrix_args(bool prepare, const char* op, Inputs in, size_t q_index, size_t scheme_index, QuantMatrix* w) {
  const Tensor *q, *scales, *mins;
  KILN_RETURN_IF_ERROR(scheme_arg(op, in, scheme_index, &w->scheme));
  KILN_RETURN_IF_ERROR(int_arg(op, in, scheme_index + 1, "group_size", &w->group));
  KILN_RETURN_IF_ERROR(tensor_at(prepare, op, in, q_index, "qweight", &q));
  KILN_RETURN_IF_ERROR(tensor_at(prepare, op, in, q_index + 1, "scales", &scales));
  KILN_RETURN_IF_ERROR(optional_tensor_at(prepare, op, in, q_index + 2, "mins", &mins));
  const bool four = w->scheme != Scheme::Q8_0;
  const char* scheme = w->scheme == Scheme::Q8_0 ? "q8_0" : w->scheme == Scheme::Q4_0 ? "q4_0" : "q4_1";
  KILN_RETURN_IF_ERROR(check_dtype(op, *q, "qweight", four ? ScalarType::UInt8 : ScalarType::Int8));
  KILN_CHECK_OR_RETURN(q->dim() == 2, KernelFailure, "%s: qweight must be 2-D [N, %s], got %s", op,
                       four ? "K / 2" : "K", describe(*q).c_str());
  w->n = q->size(0);
  int64_t k = q->size(1);
  KILN_CHECK_OR_RETURN(!four || mul_overflows(k, 2, &k) == false, KernelFailure, "%s: qweight %s is too large", op,
                       describe(*q).c_str());
  w->k = k;
  const int64_t g = w->group;
  const bool per_row = w->scheme == Scheme::Q8_0 && g == k && k > 0;
  KILN_CHECK_OR_RETURN(k > 0 && g > 0 && k % g == 0 && (g % 32 == 0 || per_row), KernelFailure,
                       "%s: group_size %lld does not fit %s rows of %lld elements (qweight %s): it must be a multiple "
                       "of 32 that divides the row%s",
                       op, static_cast<long long>(g), scheme, static_cast<long long>(k), describe(*q).c_str(),
                       w->scheme == Scheme::Q8_0 ? ", or the row length" : "");
  for (const Tensor* t : {scales, mins}) {
    if (t == nullptr) continue;
    const char* name = t == scales ? "scales" : "mins";
    KILN_RETURN_IF_ERROR(check_dtype(op, *t, name, ScalarType::Float16));
    KILN_CHECK_OR_RETURN(t->dim() == 2 && t->size(0) == w->n && t->size(1) == k / g, KernelFailure,
                         "%s: %s must be [%lld, %lld] (one per group of %lld elements of each of the %lld rows of "
                         "qweight %s), got %s",
                         op, name, static_cast<long long>(w->n), static_cast<long long>(k / g),
                         static_cast<long long>(g), static_cast<long long>(w->n), describe(*q).c_str(),
                         describe(*t).c_str());
  }
  KILN_CHECK_OR_RETURN((mins != nullptr) == (w->scheme == Scheme::Q4_1), KernelFailure, "%s: %s %s mins", op, scheme,
                       w->scheme == Scheme::Q4_1 ? "needs" : "takes no");
  w->q = q->data_as<const uint8_t>();
  w->scales = scales->data_as<const uint16_t>();
  w->mins = mins != nullptr ? mins->data_as<const uint16_t>() : nullptr;
  return Status::ok();
}

}  // namespace

Status linear_args(bool prepare, Inputs in, Outputs out, LinearArgs* a) {
  const char* op = kLinearOp;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 8, 1));
  KILN_RETURN_IF_ERROR(tensor_at(prepare, op, in, 0, "input", &a->x));
  KILN_RETURN_IF_ERROR(matrix_args(prepare, op, in, 1, 5, &a->w));
  KILN_RETURN_IF_ERROR(optional_tensor_at(prepare, op, in, 4, "bias", &a->bias));
  const char* s;
  size_t n;
  KILN_RETURN_IF_ERROR(string_arg(op, in, 7, "compute", &s, &n));
  const std::string compute(s, n);
  KILN_CHECK_OR_RETURN(compute == "float32" || compute == "int8", KernelFailure,
                       "%s: unknown compute '%s' (expected float32 or int8)", op, compute.c_str());
  a->compute = compute == "int8" ? Compute::Int8 : Compute::Float32;

  const Tensor& x = *a->x;
  Tensor& y = *out[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, x, "input", ScalarType::Float32));
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(x.dim() >= 1 && x.size(-1) == a->w.k, KernelFailure,
                       "%s: input %s must end with the weight's %lld in_features", op, describe(x).c_str(),
                       static_cast<long long>(a->w.k));
  if (a->bias != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(op, *a->bias, "bias", ScalarType::Float32));
    KILN_CHECK_OR_RETURN(a->bias->dim() == 1 && a->bias->size(0) == a->w.n, KernelFailure,
                         "%s: bias must be [%lld], got %s", op, static_cast<long long>(a->w.n),
                         describe(*a->bias).c_str());
  }
  Dims sizes(x.sizes());
  sizes[sizes.n - 1] = a->w.n;
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  a->m = prod(x.sizes(), 0, x.dim() - 1);
  return Status::ok();
}

Status embedding_args(bool prepare, Inputs in, Outputs out, EmbeddingArgs* a) {
  const char* op = kEmbeddingOp;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 6, 1));
  KILN_RETURN_IF_ERROR(matrix_args(prepare, op, in, 0, 4, &a->w));
  KILN_RETURN_IF_ERROR(tensor_at(prepare, op, in, 3, "indices", &a->indices));
  const Tensor& idx = *a->indices;
  Tensor& y = *out[0];
  KILN_CHECK_OR_RETURN(idx.dtype() == ScalarType::Int64 || idx.dtype() == ScalarType::Int32, KernelFailure,
                       "%s: indices must be int64 or int32, got %s", op, describe(idx).c_str());
  KILN_RETURN_IF_ERROR(check_dtype(op, y, "output", ScalarType::Float32));
  KILN_CHECK_OR_RETURN(idx.dim() < kMaxDims, KernelFailure, "%s: indices %s have too many dims", op,
                       describe(idx).c_str());
  Dims sizes(idx.sizes());
  sizes.push(a->w.k);
  return resize_output(op, &y, sizes.span());
}

void quantize_row_int8(const float* x, int64_t k, int8_t* qx, float* dx) {
  for (int64_t b = 0; b * 32 < k; ++b) {
    const int64_t n = std::min<int64_t>(32, k - b * 32);
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(xb[i])) amax = xb[i];
    }
    const float d = amax / 127.0f;
    // A block with NaN or infinity gets d = NaN or inf (the output becomes NaN) and qx = 0.
    const float inv = d == 0.0f || !std::isfinite(d) ? 0.0f : 1.0f / d;
    for (int64_t i = 0; i < n; ++i) {
      const float v = std::nearbyint(xb[i] * inv);
      qx[b * 32 + i] = static_cast<int8_t>(std::isfinite(d) ? std::fmin(std::fmax(v, -127.0f), 127.0f) : 0.0f);
    }
    dx[b] = d;
  }
}

}  // namespace quantized
}  // namespace kiln
