// Argument checks of scaled_dot_product_attention (sdpa_args.h).
#include "sdpa_args.h"

#include <cmath>

namespace kiln {
namespace kernels {

namespace {

// What sdpa_args and sdpa_rows_args share once b, h, hkv, l, s, e and ev are known: the causal flag,
// the scale, the mask's broadcast and the output's sizes (q's with Ev last).
Status finish_sdpa_args(const char* op, const Tensor* mask, bool causal, bool has_scale, double scale, SdpaArgs* a,
                        Tensor* y) {
  if (a->hkv == 0) a->hkv = 1;
  KILN_CHECK_OR_RETURN(!(causal && mask != nullptr), KernelFailure, "%s: is_causal and attn_mask cannot both be given",
                       op);
  const Tensor* q = a->q;
  a->causal = causal;
  a->scale = has_scale ? scale : (a->e > 0 ? 1.0 / std::sqrt(static_cast<double>(a->e)) : 1.0);
  for (int64_t& st : a->mask_strides) st = 0;
  if (mask != nullptr) {
    KILN_CHECK_OR_RETURN(mask->dtype() == ScalarType::Bool || mask->dtype() == q->dtype(), KernelFailure,
                         "%s: attn_mask must be bool or %s, got %s", op, scalar_type_name(q->dtype()),
                         describe(*mask).c_str());
    KILN_CHECK_OR_RETURN(mask->dim() <= 4, KernelFailure, "%s: attn_mask %s has more than 4 dims", op,
                         describe(*mask).c_str());
    const int64_t full[4] = {a->b, a->h, a->l, a->s};
    int64_t s = 1;
    for (int i = mask->dim() - 1; i >= 0; --i) {
      const int d = i + 4 - mask->dim();
      const int64_t ms = mask->sizes()[i];
      KILN_CHECK_OR_RETURN(ms == 1 || ms == full[d], KernelFailure,
                           "%s: attn_mask %s cannot be broadcast to [%lld, %lld, %lld, %lld]", op,
                           describe(*mask).c_str(), static_cast<long long>(a->b), static_cast<long long>(a->h),
                           static_cast<long long>(a->l), static_cast<long long>(a->s));
      a->mask_strides[d] = ms == 1 ? 0 : s;
      s *= ms;
    }
    a->mask = mask;
  }
  Dims sizes(q->sizes());
  sizes[q->dim() - 1] = a->ev;
  return resize_output(op, y, sizes.span());
}

}  // namespace

Status sdpa_args(const char* op, Inputs in, Outputs out, SdpaArgs* a) {
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
  a->q = q, a->k = k, a->v = v, a->mask = nullptr, a->rows = nullptr, a->cache_dtype = q->dtype();
  a->b = nd == 4 ? q->size(0) : 1;
  a->h = q->size(-3), a->l = q->size(-2), a->e = q->size(-1);
  a->hkv = k->size(-3), a->s = k->size(-2), a->ev = v->size(-1);
  const bool shapes_ok = (nd == 3 || (k->size(0) == a->b && v->size(0) == a->b)) && k->size(-1) == a->e &&
                         v->size(-3) == a->hkv && v->size(-2) == a->s && a->hkv > 0 &&
                         (a->hkv == a->h || (gqa && a->h % a->hkv == 0));
  KILN_CHECK_OR_RETURN(shapes_ok || (a->h == 0 && a->hkv == 0), KernelFailure,
                       "%s: incompatible query %s, key %s and value %s (enable_gqa=%d)", op, describe(*q).c_str(),
                       describe(*k).c_str(), describe(*v).c_str(), gqa ? 1 : 0);
  return finish_sdpa_args(op, mask, causal, has_scale, scale, a, &y);
}

Status sdpa_rows_args(const char* op, Inputs in, Outputs out, SdpaArgs* a) {
  const Tensor *q, *k, *v, *rows, *mask;
  double scale = 0;
  int64_t kv_heads;
  bool causal, has_scale;
  KILN_RETURN_IF_ERROR(check_arity(op, in, out, 8, 1));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 0, "query", &q));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 1, "k_cache", &k));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 2, "v_cache", &v));
  KILN_RETURN_IF_ERROR(tensor_arg(op, in, 3, "rows", &rows));
  KILN_RETURN_IF_ERROR(optional_tensor_arg(op, in, 4, "attn_mask", &mask));
  KILN_RETURN_IF_ERROR(int_arg(op, in, 5, "kv_heads", &kv_heads));
  KILN_RETURN_IF_ERROR(bool_arg(op, in, 6, "is_causal", &causal));
  KILN_RETURN_IF_ERROR(optional_scalar_arg(op, in, 7, "scale", &scale, &has_scale));
  Tensor& y = *out[0];
  KILN_CHECK_OR_RETURN(q->dtype() == ScalarType::Float32 || q->dtype() == ScalarType::Float64, KernelFailure,
                       "%s: query must be f32 or f64, got %s", op, describe(*q).c_str());
  // A 16-bit cache under a float32 query: both caches of that dtype; else both of the query's.
  const bool compact_cache =
      q->dtype() == ScalarType::Float32 && (k->dtype() == ScalarType::Float16 || k->dtype() == ScalarType::BFloat16);
  const Tensor& dtype_of_caches = compact_cache ? *k : *q;
  const char* dtype_from = compact_cache ? "k_cache" : "query";
  KILN_RETURN_IF_ERROR(check_same_dtype(op, dtype_of_caches, dtype_from, *k, "k_cache"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, dtype_of_caches, dtype_from, *v, "v_cache"));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, *q, "query", y, "output"));
  KILN_CHECK_OR_RETURN(
      q->dim() == 4 && k->dim() == 2 && v->dim() == 2 && k->size(0) == v->size(0) && k->size(1) == q->size(3),
      KernelFailure, "%s: incompatible query %s (4-D), k_cache %s and v_cache %s (2-D, same rows)", op,
      describe(*q).c_str(), describe(*k).c_str(), describe(*v).c_str());
  KILN_CHECK_OR_RETURN(rows->dtype() == ScalarType::Int64 && rows->dim() == 1, KernelFailure,
                       "%s: rows must be a 1-D i64 tensor, got %s", op, describe(*rows).c_str());
  a->q = q, a->k = k, a->v = v, a->mask = nullptr, a->cache_dtype = k->dtype();
  a->b = q->size(0), a->h = q->size(1), a->l = q->size(2), a->e = q->size(3), a->ev = v->size(1);
  KILN_CHECK_OR_RETURN(kv_heads > 0 && kv_heads <= a->h && a->h % kv_heads == 0, KernelFailure,
                       "%s: kv_heads %lld must divide the %lld query heads", op, static_cast<long long>(kv_heads),
                       static_cast<long long>(a->h));
  a->hkv = kv_heads;
  const int64_t n = rows->numel(), per = sat_mul(a->b, a->hkv);
  KILN_CHECK_OR_RETURN(per > 0 ? n % per == 0 : n == 0, KernelFailure,
                       "%s: rows %s is not a whole number of keys for %lld batches of %lld kv heads", op,
                       describe(*rows).c_str(), static_cast<long long>(a->b), static_cast<long long>(a->hkv));
  a->s = per > 0 ? n / per : 0;
  a->cache_rows = k->size(0);
  const int64_t* r = rows->data_as<const int64_t>();
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK_OR_RETURN(r[i] >= 0 && r[i] < a->cache_rows, KernelFailure,
                         "%s: row index %lld (rows[%lld]) is out of bounds for caches of %lld rows", op,
                         static_cast<long long>(r[i]), static_cast<long long>(i),
                         static_cast<long long>(a->cache_rows));
  a->rows = r;
  return finish_sdpa_args(op, mask, causal, has_scale, scale, a, &y);
}

}  // namespace kernels
}  // namespace kiln
