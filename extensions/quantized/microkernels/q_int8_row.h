// compute="int8_row" for one instruction-set level (q_kernels.h: QI8RowPanels, QKernels::quantize_u8
// and gemm_i8_row): included by q_panels.inc inside its level namespace, so compiled once per level.
//
// Both steps repeat the reference (quant.cpp's quantize_row_u8, portable.cpp's linear_int8_row)
// operation for operation, so the results are bit-exact:
// - quantize_u8: the row's min and max (exact in any order once no NaN or infinity is present; rows
//   that hold one take the scalar code, the reference's loop), then the same float operations;
// - gemm_i8_row: one exact int32 sum per output over all of k, minus zero * wsum, then
//   (scale * d) * float(sum) (+ bias): no FMA (-ffp-contract=off).
//
// avx512_vnni: tiles of 8 rows times 3 panels (48 columns: 24 int32 sums, 3 weight vectors and a
// broadcast of 32 registers); per step of 4 k, each row's 4 bytes broadcast and one vpdpbusd (x the
// unsigned operand, the weights the signed one) per panel.
// A lane adds at most 255 * 128 per k, so while k <= kInt8RowMaxK the int32 sums never wrap.
// Other levels: the same sums in plain C++ (the compiler vectorizes them), one row and panel at a time.

// The reference's quantize_row_u8 (quant.cpp), then zeros up to ldq.
inline void quantize_u8_scalar(const float* x, int64_t k, int64_t ldq, uint8_t* q, float* scale, int32_t* zero) {
  float lo = 0.0f, hi = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < k; ++i) {
    finite = finite && std::isfinite(x[i]);
    lo = std::fmin(lo, x[i]);
    hi = std::fmax(hi, x[i]);
  }
  const float s = hi / 255.0f - lo / 255.0f;
  const float inv = s == 0.0f ? 0.0f : 1.0f / s;
  std::memset(q, 0, static_cast<size_t>(ldq));
  if (!finite || !std::isfinite(inv) || s == 0.0f) {
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

#if defined(__AVX512F__)
void quantize_u8(const float* x, int64_t k, int64_t ldq, uint8_t* q, float* scale, int32_t* zero) {
  const __m512 finite_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  __mmask16 finite = 0xffff;
  for (int64_t i = 0; i < k; i += 16) {
    const __mmask16 lanes = k - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (k - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, x + i);                    // lanes past k read as 0: min(lo, 0) is lo
    finite &= _mm512_cmp_ps_mask(_mm512_abs_ps(v), finite_max, _CMP_LE_OQ);  // false for NaN
    lo = _mm512_min_ps(lo, v);
    hi = _mm512_max_ps(hi, v);
  }
  if (finite != 0xffff) return quantize_u8_scalar(x, k, ldq, q, scale, zero);
  const float lo_s = _mm512_reduce_min_ps(lo), hi_s = _mm512_reduce_max_ps(hi);
  const float s = hi_s / 255.0f - lo_s / 255.0f;
  const float inv = s == 0.0f ? 0.0f : 1.0f / s;
  if (!std::isfinite(inv) || s == 0.0f) return quantize_u8_scalar(x, k, ldq, q, scale, zero);
  const float z = std::fmin(std::fmax(std::nearbyint(-lo_s * inv), 0.0f), 255.0f);
  const __m512 vinv = _mm512_set1_ps(inv), vz = _mm512_set1_ps(z);
  const __m512 vmin = _mm512_setzero_ps(), vmax = _mm512_set1_ps(255.0f);
  for (int64_t i = 0; i < ldq; i += 16) {
    const __mmask16 in_k = i >= k        ? __mmask16(0)
                           : k - i >= 16 ? __mmask16(0xffff)
                                         : static_cast<__mmask16>((1u << (k - i)) - 1);
    const __mmask16 in_row = ldq - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (ldq - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(in_k, x + i);
    const __m512 r =
        _mm512_add_ps(_mm512_roundscale_ps(_mm512_mul_ps(v, vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    const __m512i qi = _mm512_maskz_cvtps_epi32(in_k, _mm512_min_ps(_mm512_max_ps(r, vmin), vmax));
    _mm_mask_storeu_epi8(q + i, in_row, _mm512_cvtepi32_epi8(qi));  // past k: zeros
  }
  *scale = s;
  *zero = static_cast<int32_t>(z);
}
#else
void quantize_u8(const float* x, int64_t k, int64_t ldq, uint8_t* q, float* scale, int32_t* zero) {
  quantize_u8_scalar(x, k, ldq, q, scale, zero);
}
#endif

#if defined(__AVX512VNNI__)
constexpr int kRowTilePanels = 3;

// Up to 8 rows of x (from row r0) against up to 3 panels from p, the 24 sums over all of k in
// registers. Named variables, not an array: GCC 12 keeps an array of 24 vectors in memory and copies
// each sum at every step. A short tile repeats its last row or panel (in bounds) and stores only
// the real ones.
void i8_row_tile(const QI8RowPanels& w, int64_t p, int panels, const QI8RowInput& x, int64_t r0, int rows,
                 const float* bias, float* y, int64_t ldy) {
  const int64_t header = 2 * 4 * kI8RowCols;
  const uint8_t* w0 = w.data + p * w.panel_bytes + header;
  const uint8_t* w1 = w.data + (p + std::min(1, panels - 1)) * w.panel_bytes + header;
  const uint8_t* w2 = w.data + (p + std::min(2, panels - 1)) * w.panel_bytes + header;
  const uint8_t* xr[8];
  for (int r = 0; r < 8; ++r) xr[r] = x.q + (r0 + std::min(r, rows - 1)) * x.ldq;
  // clang-format off
#define KILN_ROW_SUMS(r) __m512i a##r##0 = _mm512_setzero_si512(), a##r##1 = a##r##0, a##r##2 = a##r##0;
  KILN_ROW_SUMS(0) KILN_ROW_SUMS(1) KILN_ROW_SUMS(2) KILN_ROW_SUMS(3)
  KILN_ROW_SUMS(4) KILN_ROW_SUMS(5) KILN_ROW_SUMS(6) KILN_ROW_SUMS(7)
#undef KILN_ROW_SUMS
  for (int64_t s = 0; s < w.steps; ++s) {
    const __m512i v0 = _mm512_loadu_si512(w0 + 64 * s), v1 = _mm512_loadu_si512(w1 + 64 * s),
                  v2 = _mm512_loadu_si512(w2 + 64 * s);
#define KILN_ROW_STEP(r)                              \
    {                                                 \
      int32_t four;                                   \
      std::memcpy(&four, xr[r] + 4 * s, sizeof four); \
      const __m512i xb = _mm512_set1_epi32(four);     \
      a##r##0 = _mm512_dpbusd_epi32(a##r##0, xb, v0); \
      a##r##1 = _mm512_dpbusd_epi32(a##r##1, xb, v1); \
      a##r##2 = _mm512_dpbusd_epi32(a##r##2, xb, v2); \
    }
    KILN_ROW_STEP(0) KILN_ROW_STEP(1) KILN_ROW_STEP(2) KILN_ROW_STEP(3)
    KILN_ROW_STEP(4) KILN_ROW_STEP(5) KILN_ROW_STEP(6) KILN_ROW_STEP(7)
#undef KILN_ROW_STEP
  }
  // clang-format on
  // (scale * d) * float(sum - zero * wsum) (+ bias) for row r and panel i, the columns past n masked.
  auto store = [&](int r, int i, __m512i sum) {
    if (r >= rows || i >= panels) return;
    const int64_t j0 = (p + i) * kI8RowCols;
    const int lanes = static_cast<int>(std::min<int64_t>(kI8RowCols, w.n - j0));
    const __mmask16 mask = lanes == 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << lanes) - 1);
    const uint8_t* head = w.data + (p + i) * w.panel_bytes;
    const __m512 d = _mm512_loadu_ps(head);
    const __m512i wsum = _mm512_loadu_si512(head + 4 * kI8RowCols);
    sum = _mm512_sub_epi32(sum, _mm512_mullo_epi32(_mm512_set1_epi32(x.zero[r0 + r]), wsum));
    __m512 out = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(x.scale[r0 + r]), d), _mm512_cvtepi32_ps(sum));
    if (bias != nullptr) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(mask, bias + j0));
    _mm512_mask_storeu_ps(y + (r0 + r) * ldy + j0, mask, out);
  };
  // clang-format off
#define KILN_ROW_STORE(r) store(r, 0, a##r##0), store(r, 1, a##r##1), store(r, 2, a##r##2);
  KILN_ROW_STORE(0) KILN_ROW_STORE(1) KILN_ROW_STORE(2) KILN_ROW_STORE(3)
  KILN_ROW_STORE(4) KILN_ROW_STORE(5) KILN_ROW_STORE(6) KILN_ROW_STORE(7)
#undef KILN_ROW_STORE
  // clang-format on
}

// Tiles of 3 panels (their bytes stay in L1 or L2 while every tile of 8 rows reads them).
void gemm_i8_row(const QI8RowPanels& w, int64_t p0, int64_t p1, const QI8RowInput& x, int rows, const float* bias,
                 float* y, int64_t ldy) {
  for (int64_t p = p0; p < p1; p += kRowTilePanels) {
    const int panels = static_cast<int>(std::min<int64_t>(kRowTilePanels, p1 - p));
    for (int r0 = 0; r0 < rows; r0 += 8) i8_row_tile(w, p, panels, x, r0, std::min(8, rows - r0), bias, y, ldy);
  }
}
#else
constexpr int kRowTilePanels = 1;

// One row against one panel: 64 int32 partial sums (4 per column), added per column at the end.
void gemm_i8_row(const QI8RowPanels& w, int64_t p0, int64_t p1, const QI8RowInput& x, int rows, const float* bias,
                 float* y, int64_t ldy) {
  const int64_t header = 2 * 4 * kI8RowCols;
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* panel = w.data + p * w.panel_bytes;
    float d[kI8RowCols];
    int32_t wsum[kI8RowCols];
    std::memcpy(d, panel, sizeof d);
    std::memcpy(wsum, panel + 4 * kI8RowCols, sizeof wsum);
    const int8_t* values = reinterpret_cast<const int8_t*>(panel + header);
    const int64_t j0 = p * kI8RowCols;
    const int lanes = static_cast<int>(std::min<int64_t>(kI8RowCols, w.n - j0));
    for (int r = 0; r < rows; ++r) {
      const uint8_t* xq = x.q + r * x.ldq;
      int32_t part[4 * kI8RowCols] = {};
      for (int64_t s = 0; s < w.steps; ++s) {
        const int8_t* ws = values + 64 * s;
        const uint8_t* xs = xq + 4 * s;
        for (int e = 0; e < 4 * kI8RowCols; ++e) part[e] += static_cast<int32_t>(xs[e & 3]) * ws[e];
      }
      float* yr = y + r * ldy + j0;
      for (int c = 0; c < lanes; ++c) {
        const int32_t isum = part[4 * c] + part[4 * c + 1] + part[4 * c + 2] + part[4 * c + 3];
        const float out = x.scale[r] * d[c] * static_cast<float>(isum - x.zero[r] * wsum[c]);
        yr[c] = bias != nullptr ? out + bias[j0 + c] : out;
      }
    }
  }
}
#endif
