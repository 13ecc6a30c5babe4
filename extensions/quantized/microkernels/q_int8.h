// compute="int8" for one instruction-set level (q_kernels.h: QI8Panels, QKernels::quantize_i8 and
// gemm_i8): included by q_panels.inc inside its level namespace, so compiled once per level.
//
// Both steps repeat the reference (portable.cpp, quant.cpp) operation for operation:
// - quantize_i8: per 32-block amax, d = amax / 127, inv = 1 / d, qx = clamp(round-half-even(x * inv))
//   (the vector rounding is the same IEEE operation as std::nearbyint in the default mode, and
//   max(v, -127) returns -127 for a NaN v like std::fmax); blocks that hold a NaN or an infinity,
//   and a short last block, take the scalar code, which is the reference's loop;
// - gemm_i8: the integer dot product of each block is exact whatever the order, then per block
//   inner = d * isum (+ m * qsum), acc += dx * inner, blocks in order, bias last: the reference's
//   float operations in its order (no FMA: -ffp-contract=off), so the result is bit-exact.
//
// AVX2 (and the AVX-512 level, which runs the same 256-bit code with more rows per tile, having 32
// vector registers): vpmaddubsw takes an unsigned and a signed byte operand and saturates the sum of
// each pair of products to int16:
//   q4: unsigned = the raw nibble 0..15, signed = qx in [-127, 127]: a pair is at most
//       2 * 15 * 127 = 3810, and the 8 pairs one block adds into an int16 lane at most 30480, below
//       32767, so the int16 sums are exact and widen once per block (vpmaddwd by 1); q4_0 subtracts
//       8 * sum(qx) afterwards (sum((q - 8) x) = sum(q x) - 8 sum(x), exact in integers);
//   q8_0: the sign trick: unsigned = |w| (0..128; vpabsb of -128 is 0x80, 128 unsigned), signed =
//       qx with w's sign (vpsignb; |qx| <= 127, so the negation never overflows): a pair is at most
//       2 * 128 * 127 = 32512 < 32767, so no saturation; widened at once (vpmaddwd by 1).
// avx512_vnni: vpdpbusd multiplies 4 unsigned bytes by 4 signed ones and adds the 4 products to an
// int32 lane without saturating. The weights are the unsigned operand and x the signed one, which
// spares the per-step sum of the weights that an unsigned x needs (q6_k, below): 4-bit
// nibbles (0..15) and q5_1's and q5_k's values (0..31) as they are; q8_0's and q5_0's signed values
// stored + 128 (0..255, QI8Panels::value_bias), then sum((w + 128) qx) - 128 qsum = sum(w qx). q6_k,
// whose scales apply per half block while qsum is per block, keeps its signed values and takes x + 128
// as the unsigned operand: sum((qx + 128) w) - 128 sum(w), sum(w) per column and half one more
// vpdpbusd of the weights against bytes of 1, shared by every row of the tile. A lane adds at most
// 32 * 255 * 128 < 2^21: exact; the K-quants' scales multiply each half's exact sum (vpmulld).
// 512-bit vectors hold two panels (16 columns).
// NEON: widening multiplies (below); the baseline: the same loops in plain C++ on int32.

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The reference's quantize_row_int8 (quant.cpp) for one block of n <= 32 elements, plus its sum.
inline void quantize_block_scalar(const float* xb, int64_t n, int8_t* qx, float* dx, int32_t* qsum) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(xb[i])) amax = xb[i];
  }
  const float d = amax / 127.0f;
  const float inv = d == 0.0f || !std::isfinite(d) ? 0.0f : 1.0f / d;
  int32_t sum = 0;
  for (int64_t i = 0; i < kI8Block; ++i) {
    int8_t q = 0;
    if (i < n && std::isfinite(d)) {
      const float v = std::nearbyint(xb[i] * inv);
      q = static_cast<int8_t>(std::fmin(std::fmax(v, -127.0f), 127.0f));
    }
    qx[i] = q;
    sum += q;
  }
  *dx = d;
  *qsum = sum;
}

void quantize_i8(const float* x, int64_t k, int8_t* qx, float* dx, int32_t* qsum) {
  for (int64_t b = 0; b * kI8Block < k; ++b) {
    const float* xb = x + b * kI8Block;
    const int64_t n = std::min<int64_t>(kI8Block, k - b * kI8Block);
#if defined(__AVX2__)
    if (n == kI8Block) {
      const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
      const __m256 finite_max = _mm256_set1_ps(std::numeric_limits<float>::max());
      __m256 v[4], amax = _mm256_setzero_ps();
      int finite = 0xff;
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        const __m256 a = _mm256_and_ps(v[i], abs_mask);
        finite &= _mm256_movemask_ps(_mm256_cmp_ps(a, finite_max, _CMP_LE_OQ));  // false for NaN
        amax = _mm256_max_ps(amax, a);
      }
      if (finite == 0xff) {
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float d = _mm_cvtss_f32(m4) / 127.0f;
        const float inv = d == 0.0f ? 0.0f : 1.0f / d;
        const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
        __m256i q[4];
        for (int i = 0; i < 4; ++i) {
          const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          q[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));  // max(NaN, lo) is lo
        }
        const __m256i sum8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        // packs interleave 128-bit lanes: a0-3 b0-3 c0-3 d0-3 | a4-7 ...; the permute restores the order.
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qx + b * kI8Block), ordered);
        dx[b] = d;
        qsum[b] = _mm_cvtsi128_si32(s4);
        continue;
      }
    }
#endif
    quantize_block_scalar(xb, n, qx + b * kI8Block, dx + b, qsum + b);
  }
}

#if defined(__AVX512VNNI__)
// Two 256-bit rows of panel bytes, of panels a and b, as one 512-bit vector.
inline __m512i load_panel_pair(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}
inline __m512 load_scale_pair(const uint8_t* a, const uint8_t* b) {
  return _mm512_cvtph_ps(
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1));
}

// R rows of x (starting at row r0) against panels p (lanes 0-7) and p2 (lanes 8-15); p2 == p for a
// last odd panel, whose second half is computed and dropped. A block's integer scales (K-quants)
// multiply the exact sums of their half (vpmulld: |sum| * 128 < 2^24).
template <QScheme S, int R>
void i8_tile(const QI8Panels& w, int64_t p, int64_t p2, const QI8Rows& x, int64_t r0, const float* bias, float* y,
             int64_t ldy) {
  constexpr bool four = i8_four_bit(S);
  constexpr int halves = i8_scale_halves(S);
  constexpr int parts = halves == 2 ? 2 : 1, steps = (four ? 4 : 8) / parts;
  const int64_t ldq = x.blocks * kI8Block;
  const int8_t* qx = x.qx + r0 * ldq;
  const float* dx = x.dx + r0 * x.blocks;
  const int32_t* qs = x.qsum + r0 * x.blocks;
  // q6_k: x + 128 unsigned against the signed weights (above); every other scheme: weights unsigned.
  constexpr bool x_unsigned = halves == 2;
  constexpr int value_bias = i8_value_bias(S, true);
  const __m512i ones = _mm512_set1_epi8(1), low4 = _mm512_set1_epi8(15), sign = _mm512_set1_epi8(-128);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const uint8_t* ga = w.data + p * w.panel_bytes;
  const uint8_t* gb = w.data + p2 * w.panel_bytes;
  for (int64_t g = 0; g < w.groups; ++g, ga += w.group_bytes, gb += w.group_bytes) {
    const __m512 d = load_scale_pair(ga, gb);
    const __m512 m = i8_group_min(S) ? load_scale_pair(ga + 16, gb + 16) : _mm512_setzero_ps();
    const uint8_t* ba = ga + w.scale_bytes;
    const uint8_t* bb_ = gb + w.scale_bytes;
    for (int64_t bb = 0; bb < w.group_blocks; ++bb, ba += w.block_bytes, bb_ += w.block_bytes) {
      const int64_t b = g * w.group_blocks + bb;
      // The next pair's block, once per pair (the first tile of rows): a hint, as in the AVX2 tile.
      for (int64_t line = 0; line < w.block_bytes && r0 == 0 && p2 + 2 < w.panels; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ba + 2 * w.panel_bytes + line), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(bb_ + 2 * w.panel_bytes + line), _MM_HINT_T0);
      }
      const uint8_t* va = ba + w.extra_bytes;
      const uint8_t* vb = bb_ + w.extra_bytes;
      const int8_t* xb = qx + b * kI8Block;
      // 4 values of row r from xr, the same in every lane.
      auto xs = [&](const int8_t* xr) { return _mm512_set1_epi32(load_i32(xr)); };
      __m512i is[R];
      for (int h = 0; h < parts; ++h) {
        __m512i isum[R], wsum = _mm512_setzero_si512();
        for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
        // Unrolled: otherwise GCC 12 copies every accumulator at every step.
#pragma GCC unroll 8
        for (int s = h * steps; s < (h + 1) * steps; ++s) {
          if constexpr (x_unsigned) {
            const __m512i wv = load_panel_pair(va + 32 * s, vb + 32 * s);
            wsum = _mm512_dpbusd_epi32(wsum, ones, wv);
            for (int r = 0; r < R; ++r)
              isum[r] = _mm512_dpbusd_epi32(isum[r], _mm512_xor_si512(xs(xb + r * ldq + 4 * s), sign), wv);
          } else if constexpr (!four) {
            const __m512i wv = load_panel_pair(va + 32 * s, vb + 32 * s);
            for (int r = 0; r < R; ++r) isum[r] = _mm512_dpbusd_epi32(isum[r], wv, xs(xb + r * ldq + 4 * s));
          } else {
            const __m512i raw = load_panel_pair(va + 32 * s, vb + 32 * s);
            const __m512i lo = _mm512_and_si512(raw, low4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
            for (int r = 0; r < R; ++r) {
              const int8_t* xr = xb + r * ldq;
              isum[r] = _mm512_dpbusd_epi32(isum[r], lo, xs(xr + 4 * s));
              isum[r] = _mm512_dpbusd_epi32(isum[r], hi, xs(xr + 16 + 4 * s));
            }
          }
        }
        if constexpr (x_unsigned) {
          const __m512i bias128 = _mm512_slli_epi32(wsum, 7);
          for (int r = 0; r < R; ++r) isum[r] = _mm512_sub_epi32(isum[r], bias128);
        }
        if constexpr (halves > 0) {
          // int16 scales duplicated per column: the low half of each 32-bit lane, sign extended.
          const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(load_panel_pair(ba + 32 * h, bb_ + 32 * h), 16), 16);
          for (int r = 0; r < R; ++r) {
            const __m512i v = _mm512_mullo_epi32(isum[r], sc);
            is[r] = h == 0 ? v : _mm512_add_epi32(is[r], v);
          }
        } else {
          for (int r = 0; r < R; ++r) is[r] = isum[r];
        }
      }
      const __m512 c = i8_block_min(S) ? _mm512_castsi512_ps(load_panel_pair(ba + 32 * halves, bb_ + 32 * halves))
                                       : _mm512_setzero_ps();
      for (int r = 0; r < R; ++r) {
        const int32_t qsum = qs[r * x.blocks + b];
        __m512i v = is[r];
        if constexpr (S == QScheme::Q4_0) v = _mm512_sub_epi32(v, _mm512_set1_epi32(8 * qsum));
        if constexpr (value_bias != 0) v = _mm512_sub_epi32(v, _mm512_set1_epi32(value_bias * qsum));
        // Exact conversion: |isum| < 2^24 (q_kernels.h's bounds).
        __m512 inner = _mm512_mul_ps(d, _mm512_cvtepi32_ps(v));
        if constexpr (i8_group_min(S))
          inner = _mm512_add_ps(inner, _mm512_mul_ps(m, _mm512_set1_ps(static_cast<float>(qsum))));
        if constexpr (i8_block_min(S))
          inner = _mm512_add_ps(inner, _mm512_mul_ps(c, _mm512_set1_ps(static_cast<float>(qsum))));
        acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_set1_ps(dx[r * x.blocks + b]), inner));
      }
    }
  }
  alignas(64) float out[2 * kI8Cols];
  const int64_t ja = p * kI8Cols, jb = p2 * kI8Cols;
  const int lanes_a = static_cast<int>(std::min<int64_t>(kI8Cols, w.n - ja));
  const int lanes_b = p2 == p ? 0 : static_cast<int>(std::min<int64_t>(kI8Cols, w.n - jb));
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(out, acc[r]);
    float* yr = y + (r0 + r) * ldy;
    for (int c = 0; c < lanes_a; ++c) yr[ja + c] = bias != nullptr ? out[c] + bias[ja + c] : out[c];
    for (int c = 0; c < lanes_b; ++c) yr[jb + c] = bias != nullptr ? out[kI8Cols + c] + bias[jb + c] : out[kI8Cols + c];
  }
}

constexpr int kI8Rows = 8;  // 8 float and 8 integer sums of 16 lanes, the weights and their sums: of 32 registers
constexpr int kI8TilePanels = 2;
constexpr bool kI8UnsignedWeights = true;
#elif defined(__AVX2__)
// R rows of x (starting at row r0) against panel p: 8 columns in the lanes of one vector per row.
// vpmaddwd widens the int16 pair sums by 1, or by the block's integer scales (K-quants), in one step.
template <QScheme S, int R>
void i8_tile(const QI8Panels& w, int64_t p, int64_t /* p2 == p */, const QI8Rows& x, int64_t r0, const float* bias,
             float* y, int64_t ldy) {
  constexpr bool four = i8_four_bit(S);
  constexpr int halves = i8_scale_halves(S);
  const int64_t ldq = x.blocks * kI8Block;
  const int8_t* qx = x.qx + r0 * ldq;
  const float* dx = x.dx + r0 * x.blocks;
  const int32_t* qs = x.qsum + r0 * x.blocks;
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(15);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const uint8_t* gp = w.data + p * w.panel_bytes;
  for (int64_t g = 0; g < w.groups; ++g, gp += w.group_bytes) {
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gp)));
    const __m256 m = i8_group_min(S) ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gp + 16)))
                                     : _mm256_setzero_ps();
    const uint8_t* blk = gp + w.scale_bytes;
    for (int64_t bb = 0; bb < w.group_blocks; ++bb, blk += w.block_bytes) {
      const int64_t b = g * w.group_blocks + bb;
      // The same block two panels on, once per panel (the first tile of rows): a decode step
      // streams the panels from memory once, and this keeps more of those reads in flight (a
      // hint: it changes no result).
      for (int64_t line = 0; line < w.block_bytes && r0 == 0 && p + 2 < w.panels; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(blk + 2 * w.panel_bytes + line), _MM_HINT_T0);
      const uint8_t* vals = blk + w.extra_bytes;
      const __m256i sc0 = halves > 0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)) : ones;
      const __m256i sc1 = halves > 1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)) : sc0;
      __m256i isum[R];
      if constexpr (!four) {
        for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vals + 32 * s));
          // The sign trick for signed values: |w| unsigned, x with w's sign (q_int8.h's bounds).
          const __m256i aw = i8_unsigned_values(S) ? wv : _mm256_abs_epi8(wv);
          const __m256i scale = s < 4 ? sc0 : sc1;
          for (int r = 0; r < R; ++r) {
            const __m256i xb = _mm256_set1_epi32(load_i32(qx + r * ldq + b * kI8Block + 4 * s));
            const __m256i pairs = _mm256_maddubs_epi16(aw, i8_unsigned_values(S) ? xb : _mm256_sign_epi8(xb, wv));
            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(pairs, scale));
          }
        }
      } else {
        __m256i s16[R];
        for (int r = 0; r < R; ++r) s16[r] = _mm256_setzero_si256();
        for (int s = 0; s < 4; ++s) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vals + 32 * s));
          const __m256i lo = _mm256_and_si256(raw, low4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
          for (int r = 0; r < R; ++r) {
            const int8_t* xb = qx + r * ldq + b * kI8Block;
            const __m256i xl = _mm256_set1_epi32(load_i32(xb + 4 * s));
            const __m256i xh = _mm256_set1_epi32(load_i32(xb + 16 + 4 * s));
            s16[r] =
                _mm256_add_epi16(s16[r], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)));
          }
        }
        for (int r = 0; r < R; ++r) isum[r] = _mm256_madd_epi16(s16[r], sc0);
      }
      const __m256 c =
          i8_block_min(S) ? _mm256_loadu_ps(reinterpret_cast<const float*>(blk + 32 * halves)) : _mm256_setzero_ps();
      for (int r = 0; r < R; ++r) {
        const int32_t qsum = qs[r * x.blocks + b];
        __m256i is = isum[r];
        if constexpr (S == QScheme::Q4_0) is = _mm256_sub_epi32(is, _mm256_set1_epi32(8 * qsum));
        // Exact conversion: |isum| < 2^24 (q_kernels.h's bounds).
        __m256 inner = _mm256_mul_ps(d, _mm256_cvtepi32_ps(is));
        if constexpr (i8_group_min(S))
          inner = _mm256_add_ps(inner, _mm256_mul_ps(m, _mm256_set1_ps(static_cast<float>(qsum))));
        if constexpr (i8_block_min(S))
          inner = _mm256_add_ps(inner, _mm256_mul_ps(c, _mm256_set1_ps(static_cast<float>(qsum))));
        acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(_mm256_set1_ps(dx[r * x.blocks + b]), inner));
      }
    }
  }
  const int64_t j0 = p * kI8Cols;
  const int lanes = static_cast<int>(std::min<int64_t>(kI8Cols, w.n - j0));
  alignas(32) float out[kI8Cols];
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(out, acc[r]);
    float* yr = y + (r0 + r) * ldy + j0;
    for (int c = 0; c < lanes; ++c) yr[c] = bias != nullptr ? out[c] + bias[j0 + c] : out[c];
  }
}
#if defined(__AVX512F__)
constexpr int kI8Rows = 8;  // 8 float and 8 integer sums, the step's values and a broadcast: of 32 registers
#else
constexpr int kI8Rows = 4;  // 4 float and 4 integer sums, the step's values and a broadcast: 16 registers
#endif
constexpr int kI8TilePanels = 1;
constexpr bool kI8UnsignedWeights = false;
#elif defined(KILN_Q_NEON)
// The int16 scales duplicated per column (q_kernels.h) of columns 4 h .. 4 h + 3 as int32 lanes.
inline int32x4_t load_i8_scales(const uint8_t* at, int h) {
  int32x4_t v;
  std::memcpy(&v, at + 16 * h, sizeof v);
  return vshrq_n_s32(vshlq_n_s32(v, 16), 16);
}

// One row at a time: per step, the 4 input values duplicated to every column, widening products
// (vmull_s8: |w x| <= 128 * 127 fits int16) added in pairs into int32 lanes (vpadalq_s16), two
// lanes per column until the end of the block (or of a half, for per-half scales). (sdot would need
// the dotprod feature, which the NEON level does not require.)
template <QScheme S, int R>
void i8_tile(const QI8Panels& w, int64_t p, int64_t /* p2 == p */, const QI8Rows& x, int64_t r0, const float* bias,
             float* y, int64_t ldy) {
  static_assert(R == 1, "one row at a time");
  constexpr bool four = i8_four_bit(S);
  constexpr int halves = i8_scale_halves(S);
  constexpr int parts = halves == 2 ? 2 : 1, steps = (four ? 4 : 8) / parts;
  const int8_t* qx = x.qx + r0 * x.blocks * kI8Block;
  const float* dx = x.dx + r0 * x.blocks;
  const int32_t* qs = x.qsum + r0 * x.blocks;
  float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  const uint8_t* gp = w.data + p * w.panel_bytes;
  for (int64_t g = 0; g < w.groups; ++g, gp += w.group_bytes) {
    uint16x8_t dh, mh;
    std::memcpy(&dh, gp, sizeof dh);
    const float16x8_t d16 = vreinterpretq_f16_u16(dh);
    const float32x4_t d[2] = {vcvt_f32_f16(vget_low_f16(d16)), vcvt_f32_f16(vget_high_f16(d16))};
    float32x4_t m[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    if constexpr (i8_group_min(S)) {
      std::memcpy(&mh, gp + 16, sizeof mh);
      const float16x8_t m16 = vreinterpretq_f16_u16(mh);
      m[0] = vcvt_f32_f16(vget_low_f16(m16));
      m[1] = vcvt_f32_f16(vget_high_f16(m16));
    }
    const uint8_t* blk = gp + w.scale_bytes;
    for (int64_t bb = 0; bb < w.group_blocks; ++bb, blk += w.block_bytes) {
      const int64_t b = g * w.group_blocks + bb;
      const int8_t* xb = qx + b * kI8Block;
      const uint8_t* vals = blk + w.extra_bytes;
      int32x4_t isum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};  // columns 0-3, 4-7
      for (int h = 0; h < parts; ++h) {
        int32x4_t pairs[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};  // columns 2i, 2i + 1
        auto step = [&](int8x16_t w0, int8x16_t w1, const int8_t* x4) {
          const int8x16_t xv = vreinterpretq_s8_s32(vdupq_n_s32(load_i32(x4)));
          pairs[0] = vpadalq_s16(pairs[0], vmull_s8(vget_low_s8(w0), vget_low_s8(xv)));
          pairs[1] = vpadalq_s16(pairs[1], vmull_s8(vget_high_s8(w0), vget_high_s8(xv)));
          pairs[2] = vpadalq_s16(pairs[2], vmull_s8(vget_low_s8(w1), vget_low_s8(xv)));
          pairs[3] = vpadalq_s16(pairs[3], vmull_s8(vget_high_s8(w1), vget_high_s8(xv)));
        };
        for (int s = h * steps; s < (h + 1) * steps; ++s) {
          if constexpr (!four) {
            step(vld1q_s8(reinterpret_cast<const int8_t*>(vals + 32 * s)),
                 vld1q_s8(reinterpret_cast<const int8_t*>(vals + 32 * s + 16)), xb + 4 * s);
          } else {
            const uint8x16_t raw0 = vld1q_u8(vals + 32 * s), raw1 = vld1q_u8(vals + 32 * s + 16);
            const uint8x16_t low4 = vdupq_n_u8(15);
            step(vreinterpretq_s8_u8(vandq_u8(raw0, low4)), vreinterpretq_s8_u8(vandq_u8(raw1, low4)), xb + 4 * s);
            step(vreinterpretq_s8_u8(vshrq_n_u8(raw0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(raw1, 4)), xb + 16 + 4 * s);
          }
        }
        const int32x4_t part[2] = {vpaddq_s32(pairs[0], pairs[1]), vpaddq_s32(pairs[2], pairs[3])};
        for (int c = 0; c < 2; ++c) {
          if constexpr (halves > 0)
            isum[c] = vmlaq_s32(isum[c], part[c], load_i8_scales(blk + 32 * h, c));
          else
            isum[c] = part[c];
        }
      }
      const int32_t qsum = qs[b];
      float32x4_t c4[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
      if constexpr (i8_block_min(S)) {
        std::memcpy(&c4[0], blk + 32 * halves, sizeof c4[0]);
        std::memcpy(&c4[1], blk + 32 * halves + 16, sizeof c4[1]);
      }
      for (int h = 0; h < 2; ++h) {
        if constexpr (S == QScheme::Q4_0) isum[h] = vsubq_s32(isum[h], vdupq_n_s32(8 * qsum));
        float32x4_t inner = vmulq_f32(d[h], vcvtq_f32_s32(isum[h]));
        if constexpr (i8_group_min(S)) inner = vaddq_f32(inner, vmulq_f32(m[h], vdupq_n_f32(static_cast<float>(qsum))));
        if constexpr (i8_block_min(S))
          inner = vaddq_f32(inner, vmulq_f32(c4[h], vdupq_n_f32(static_cast<float>(qsum))));
        acc[h] = vaddq_f32(acc[h], vmulq_f32(vdupq_n_f32(dx[b]), inner));
      }
    }
  }
  const int64_t j0 = p * kI8Cols;
  const int lanes = static_cast<int>(std::min<int64_t>(kI8Cols, w.n - j0));
  float out[kI8Cols];
  vst1q_f32(out, acc[0]);
  vst1q_f32(out + 4, acc[1]);
  float* yr = y + r0 * ldy + j0;
  for (int c = 0; c < lanes; ++c) yr[c] = bias != nullptr ? out[c] + bias[j0 + c] : out[c];
}
constexpr int kI8Rows = 1;
constexpr int kI8TilePanels = 1;
constexpr bool kI8UnsignedWeights = false;
#else
// The same operations on int32 and float scalars, one row at a time.
template <QScheme S, int R>
void i8_tile(const QI8Panels& w, int64_t p, int64_t /* p2 == p */, const QI8Rows& x, int64_t r0, const float* bias,
             float* y, int64_t ldy) {
  static_assert(R == 1, "one row at a time");
  constexpr int halves = i8_scale_halves(S);
  const int8_t* qx = x.qx + r0 * x.blocks * kI8Block;
  const float* dx = x.dx + r0 * x.blocks;
  const int32_t* qs = x.qsum + r0 * x.blocks;
  auto i16 = [](const uint8_t* at) { return static_cast<int16_t>(at[0] | at[1] << 8); };
  float acc[kI8Cols] = {};
  const uint8_t* gp = w.data + p * w.panel_bytes;
  for (int64_t g = 0; g < w.groups; ++g, gp += w.group_bytes) {
    float d[kI8Cols], m[kI8Cols];
    for (int c = 0; c < kI8Cols; ++c) {
      d[c] = half_bits_to_float(static_cast<uint16_t>(gp[2 * c] | gp[2 * c + 1] << 8));
      m[c] =
          i8_group_min(S) ? half_bits_to_float(static_cast<uint16_t>(gp[16 + 2 * c] | gp[16 + 2 * c + 1] << 8)) : 0.0f;
    }
    const uint8_t* blk = gp + w.scale_bytes;
    for (int64_t bb = 0; bb < w.group_blocks; ++bb, blk += w.block_bytes) {
      const int64_t b = g * w.group_blocks + bb;
      const int8_t* xb = qx + b * kI8Block;
      const uint8_t* vals = blk + w.extra_bytes;
      int32_t half[2][kI8Cols] = {};  // k < 16, k >= 16
      if constexpr (!i8_four_bit(S)) {
        for (int s = 0; s < 8; ++s)
          for (int c = 0; c < kI8Cols; ++c)
            for (int t = 0; t < 4; ++t) half[s / 4][c] += static_cast<int8_t>(vals[32 * s + 4 * c + t]) * xb[4 * s + t];
      } else {
        for (int s = 0; s < 4; ++s)
          for (int c = 0; c < kI8Cols; ++c)
            for (int t = 0; t < 4; ++t) {
              const uint8_t v = vals[32 * s + 4 * c + t];
              half[0][c] += (v & 15) * xb[4 * s + t];
              half[1][c] += (v >> 4) * xb[16 + 4 * s + t];
            }
      }
      const int32_t qsum = qs[b];
      for (int c = 0; c < kI8Cols; ++c) {
        const int32_t sc0 = halves > 0 ? i16(blk + 4 * c) : 1;
        const int32_t sc1 = halves > 1 ? i16(blk + 32 + 4 * c) : sc0;
        int32_t is = sc0 * half[0][c] + sc1 * half[1][c];
        if constexpr (S == QScheme::Q4_0) is -= 8 * qsum;
        float inner = d[c] * static_cast<float>(is);
        if constexpr (i8_group_min(S)) inner = inner + m[c] * static_cast<float>(qsum);
        if constexpr (i8_block_min(S)) {
          float cv;
          std::memcpy(&cv, blk + 32 * halves + 4 * c, sizeof cv);
          inner = inner + cv * static_cast<float>(qsum);
        }
        acc[c] = acc[c] + dx[b] * inner;
      }
    }
  }
  const int64_t j0 = p * kI8Cols;
  const int lanes = static_cast<int>(std::min<int64_t>(kI8Cols, w.n - j0));
  float* yr = y + r0 * ldy + j0;
  for (int c = 0; c < lanes; ++c) yr[c] = bias != nullptr ? acc[c] + bias[j0 + c] : acc[c];
}
constexpr int kI8Rows = 1;
constexpr int kI8TilePanels = 1;
constexpr bool kI8UnsignedWeights = false;
#endif

// The last `left` (< kI8Rows) rows as one tile of that height.
template <QScheme S, int R>
void i8_tail(const QI8Panels& w, int64_t p, int64_t p2, const QI8Rows& x, int64_t r0, int left, const float* bias,
             float* y, int64_t ldy) {
  if constexpr (R >= 1) {
    if (left == R) return i8_tile<S, R>(w, p, p2, x, r0, bias, y, ldy);
    i8_tail<S, R - 1>(w, p, p2, x, r0, left, bias, y, ldy);
  }
}

// kI8TilePanels panels at a time, p to p2 (their bytes stay in L1 while every tile of rows uses
// them; a last odd panel of a pair is p2 == p), rows in tiles.
template <QScheme S>
void gemm_i8_scheme(const QI8Panels& w, int64_t p0, int64_t p1, const QI8Rows& x, int rows, const float* bias, float* y,
                    int64_t ldy) {
  for (int64_t p = p0; p < p1; p += kI8TilePanels) {
    const int64_t p2 = std::min<int64_t>(p + kI8TilePanels - 1, p1 - 1);
    int r0 = 0;
    for (; r0 + kI8Rows <= rows; r0 += kI8Rows) i8_tile<S, kI8Rows>(w, p, p2, x, r0, bias, y, ldy);
    if (r0 < rows) i8_tail<S, kI8Rows - 1>(w, p, p2, x, r0, rows - r0, bias, y, ldy);
  }
}

void gemm_i8(const QI8Panels& w, int64_t p0, int64_t p1, const QI8Rows& x, int rows, const float* bias, float* y,
             int64_t ldy) {
  switch (w.scheme) {
    case QScheme::Q8_0: return gemm_i8_scheme<QScheme::Q8_0>(w, p0, p1, x, rows, bias, y, ldy);
    case QScheme::Q4_0: return gemm_i8_scheme<QScheme::Q4_0>(w, p0, p1, x, rows, bias, y, ldy);
    case QScheme::Q4_1: return gemm_i8_scheme<QScheme::Q4_1>(w, p0, p1, x, rows, bias, y, ldy);
    case QScheme::Q5_0: return gemm_i8_scheme<QScheme::Q5_0>(w, p0, p1, x, rows, bias, y, ldy);
    case QScheme::Q5_1: return gemm_i8_scheme<QScheme::Q5_1>(w, p0, p1, x, rows, bias, y, ldy);
    case QScheme::Q4_K: return gemm_i8_scheme<QScheme::Q4_K>(w, p0, p1, x, rows, bias, y, ldy);
    case QScheme::Q5_K: return gemm_i8_scheme<QScheme::Q5_K>(w, p0, p1, x, rows, bias, y, ldy);
    case QScheme::Q6_K: return gemm_i8_scheme<QScheme::Q6_K>(w, p0, p1, x, rows, bias, y, ldy);
    default: return;  // f16 and bf16 take compute=float32 only (linear_args)
  }
}
