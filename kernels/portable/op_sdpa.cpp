// aten::scaled_dot_product_attention.default as one kernel: softmax(q k^T * scale + mask) v with an
// online (running-max) softmax, so no score buffer is needed; the output row is the accumulator.
// Shapes and masks: common/sdpa_args.h. A row with every position masked gives zeros, as PyTorch's
// CPU kernel does. dropout_p must be 0. kiln::sdpa_rows's caches may be float16 or bfloat16 under a
// float32 query: each element is widened exactly as it is read.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/half.h"
#include "common/sdpa_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

// How a key or value element of type C is read.
struct Wide {
  template <typename C>
  static double get(C x) {
    return static_cast<double>(x);
  }
};
struct FromHalf {
  static double get(uint16_t h) { return half_to_float(h); }
};
struct FromBfloat16 {
  static double get(uint16_t h) { return bfloat16_to_float(h); }
};

template <typename T, typename C = T, typename Read = Wide>
void attend(const SdpaArgs& a, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& y) {
  const T* qp = q.data_as<const T>();
  const C* kp = k.data_as<const C>();
  const C* vp = v.data_as<const C>();
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
      const C* kbase = a.rows != nullptr ? kp : kp + kv * a.e;  // sdpa's [S, E] keys of this head
      const C* vbase = a.rows != nullptr ? vp : vp + kv * a.ev;
      T* out = yp + r * a.ev;
      const int64_t moff = bi * a.mask_strides[0] + hi * a.mask_strides[1] + li * a.mask_strides[2];
      for (int64_t j = 0; j < a.ev; ++j) out[j] = 0;
      double mx = -std::numeric_limits<double>::infinity(), denom = 0;
      const int64_t s_end = a.causal ? std::min(a.s, li + 1) : a.s;
      for (int64_t si = 0; si < s_end; ++si) {
        if (mb != nullptr && mb[moff + si * a.mask_strides[3]] == 0) continue;
        const int64_t row = a.rows != nullptr ? sdpa_row(a, kv + si) : -1;
        const C* krow = a.rows != nullptr ? kp + row * a.e : kbase + si * a.e;
        double score = 0;
        for (int64_t j = 0; j < a.e; ++j) score += static_cast<double>(qrow[j]) * Read::get(krow[j]);
        score *= a.scale;
        if (mf != nullptr) score += static_cast<double>(mf[moff + si * a.mask_strides[3]]);
        if (score == -std::numeric_limits<double>::infinity()) continue;
        const C* vrow = a.rows != nullptr ? vp + row * a.ev : vbase + si * a.ev;
        if (score > mx) {  // rescale what was accumulated so far
          const double c = std::exp(mx - score);
          denom *= c;
          for (int64_t j = 0; j < a.ev; ++j) out[j] = static_cast<T>(out[j] * c);
          mx = score;
        }
        const double w = std::exp(score - mx);  // NaN scores propagate through w
        denom += w;
        for (int64_t j = 0; j < a.ev; ++j) out[j] = static_cast<T>(out[j] + w * Read::get(vrow[j]));
      }
      if (denom != 0 || denom != denom) {
        const double inv = 1.0 / denom;
        for (int64_t j = 0; j < a.ev; ++j) out[j] = static_cast<T>(out[j] * inv);
      }
    }
  });
}

Status attend_checked(const SdpaArgs& a, Outputs out) {
  Tensor& y = *out[0];
  if (y.numel() == 0) return Status::ok();
  if (a.cache_dtype == ScalarType::Float16)
    attend<float, uint16_t, FromHalf>(a, *a.q, *a.k, *a.v, y);
  else if (a.cache_dtype == ScalarType::BFloat16)
    attend<float, uint16_t, FromBfloat16>(a, *a.q, *a.k, *a.v, y);
  else if (a.q->dtype() == ScalarType::Float32)
    attend<float>(a, *a.q, *a.k, *a.v, y);
  else
    attend<double>(a, *a.q, *a.k, *a.v, y);
  return Status::ok();
}

}  // namespace

Status sdpa_run(KernelContext&, Inputs in, Outputs out) {
  SdpaArgs a;
  KILN_RETURN_IF_ERROR(sdpa_args("aten::scaled_dot_product_attention.default", in, out, &a));
  return attend_checked(a, out);
}

// kiln::sdpa_rows: the same loops, key s of each (batch, kv head) read in place from its cache row.
Status sdpa_rows_run(KernelContext&, Inputs in, Outputs out) {
  SdpaArgs a;
  KILN_RETURN_IF_ERROR(sdpa_rows_args("kiln::sdpa_rows.default", in, out, &a));
  return attend_checked(a, out);
}

KILN_REGISTER_KERNEL("aten::scaled_dot_product_attention.default", "*", sdpa_run);
KILN_REGISTER_KERNEL("kiln::sdpa_rows.default", "*", sdpa_rows_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
