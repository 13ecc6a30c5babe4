// aten::scaled_dot_product_attention.default as one kernel: softmax(q k^T * scale + mask) v with an
// online (running-max) softmax, so no score buffer is needed; the output row is the accumulator.
// q [B, H, L, E] (or [H, L, E]), k [B, Hkv, S, E], v [B, Hkv, S, Ev]; H a multiple of Hkv with
// enable_gqa. attn_mask: bool (true = attend) or the dtype of q, broadcastable to [B, H, L, S].
// A row with every position masked gives zeros, as PyTorch's CPU kernel does. dropout_p must be 0.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/kernel_args.h"
#include "portable/portable_ops.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

struct Attn {
  int64_t b = 1, h = 1, hkv = 1, l = 0, s = 0, e = 0, ev = 0;
  double scale = 1;
  bool causal = false;
  const Tensor* mask = nullptr;
  int64_t mst[4] = {};  // element strides of the mask over [B, H, L, S] (0 where broadcast)
};

template <typename T>
void attend(const Attn& a, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& y) {
  const T* qp = q.data_as<const T>();
  const T* kp = k.data_as<const T>();
  const T* vp = v.data_as<const T>();
  T* yp = y.data_as<T>();
  const bool bool_mask = a.mask != nullptr && a.mask->dtype() == ScalarType::Bool;
  const uint8_t* mb = bool_mask ? a.mask->data_as<const uint8_t>() : nullptr;
  const T* mf = a.mask != nullptr && !bool_mask ? a.mask->data_as<const T>() : nullptr;
  const int64_t group = a.h / a.hkv;
  parallel_for(a.b * a.h * a.l, grain_for(sat_mul(a.s, a.e + a.ev)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t li = r % a.l, hi = (r / a.l) % a.h, bi = r / (a.l * a.h);
      const T* qrow = qp + r * a.e;
      const int64_t kv = (bi * a.hkv + hi / group) * a.s;
      const T* kbase = kp + kv * a.e;
      const T* vbase = vp + kv * a.ev;
      T* out = yp + r * a.ev;
      const int64_t moff = bi * a.mst[0] + hi * a.mst[1] + li * a.mst[2];
      for (int64_t j = 0; j < a.ev; ++j) out[j] = 0;
      double mx = -std::numeric_limits<double>::infinity(), denom = 0;
      const int64_t s_end = a.causal ? std::min(a.s, li + 1) : a.s;
      for (int64_t si = 0; si < s_end; ++si) {
        if (mb != nullptr && mb[moff + si * a.mst[3]] == 0) continue;
        const T* krow = kbase + si * a.e;
        double score = 0;
        for (int64_t j = 0; j < a.e; ++j) score += static_cast<double>(qrow[j]) * static_cast<double>(krow[j]);
        score *= a.scale;
        if (mf != nullptr) score += static_cast<double>(mf[moff + si * a.mst[3]]);
        if (score == -std::numeric_limits<double>::infinity()) continue;
        const T* vrow = vbase + si * a.ev;
        if (score > mx) {  // rescale what was accumulated so far
          const double c = std::exp(mx - score);
          denom *= c;
          for (int64_t j = 0; j < a.ev; ++j) out[j] = static_cast<T>(out[j] * c);
          mx = score;
        }
        const double w = std::exp(score - mx);  // NaN scores propagate through w
        denom += w;
        for (int64_t j = 0; j < a.ev; ++j) out[j] = static_cast<T>(out[j] + w * vrow[j]);
      }
      if (denom != 0 || denom != denom) {
        const double inv = 1.0 / denom;
        for (int64_t j = 0; j < a.ev; ++j) out[j] = static_cast<T>(out[j] * inv);
      }
    }
  });
}

}  // namespace

Status sdpa_run(KernelContext&, Inputs in, Outputs out) {
  constexpr const char* op = "aten::scaled_dot_product_attention.default";
  const Tensor *q, *k, *v, *mask;
  double dropout, scale = 0;
  bool causal, has_scale, gqa;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 8, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "query", &q));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "key", &k));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "value", &v));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 3, "attn_mask", &mask));
  KILN_RETURN_IF_ERROR(scalar_arg(op, in, 4, "dropout_p", &dropout));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 5, "is_causal", &causal));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 6, "scale", &scale, &has_scale));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 7, "enable_gqa", &gqa));
  Tensor& y = *out[0];
  KILN_CHECK_OR_RETURN(dropout == 0, KernelFailure, "%s: dropout_p must be 0, got %g", op, dropout);
  KILN_CHECK_OR_RETURN(q->dtype() == ScalarType::Float32 || q->dtype() == ScalarType::Float64, KernelFailure,
                       "%s: query must be f32 or f64, got %s", op, describe(*q).c_str());
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *q, "query", *k, "key"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *q, "query", *v, "value"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *q, "query", y, "output"));
  const int nd = q->dim();
  KILN_CHECK_OR_RETURN((nd == 3 || nd == 4) && k->dim() == nd && v->dim() == nd, KernelFailure,
                       "%s: query, key and value must all be 3-D or 4-D, got %s, %s and %s", op, describe(*q).c_str(),
                       describe(*k).c_str(), describe(*v).c_str());
  Attn a;
  a.b = nd == 4 ? q->size(0) : 1;
  a.h = q->size(-3), a.l = q->size(-2), a.e = q->size(-1);
  a.hkv = k->size(-3), a.s = k->size(-2), a.ev = v->size(-1);
  const bool shapes_ok = (nd == 3 || (k->size(0) == a.b && v->size(0) == a.b)) && k->size(-1) == a.e &&
                         v->size(-3) == a.hkv && v->size(-2) == a.s && a.hkv > 0 &&
                         (a.hkv == a.h || (gqa && a.h % a.hkv == 0));
  KILN_CHECK_OR_RETURN(shapes_ok || (a.h == 0 && a.hkv == 0), KernelFailure,
                       "%s: incompatible query %s, key %s and value %s (enable_gqa=%d)", op, describe(*q).c_str(),
                       describe(*k).c_str(), describe(*v).c_str(), gqa ? 1 : 0);
  if (a.hkv == 0) a.hkv = 1;
  KILN_CHECK_OR_RETURN(!(causal && mask != nullptr), KernelFailure, "%s: is_causal and attn_mask cannot both be given", op);
  a.causal = causal;
  a.scale = has_scale ? scale : (a.e > 0 ? 1.0 / std::sqrt(static_cast<double>(a.e)) : 1.0);
  if (mask != nullptr) {
    KILN_CHECK_OR_RETURN(mask->dtype() == ScalarType::Bool || mask->dtype() == q->dtype(), KernelFailure,
                         "%s: attn_mask must be bool or %s, got %s", op, scalar_type_name(q->dtype()),
                         describe(*mask).c_str());
    KILN_CHECK_OR_RETURN(mask->dim() <= 4, KernelFailure, "%s: attn_mask %s has more than 4 dims", op,
                         describe(*mask).c_str());
    const int64_t full[4] = {a.b, a.h, a.l, a.s};
    int64_t s = 1;
    for (int i = mask->dim() - 1; i >= 0; --i) {
      const int d = i + 4 - mask->dim();
      const int64_t ms = mask->sizes()[i];
      KILN_CHECK_OR_RETURN(ms == 1 || ms == full[d], KernelFailure,
                           "%s: attn_mask %s cannot be broadcast to [%lld, %lld, %lld, %lld]", op, describe(*mask).c_str(),
                           static_cast<long long>(a.b), static_cast<long long>(a.h), static_cast<long long>(a.l),
                           static_cast<long long>(a.s));
      a.mst[d] = ms == 1 ? 0 : s;
      s *= ms;
    }
    a.mask = mask;
  }
  Dims sizes(q->sizes());
  sizes[nd - 1] = a.ev;
  KILN_RETURN_IF_ERROR(resize_output(op, &y, sizes.span()));
  if (y.numel() == 0) return Status::ok();
  if (q->dtype() == ScalarType::Float32) attend<float>(a, *q, *k, *v, y);
  else attend<double>(a, *q, *k, *v, y);
  return Status::ok();
}

KILN_REGISTER_KERNEL("aten::scaled_dot_product_attention.default", "*", sdpa_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
