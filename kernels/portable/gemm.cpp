// The cache-blocked float32 GEMM: packed panels on the stack, a 6x8 register micro-kernel.
#include "portable/gemm.h"

#include <algorithm>
#include <cstring>

#include "kiln/thread_pool.h"

namespace kiln {
namespace kernels {
namespace portable {
namespace {

constexpr int64_t MR = kGemmMR;
constexpr int64_t NR = kGemmNR;
// Block sizes (measured on x86-64 SSE2; override with -DKILN_GEMM_KC/MC/NC):
// an A block MC x KC (48 KiB) stays in L2, a B strip KC x NR (4 KiB) in L1,
// and the B panel KC x NC is 32 KiB; both live on the worker's stack.
#ifndef KILN_GEMM_KC
#define KILN_GEMM_KC 128
#define KILN_GEMM_MC 96
#define KILN_GEMM_NC 64
#endif
constexpr int64_t KC = KILN_GEMM_KC;
constexpr int64_t MC = KILN_GEMM_MC;  // multiple of MR
constexpr int64_t NC = KILN_GEMM_NC;  // multiple of NR
static_assert(MC % MR == 0 && NC % NR == 0, "block sizes must be multiples of the register tile");

// Offsets of batch `b` into A, B and C.
struct BatchOffsets {
  int64_t a, b, c;
};

BatchOffsets batch_offsets(const GemmProblem& p, int64_t b) {
  BatchOffsets o{0, 0, b * p.c_batch_stride};
  for (int d = p.batch_ndim - 1; d >= 0; --d) {
    const int64_t size = p.batch_sizes[d];
    const int64_t i = b % size;
    b /= size;
    o.a += i * p.a_batch_strides[d];
    o.b += i * p.b_batch_strides[d];
  }
  return o;
}

// A[m0:m0+mc, k0:k0+kc] -> MR-row strips, k-major inside a strip, zero rows past mc.
void pack_a(const float* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int64_t rows = std::min(MR, mc - i0);
    if (rows == MR && cs == 1) {
      const float* r[MR];
      for (int64_t r_ = 0; r_ < MR; ++r_) r[r_] = a + (i0 + r_) * rs;
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r_ = 0; r_ < MR; ++r_) dst[k * MR + r_] = r[r_][k];
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r_ = 0; r_ < MR; ++r_) dst[k * MR + r_] = r_ < rows ? a[(i0 + r_) * rs + k * cs] : 0.0f;
    }
    dst += kc * MR;
  }
}

// B[k0:k0+kc, n0:n0+nc] -> NR-column strips, zero columns past nc.
void pack_b_strided(const float* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int64_t cols = std::min(NR, nc - j0);
    if (cols == NR && cs == 1) {
      for (int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * NR, b + k * rs + j0, NR * sizeof(float));
    } else if (rs == 1 && cols == NR) {
      // Transposed B (linear weights): NR columns are NR contiguous streams.
      const float* col[NR];
      for (int64_t j = 0; j < NR; ++j) col[j] = b + (j0 + j) * cs;
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < NR; ++j) dst[k * NR + j] = col[j][k];
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < NR; ++j) dst[k * NR + j] = j < cols ? b[k * rs + (j0 + j) * cs] : 0.0f;
    }
    dst += kc * NR;
  }
}

// C[0:rows, 0:cols] += alpha * (packed A strip) @ (packed B strip). Fixed trip
// counts let the compiler keep the MR x NR accumulators in vector registers.
void micro_kernel(int64_t kc, const float* __restrict a, const float* __restrict b, float* c, int64_t ldc, int64_t rows,
                  int64_t cols, float alpha, bool overwrite) {
  float acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int64_t i = 0; i < MR; ++i) {
      const float ai = a[i];
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += ai * b[j];
    }
    a += MR;
    b += NR;
  }
  if (overwrite) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = alpha * acc[i][j];
  } else if (rows == MR && cols == NR) {
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] += alpha * acc[i][j];
  } else {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] += alpha * acc[i][j];
  }
}

// The matrix-vector paths below sum every element of C exactly as micro_kernel does (from zero over
// each slice of KC rows of K in order, then C = alpha * sum for the first slice when overwriting, or
// C += alpha * sum), so that a row of C never depends on how many rows A has: batched decoding
// gives each sequence the result it gets alone (docs/kernels.md, "Row-exact products").

// C[0:rows] (+)= alpha * dot products: used when the problem is a matrix-vector product,
// where packing would only add traffic. `x` is contiguous; rows of `mat` are contiguous.
// Eight rows at a time: eight independent sums.
void gemv_rows(const float* mat, int64_t ld, const float* x, int64_t k, float* y, int64_t y_stride, int64_t rows,
               float alpha, bool overwrite) {
  constexpr int64_t kRows = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t n = std::min(kRows, rows - r0);
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
      const int64_t k1 = std::min(k, k0 + KC);
      float s[kRows] = {};
      for (int64_t i = k0; i < k1; ++i)
        for (int64_t r = 0; r < n; ++r) s[r] += mat[(r0 + r) * ld + i] * x[i];
      for (int64_t r = 0; r < n; ++r) {
        float& out = y[(r0 + r) * y_stride];
        out = overwrite && k0 == 0 ? alpha * s[r] : out + alpha * s[r];
      }
    }
  }
}

// y[0:n] (+)= alpha * sum_k x[k] * B[k, 0:n] with rows of B contiguous (n <= kAxpyCols).
constexpr int64_t kAxpyCols = 512;
void axpy_rows(const float* b, int64_t ld, const float* x, int64_t xs, int64_t k, float* y, int64_t n, float alpha,
               bool overwrite) {
  float s[kAxpyCols];
  for (int64_t k0 = 0; k0 < k; k0 += KC) {
    const int64_t k1 = std::min(k, k0 + KC);
    std::fill(s, s + n, 0.0f);
    for (int64_t p = k0; p < k1; ++p) {
      const float xp = x[p * xs];
      const float* row = b + p * ld;
      for (int64_t j = 0; j < n; ++j) s[j] += xp * row[j];
    }
    for (int64_t j = 0; j < n; ++j) y[j] = overwrite && k0 == 0 ? alpha * s[j] : y[j] + alpha * s[j];
  }
}

// Matrix-vector fast paths (m == 1 or n == 1); false if none applies.
bool try_gemv(const GemmProblem& p, int64_t batches) {
  if (p.pack_b != nullptr) return false;
  if (p.m == 1 && p.b_cs == 1 && p.b_rs != 1) {
    // Row vector times row-major B: stream rows of B into column chunks of y.
    constexpr int64_t kCols = kAxpyCols;
    const int64_t chunks = (p.n + kCols - 1) / kCols;
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.k * kCols));
    parallel_for(batches * chunks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t b = t / chunks, j0 = (t % chunks) * kCols;
        const BatchOffsets o = batch_offsets(p, b);
        axpy_rows(p.b + o.b + j0, p.b_rs, p.a + o.a, p.a_cs, p.k, p.c + o.c + j0, std::min(kCols, p.n - j0), p.alpha,
                  p.overwrite);
      }
    });
    return true;
  }
  const bool row_vec = p.m == 1 && p.b_rs == 1 && p.a_cs == 1;  // y[n] = dot(a, B[:, n])
  const bool col_vec = p.n == 1 && p.a_cs == 1 && p.b_rs == 1;  // y[m] = dot(A[m, :], b)
  if (!row_vec && !col_vec) return false;
  const int64_t len = row_vec ? p.n : p.m;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.k));
  parallel_for(batches * len, grain, [&](int64_t begin, int64_t end) {
    while (begin < end) {
      const int64_t b = begin / len, i0 = begin % len;
      const int64_t i1 = std::min(len, i0 + (end - begin));
      const BatchOffsets o = batch_offsets(p, b);
      if (row_vec) {
        gemv_rows(p.b + o.b + i0 * p.b_cs, p.b_cs, p.a + o.a, p.k, p.c + o.c + i0, 1, i1 - i0, p.alpha, p.overwrite);
      } else {
        gemv_rows(p.a + o.a + i0 * p.a_rs, p.a_rs, p.b + o.b, p.k, p.c + o.c + i0 * p.c_rs, p.c_rs, i1 - i0, p.alpha,
                  p.overwrite);
      }
      begin += i1 - i0;
    }
  });
  return true;
}

}  // namespace

void gemm(const GemmProblem& p) noexcept {
  if (p.m <= 0 || p.n <= 0) return;
  int64_t batches = 1;
  for (int d = 0; d < p.batch_ndim; ++d) batches *= p.batch_sizes[d];
  if (batches <= 0) return;
  if (p.k <= 0) {  // an empty sum
    if (p.overwrite) {
      for (int64_t b = 0; b < batches; ++b) {
        float* c = p.c + batch_offsets(p, b).c;
        for (int64_t i = 0; i < p.m; ++i) std::fill(c + i * p.c_rs, c + i * p.c_rs + p.n, 0.0f);
      }
    }
    return;
  }
  if (try_gemv(p, batches)) return;

  // A task is (batch, group of M blocks, N block). Each packed B panel is
  // reused across the whole group, which matters when packing is expensive
  // (conv's implicit im2col); groups are split only to find enough parallelism.
  const int64_t mblocks = (p.m + MC - 1) / MC, nt = (p.n + NC - 1) / NC;
  int64_t groups = 1;
  const int64_t want_tasks = 4 * static_cast<int64_t>(num_threads());
  while (groups < mblocks && batches * nt * groups < want_tasks) groups *= 2;
  groups = std::min(groups, mblocks);
  const int64_t group_rows = (mblocks + groups - 1) / groups * MC;
  const int64_t mt = (p.m + group_rows - 1) / group_rows;
  const int64_t tasks = batches * mt * nt;
  // Aim for >= ~1 MFLOP per chunk so tiny products do not pay for threading.
  const int64_t task_flops = 2 * std::min(p.m, group_rows) * std::min(p.n, NC) * p.k;
  const int64_t grain = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(1, task_flops));

  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    alignas(64) float apack[MC * KC];
    alignas(64) float bpack[KC * NC];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (mt * nt);
      const int64_t mi = (t / nt) % mt, ni = t % nt;
      const int64_t g0 = mi * group_rows, g1 = std::min(p.m, g0 + group_rows);
      const int64_t n0 = ni * NC, nc = std::min(NC, p.n - n0);
      const BatchOffsets o = batch_offsets(p, b);
      for (int64_t k0 = 0; k0 < p.k; k0 += KC) {
        const int64_t kc = std::min(KC, p.k - k0);
        if (p.pack_b != nullptr) {
          p.pack_b(p.pack_b_ctx, b, k0, kc, n0, nc, bpack);
        } else {
          pack_b_strided(p.b + o.b + k0 * p.b_rs + n0 * p.b_cs, p.b_rs, p.b_cs, kc, nc, bpack);
        }
        for (int64_t m0 = g0; m0 < g1; m0 += MC) {
          const int64_t mc = std::min(MC, g1 - m0);
          pack_a(p.a + o.a + m0 * p.a_rs + k0 * p.a_cs, p.a_rs, p.a_cs, mc, kc, apack);
          float* c = p.c + o.c + m0 * p.c_rs + n0;
          for (int64_t j = 0; j < nc; j += NR) {
            for (int64_t i = 0; i < mc; i += MR) {
              micro_kernel(kc, apack + i * kc, bpack + j * kc, c + i * p.c_rs + j, p.c_rs, std::min(MR, mc - i),
                           std::min(NR, nc - j), p.alpha, p.overwrite && k0 == 0);
            }
          }
        }
      }
    }
  });
}

void gemm_contiguous(const MatmulShapes& s, const float* a, const float* b, float* c) noexcept {
  GemmProblem p;
  p.m = s.m, p.n = s.n, p.k = s.k;
  p.a = a, p.a_rs = s.k, p.a_cs = 1;
  p.b = b, p.b_rs = s.n, p.b_cs = 1;
  p.c = c, p.c_rs = s.n;
  p.overwrite = true;
  p.batch_ndim = s.batch_ndim;
  std::copy(s.batch_sizes, s.batch_sizes + s.batch_ndim, p.batch_sizes);
  std::copy(s.a_batch_strides, s.a_batch_strides + s.batch_ndim, p.a_batch_strides);
  std::copy(s.b_batch_strides, s.b_batch_strides + s.batch_ndim, p.b_batch_strides);
  p.c_batch_stride = s.c_batch_stride;
  gemm(p);
}

}  // namespace portable
}  // namespace kernels
}  // namespace kiln
