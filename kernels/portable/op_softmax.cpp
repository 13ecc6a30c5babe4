// aten::_softmax.default and aten::_log_softmax.default: max-shifted, double-accumulated.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/softmax_args.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

template <typename T>
void softmax_typed(const Tensor& x, Tensor& y, int64_t outer, int64_t len, int64_t inner, bool log) {
  const T* xp = x.data_as<const T>();
  T* yp = y.data_as<T>();
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(len, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const T* in = xp + r * len;
                     T* o = yp + r * len;
                     T mx = -std::numeric_limits<T>::infinity();
                     for (int64_t i = 0; i < len; ++i) mx = in[i] > mx || std::isnan(in[i]) ? in[i] : mx;
                     if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
                     double sum = 0;
                     for (int64_t i = 0; i < len; ++i) {
                       const T e = std::exp(in[i] - mx);
                       if (!log) o[i] = e;
                       sum += e;
                     }
                     if (log) {
                       // (x - max) - log(sum), not x - (max + log(sum)): max + log(sum) would round away
                       // log(sum) once max is large (a logit of 1e8 has an ulp of 8).
                       const T log_sum = static_cast<T>(std::log(sum));
                       for (int64_t i = 0; i < len; ++i) o[i] = (in[i] - mx) - log_sum;
                     } else {
                       const T inv = static_cast<T>(1.0 / sum);
                       for (int64_t i = 0; i < len; ++i) o[i] *= inv;
                     }
                   }
                 });
    return;
  }
  // The softmax dim is strided: process `kChunk` neighbouring columns at once
  // so each pass over the dim reads contiguous memory.
  constexpr int64_t kChunk = 128;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  parallel_for(outer * chunks, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(len * kChunk, 1)),
               [&](int64_t t0, int64_t t1) {
                 T mx[kChunk];
                 double sum[kChunk];
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t o = t / chunks, c0 = (t % chunks) * kChunk, n = std::min(kChunk, inner - c0);
                   const T* in = xp + o * len * inner + c0;
                   T* out = yp + o * len * inner + c0;
                   for (int64_t j = 0; j < n; ++j) mx[j] = -std::numeric_limits<T>::infinity(), sum[j] = 0;
                   for (int64_t i = 0; i < len; ++i)
                     for (int64_t j = 0; j < n; ++j) {
                       const T v = in[i * inner + j];
                       mx[j] = v > mx[j] || std::isnan(v) ? v : mx[j];
                     }
                   for (int64_t j = 0; j < n; ++j)
                     if (std::isinf(mx[j]) && mx[j] < 0) mx[j] = 0;
                   for (int64_t i = 0; i < len; ++i)
                     for (int64_t j = 0; j < n; ++j) {
                       const T e = std::exp(in[i * inner + j] - mx[j]);
                       if (!log) out[i * inner + j] = e;
                       sum[j] += e;
                     }
                   for (int64_t j = 0; j < n; ++j) sum[j] = log ? std::log(sum[j]) : 1.0 / sum[j];
                   for (int64_t i = 0; i < len; ++i)
                     for (int64_t j = 0; j < n; ++j) {
                       T& r = out[i * inner + j];
                       r = log ? (in[i * inner + j] - mx[j]) - static_cast<T>(sum[j]) : r * static_cast<T>(sum[j]);
                     }
                 }
               });
}

Status softmax_common(const char* op, bool log, Inputs in, Outputs out) {
  SoftmaxArgs a;
  KILN_RETURN_IF_ERROR(softmax_args(op, in, out, &a));
  if (a.x->numel() == 0) return Status::ok();
  if (a.x->dtype() == ScalarType::Float32)
    softmax_typed<float>(*a.x, *out[0], a.outer, a.len, a.inner, log);
  else
    softmax_typed<double>(*a.x, *out[0], a.outer, a.len, a.inner, log);
  return Status::ok();
}

}  // namespace

Status softmax_run(KernelContext&, Inputs in, Outputs out) {
  return softmax_common("aten::_softmax.default", false, in, out);
}
Status log_softmax_run(KernelContext&, Inputs in, Outputs out) {
  return softmax_common("aten::_log_softmax.default", true, in, out);
}

KILN_REGISTER_KERNEL("aten::_softmax.default", "f32|f64", softmax_run);
KILN_REGISTER_KERNEL("aten::_log_softmax.default", "f32|f64", log_softmax_run);

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
