// Argument checks of the kiln_quantized operators (quant.h).
#include "quant.h"

#include <cmath>
#include <cstring>
#include <limits>

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

constexpr Scheme kSchemes[] = {Scheme::Q8_0, Scheme::Q4_0, Scheme::Q4_1, Scheme::Q5_0, Scheme::Q5_1,
                               Scheme::Q4_K, Scheme::Q5_K, Scheme::Q6_K, Scheme::F16,  Scheme::BF16};

Status scheme_arg(const char* op, Inputs in, size_t i, Scheme* scheme) {
  const char* s;
  size_t n;
  KILN_RETURN_IF_ERROR(string_arg(op, in, i, "scheme", &s, &n));
  const std::string name(s, n);
  for (Scheme candidate : kSchemes) {
    if (name == scheme_name(candidate)) {
      *scheme = candidate;
      return Status::ok();
    }
  }
  return Status(Error::KernelFailure,
                format("%s: unknown scheme '%s' (expected q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, f16 or bf16)",
                       op, name.c_str()));
}

// A block format's qweight [N, whole blocks]: scales and mins None, group_size the block's elements.
Status block_matrix_args(const char* op, const Tensor& q, const Tensor* scales, const Tensor* mins, QuantMatrix* w) {
  const char* scheme = scheme_name(w->scheme);
  const int64_t elements = block_elements(w->scheme), bytes = block_bytes(w->scheme);
  KILN_RETURN_IF_ERROR(check_dtype(op, q, "qweight", ScalarType::UInt8));
  KILN_CHECK_OR_RETURN(q.dim() == 2, KernelFailure, "%s: %s qweight must be 2-D [N, blocks * %lld bytes], got %s", op,
                       scheme, static_cast<long long>(bytes), describe(q).c_str());
  KILN_CHECK_OR_RETURN(scales == nullptr && mins == nullptr, KernelFailure,
                       "%s: %s keeps its scales inside its blocks: scales and mins must be None", op, scheme);
  KILN_CHECK_OR_RETURN(w->group == elements, KernelFailure,
                       "%s: group_size %lld does not fit %s, whose blocks are %lld elements", op,
                       static_cast<long long>(w->group), scheme, static_cast<long long>(elements));
  const int64_t cols = q.size(1);
  KILN_CHECK_OR_RETURN(cols > 0 && cols % bytes == 0, KernelFailure,
                       "%s: qweight %s does not hold whole %s blocks (%lld bytes per %lld elements): truncated or "
                       "malformed",
                       op, describe(q).c_str(), scheme, static_cast<long long>(bytes),
                       static_cast<long long>(elements));
  // cols / bytes * elements < 2 * cols: no overflow for a tensor that exists.
  w->n = q.size(0);
  w->k = cols / bytes * elements;
  w->q = q.data_as<const uint8_t>();
  w->scales = nullptr;
  w->mins = nullptr;
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
  KILN_RETURN_IF_ERROR(optional_tensor_at(prepare, op, in, q_index + 1, "scales", &scales));
  KILN_RETURN_IF_ERROR(optional_tensor_at(prepare, op, in, q_index + 2, "mins", &mins));
  if (is_block_format(w->scheme)) return block_matrix_args(op, *q, scales, mins, w);
  const char* scheme = scheme_name(w->scheme);
  KILN_CHECK_OR_RETURN(scales != nullptr, KernelFailure, "%s: %s needs scales", op, scheme);
  const bool four = w->scheme != Scheme::Q8_0;
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

const char* scheme_name(Scheme s) {
  switch (s) {
    case Scheme::Q8_0: return "q8_0";
    case Scheme::Q4_0: return "q4_0";
    case Scheme::Q4_1: return "q4_1";
    case Scheme::Q5_0: return "q5_0";
    case Scheme::Q5_1: return "q5_1";
    case Scheme::Q4_K: return "q4_k";
    case Scheme::Q5_K: return "q5_k";
    case Scheme::Q6_K: return "q6_k";
    case Scheme::F16: return "f16";
    case Scheme::BF16: return "bf16";
  }
  return "?";
}

namespace {

// The 6-bit scale and min of sub-block s (0..7) of a q4_k / q5_k block (quant.h).
void k_scale_min(const uint8_t* scales, int64_t s, int32_t* sc, int32_t* m) {
  if (s < 4) {
    *sc = scales[s] & 63;
    *m = scales[s + 4] & 63;
  } else {
    *sc = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4;
    *m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
  }
}

}  // namespace

float block_weight(Scheme s, const uint8_t* b, int64_t e) {
  switch (s) {
    case Scheme::Q5_0:
    case Scheme::Q5_1: {
      const int64_t at = s == Scheme::Q5_0 ? 2 : 4;  // qh, then qs
      const uint32_t qh = static_cast<uint32_t>(b[at]) | static_cast<uint32_t>(b[at + 1]) << 8 |
                          static_cast<uint32_t>(b[at + 2]) << 16 | static_cast<uint32_t>(b[at + 3]) << 24;
      const uint8_t byte = b[at + 4 + e % 16];
      const int32_t q = (e < 16 ? byte & 15 : byte >> 4) | static_cast<int32_t>((qh >> e) & 1u) << 4;
      const float d = half_to_float(load_u16(b));
      if (s == Scheme::Q5_0) return d * static_cast<float>(q - 16);
      return d * static_cast<float>(q) + half_to_float(load_u16(b + 2));
    }
    case Scheme::Q4_K:
    case Scheme::Q5_K: {
      const int64_t c = e / 64, l = e % 32, sub = e / 32;
      const bool high = e % 64 >= 32;
      const uint8_t* qs = b + (s == Scheme::Q4_K ? 16 : 48);
      int32_t q = high ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
      if (s == Scheme::Q5_K) q |= ((b[16 + l] >> sub) & 1) << 4;
      int32_t sc, m;
      k_scale_min(b + 4, sub, &sc, &m);
      const float d = half_to_float(load_u16(b)) * static_cast<float>(sc);
      const float dm = half_to_float(load_u16(b + 2)) * static_cast<float>(m);
      return d * static_cast<float>(q) - dm;
    }
    case Scheme::Q6_K: {
      const int64_t h = e / 128, t = e % 128 / 32, l = e % 32;
      const uint8_t low = b[64 * h + 32 * (t % 2) + l];
      const int32_t q = (t < 2 ? low & 15 : low >> 4) | ((b[128 + 32 * h + l] >> (2 * t)) & 3) << 4;
      const float d = half_to_float(load_u16(b + 208)) * static_cast<float>(static_cast<int8_t>(b[192 + e / 16]));
      return d * static_cast<float>(q - 32);
    }
    case Scheme::F16: return half_to_float(load_u16(b + 2 * e));
    case Scheme::BF16: return kernels::bfloat16_to_float(load_u16(b + 2 * e));
    default: return 0.0f;
  }
}

void block_int8_parts(Scheme s, const uint8_t* b, int64_t b32, Int8Block* out) {
  const int64_t e0 = b32 * 32;
  // The integer q of element e: the decoded weight's formula without its scales (block_weight).
  for (int64_t i = 0; i < 32; ++i) {
    const int64_t e = e0 + i;
    int32_t q = 0;
    switch (s) {
      case Scheme::Q5_0:
      case Scheme::Q5_1: {
        const int64_t at = s == Scheme::Q5_0 ? 2 : 4;
        const uint32_t qh = static_cast<uint32_t>(b[at]) | static_cast<uint32_t>(b[at + 1]) << 8 |
                            static_cast<uint32_t>(b[at + 2]) << 16 | static_cast<uint32_t>(b[at + 3]) << 24;
        const uint8_t byte = b[at + 4 + e % 16];
        q = (e < 16 ? byte & 15 : byte >> 4) | static_cast<int32_t>((qh >> e) & 1u) << 4;
        if (s == Scheme::Q5_0) q -= 16;
        break;
      }
      case Scheme::Q4_K:
      case Scheme::Q5_K: {
        const int64_t c = e / 64, l = e % 32, sub = e / 32;
        const uint8_t* qs = b + (s == Scheme::Q4_K ? 16 : 48);
        q = e % 64 >= 32 ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
        if (s == Scheme::Q5_K) q |= ((b[16 + l] >> sub) & 1) << 4;
        break;
      }
      case Scheme::Q6_K: {
        const int64_t h = e / 128, t = e % 128 / 32, l = e % 32;
        const uint8_t low = b[64 * h + 32 * (t % 2) + l];
        q = ((t < 2 ? low & 15 : low >> 4) | ((b[128 + 32 * h + l] >> (2 * t)) & 3) << 4) - 32;
        break;
      }
      default: break;
    }
    out->q[i] = static_cast<int8_t>(q);
  }
  out->sc[0] = out->sc[1] = 1;
  out->m = 0;
  out->c = 0.0f;
  switch (s) {
    case Scheme::Q5_0: out->d = load_u16(b); break;
    case Scheme::Q5_1:
      out->d = load_u16(b);
      out->m = load_u16(b + 2);
      out->c = half_to_float(out->m);
      break;
    case Scheme::Q4_K:
    case Scheme::Q5_K: {
      int32_t sc, m;
      k_scale_min(b + 4, b32, &sc, &m);
      out->d = load_u16(b);
      out->sc[0] = out->sc[1] = sc;
      out->c = -(half_to_float(load_u16(b + 2)) * static_cast<float>(m));
      break;
    }
    case Scheme::Q6_K:
      out->d = load_u16(b + 208);
      out->sc[0] = static_cast<int8_t>(b[192 + 2 * b32]);
      out->sc[1] = static_cast<int8_t>(b[192 + 2 * b32 + 1]);
      break;
    default: break;
  }
}

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
  KILN_CHECK_OR_RETURN(compute == "float32" || compute == "int8" || compute == "int8_row", KernelFailure,
                       "%s: unknown compute '%s' (expected float32, int8 or int8_row)", op, compute.c_str());
  a->compute = compute == "int8" ? Compute::Int8 : compute == "int8_row" ? Compute::Int8Row : Compute::Float32;
  KILN_CHECK_OR_RETURN(a->compute == Compute::Float32 || int8_takes(a->w.scheme), KernelFailure,
                       "%s: compute=%s takes integer weights, not %s", op, compute.c_str(), scheme_name(a->w.scheme));
  KILN_CHECK_OR_RETURN(a->compute != Compute::Int8Row || (a->w.scheme == Scheme::Q8_0 && a->w.group == a->w.k),
                       KernelFailure,
                       "%s: compute=int8_row takes q8_0 with one scale per output channel, not %s in groups of %lld",
                       op, scheme_name(a->w.scheme), static_cast<long long>(a->w.group));
  KILN_CHECK_OR_RETURN(a->compute != Compute::Int8Row || a->w.k <= kInt8RowMaxK, KernelFailure,
                       "%s: compute=int8_row takes rows of at most %lld elements (its int32 sums), not %lld", op,
                       static_cast<long long>(kInt8RowMaxK), static_cast<long long>(a->w.k));

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

void quantize_row_u8(const float* x, int64_t k, uint8_t* q, float* scale, int32_t* zero) {
  float lo = 0.0f, hi = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < k; ++i) {
    finite = finite && std::isfinite(x[i]);
    lo = std::fmin(lo, x[i]);
    hi = std::fmax(hi, x[i]);
  }
  const float s = hi / 255.0f - lo / 255.0f;
  const float inv = s == 0.0f ? 0.0f : 1.0f / s;
  if (!finite || !std::isfinite(inv) || s == 0.0f) {
    std::memset(q, 0, static_cast<size_t>(k));
    *scale = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    *zero = 0;
    return;
  }
  const float z = std::fmin(std::fmax(std::nearbyint(-lo * inv), 0.0f), 255.0f);
  for (int64_t i = 0; i < k; ++i)
    q[i] = static_cast<uint8_t>(std::fmin(std::fmax(std::nearbyint(x[i] * inv) + z, 0.0f), 255.0f));
  *scale = s;
  *zero = static_cast<int32_t>(z);
}

}  // namespace quantized
}  // namespace kiln
