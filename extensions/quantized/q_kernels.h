// The fast kernels of kiln_quantized::linear and ::embedding for one instruction-set level
// (microkernels/q_panels.inc, compiled once per level by kiln_add_isa_microkernels).
//
// A constant quantized weight is repacked once per program (packed_constant) into panels of nr
// columns of W^T, nr being the level's f32 GEMM panel width (2 vectors: 32 on AVX-512, 16 on AVX2,
// 8 on NEON and the baseline). Panel p holds rows [p * nr, p * nr + nr) of W (rows past N are
// zeros) as `groups` group blocks, one after the other, each
//   d[nr] float16, then m[nr] float16 (q4_1 only), then `group` k-rows of nr values:
//   4-bit: nr / 2 bytes, byte j = column j (low nibble) | column j + nr / 2 (high nibble);
//   8-bit: nr int8.
// so that one k-row of a panel decodes into whole vectors without a transpose: a decode step
// (gemv) multiplies it with one broadcast input element per row of x, and the GEMM's packing
// hook (unpack) writes it as a row of the GEMM's B panel.
#pragma once

#include <cstdint>

#include "optimized/isa_dispatch.h"

namespace kiln::kernels::optimized {

// The split formats (panels below), then the block formats (decoded from their file layout; f16 and
// bf16 are 16-bit weights in blocks of 32).
enum class QScheme : int { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16, BF16 };

struct QPanels {
  const uint8_t* data = nullptr;
  QScheme scheme = QScheme::Q8_0;
  int64_t n = 0, k = 0, group = 0, groups = 0;
  int64_t nr = 0, panels = 0;
  int64_t row_bytes = 0;    // one k-row of a panel
  int64_t scale_bytes = 0;  // d (and m) of a group
  int64_t group_bytes = 0;  // scale_bytes + group * row_bytes
  int64_t panel_bytes = 0;  // groups * group_bytes
};

inline QPanels q_panel_layout(QScheme scheme, int64_t n, int64_t k, int64_t group, int64_t nr) {
  QPanels p;
  p.scheme = scheme, p.n = n, p.k = k, p.group = group, p.groups = k / group, p.nr = nr;
  p.panels = (n + nr - 1) / nr;
  p.row_bytes = scheme == QScheme::Q8_0 ? nr : nr / 2;
  p.scale_bytes = nr * 2 * (scheme == QScheme::Q4_1 ? 2 : 1);
  p.group_bytes = p.scale_bytes + group * p.row_bytes;
  p.panel_bytes = p.groups * p.group_bytes;
  return p;
}

// compute="int8" (quant.h: x quantized per 32-block, integer dot products per block): the weight
// repacked once per program into panels of kI8Cols columns, the same at every level. Panel p holds
// rows [p * 8, p * 8 + 8) of W (rows past N zero) as `groups` group blocks (a split format's group,
// a block format's block: 32 elements, or a K-quant's 256), each
//   d[8] float16, then m[8] float16 (q4_1, q5_1), then the group's 32-blocks (the last one of a
//   q8_0 row of any length padded with zeros), each
//     K-quants only: the integer scales as int16[16] (column c's at 2 c and 2 c + 1, the operand of
//     vpmaddwd), one for the block (q4_k, q5_k) or one per half of 16 (q6_k: first half, second);
//     then q4_k and q5_k: c[8] float32, c = -(dmin * m) (exact), the block's min;
//     then the values in steps of 32 bytes, 4 bytes per column:
//   8-bit: 8 steps, step s = for each column c the int8 values of k = 4 s .. 4 s + 3 (q8_0's q,
//          q5_0's q - 16, q5_1's and q5_k's q, q6_k's q - 32);
//   4-bit: 4 steps, step s = for each column c 4 bytes whose low nibbles are the raw values (0..15)
//          of k = 4 s .. 4 s + 3 and whose high nibbles those of k = 16 + 4 s .. 16 + 4 s + 3
//          (q4_0, q4_1, q4_k),
// so that one step times 4 input values broadcast to every column gives 8 columns' partial sums in
// the lanes of one vector (no horizontal sums), and 4-bit weights stay 4 bits. Per block, with
// isum the exact integer sum of qx times the values (the K-quants' times their integer scales) and
// qsum that of qx: inner = d * isum (- 8 d qsum for q4_0, inside isum), + m * qsum or + c * qsum.
constexpr int kI8Cols = 8;
constexpr int64_t kI8Block = 32;

constexpr bool i8_four_bit(QScheme s) { return s == QScheme::Q4_0 || s == QScheme::Q4_1 || s == QScheme::Q4_K; }
// Values 0..31 (no sign trick needed at AVX2).
constexpr bool i8_unsigned_values(QScheme s) { return s == QScheme::Q5_1 || s == QScheme::Q5_K; }
constexpr bool i8_group_min(QScheme s) { return s == QScheme::Q4_1 || s == QScheme::Q5_1; }
constexpr bool i8_block_min(QScheme s) { return s == QScheme::Q4_K || s == QScheme::Q5_K; }
// Integer scales per 32-block: 0 (none), 1 (one for the block) or 2 (one per half of 16).
constexpr int i8_scale_halves(QScheme s) {
  return s == QScheme::Q6_K ? 2 : s == QScheme::Q4_K || s == QScheme::Q5_K ? 1 : 0;
}
constexpr bool i8_takes(QScheme s) { return s != QScheme::F16 && s != QScheme::BF16; }
// Added to each stored 8-bit value where a level's tiles take the weights as the unsigned operand
// (QKernels::i8_unsigned_weights: avx512_vnni's vpdpbusd, x the signed one): the signed values of q8_0 and q5_0 become
// 0..255 and the tile subtracts 128 * qsum per block. 4-bit, q5_1 and q5_k values are unsigned already; q6_k, with a
// scale per half block, keeps its signed values and its tile biases x instead (q_int8.h).
constexpr int i8_value_bias(QScheme s, bool unsigned_weights) {
  return unsigned_weights && (s == QScheme::Q8_0 || s == QScheme::Q5_0) ? 128 : 0;
}

struct QI8Panels {
  const uint8_t* data = nullptr;
  QScheme scheme = QScheme::Q8_0;
  int64_t n = 0, k = 0, group = 0, groups = 0;
  int64_t blocks = 0;        // 32-blocks per row: ceil(k / 32)
  int64_t group_blocks = 0;  // 32-blocks per group: ceil(group / 32)
  int64_t panels = 0;
  int64_t scale_bytes = 0;  // d (and m) of a group
  int64_t extra_bytes = 0;  // a 32-block's integer scales and c, before its values
  int64_t block_bytes = 0;  // one 32-block of 8 columns: extra_bytes, then the values
  int64_t group_bytes = 0;
  int64_t panel_bytes = 0;
  int value_bias = 0;  // i8_value_bias: added to each 8-bit value at pack
};

inline QI8Panels q_i8_panel_layout(QScheme scheme, int64_t n, int64_t k, int64_t group, bool unsigned_weights) {
  QI8Panels p;
  p.scheme = scheme, p.n = n, p.k = k, p.group = group, p.groups = k / group;
  p.value_bias = i8_value_bias(scheme, unsigned_weights);
  p.group_blocks = (group + kI8Block - 1) / kI8Block;
  p.blocks = p.groups * p.group_blocks;
  p.panels = (n + kI8Cols - 1) / kI8Cols;
  p.scale_bytes = kI8Cols * 2 * (i8_group_min(scheme) ? 2 : 1);
  p.extra_bytes = i8_scale_halves(scheme) * 2 * kI8Cols * 2 + (i8_block_min(scheme) ? kI8Cols * 4 : 0);
  p.block_bytes = p.extra_bytes + (i8_four_bit(scheme) ? kI8Cols * kI8Block / 2 : kI8Cols * kI8Block);
  p.group_bytes = p.scale_bytes + p.group_blocks * p.block_bytes;
  p.panel_bytes = p.groups * p.group_bytes;
  return p;
}

// Rows of x quantized for compute="int8": qx int8 [rows][blocks * 32] (a short last block padded
// with zeros), and per row and block the scale dx and the sum of its qx. The level's quantize_i8
// writes them and its gemm_i8 reads them.
struct QI8Rows {
  const int8_t* qx = nullptr;
  const float* dx = nullptr;
  const int32_t* qsum = nullptr;
  int64_t blocks = 0;  // per row; qx rows are blocks * 32 bytes apart
};

// compute="int8_row" (quant.h's quantize_row_u8: x per row as unsigned bytes with a zero point; q8_0
// with one scale per output channel): the weight repacked once per program into panels of
// kI8RowCols columns, the same at every level. Panel p holds rows [p * 16, p * 16 + 16) of W (rows
// past N zero) as
//   d[16] float32 (the decoded float16 scales), wsum[16] int32 (the sum of each column's values),
//   then ceil(k / 4) steps of 64 bytes, step s = for each column c its int8 values of
//   k = 4 s .. 4 s + 3 at 4 c (zeros past k),
// so that one step times 4 bytes of a row of x broadcast to every column is one vpdpbusd (x the
// unsigned operand, the weights the signed one) into 16 column sums, and the sum runs over all of k
// in one int32 lane: sum (q - z) w = sum q w - z wsum.
constexpr int kI8RowCols = 16;

struct QI8RowPanels {
  const uint8_t* data = nullptr;
  int64_t n = 0, k = 0;
  int64_t steps = 0;  // ceil(k / 4)
  int64_t panels = 0;
  int64_t panel_bytes = 0;  // 128 header bytes, then steps * 64
};

inline QI8RowPanels q_i8_row_panel_layout(int64_t n, int64_t k) {
  QI8RowPanels p;
  p.n = n, p.k = k, p.steps = (k + 3) / 4;
  p.panels = (n + kI8RowCols - 1) / kI8RowCols;
  p.panel_bytes = 2 * 4 * kI8RowCols + p.steps * 4 * kI8RowCols;
  return p;
}

// Rows of x quantized for compute="int8_row": q [rows][ldq] (ldq = steps * 4, zeros past k), and per
// row the scale and zero point. The level's quantize_u8 writes them and its gemm_i8_row reads them.
struct QI8RowInput {
  const uint8_t* q = nullptr;
  const float* scale = nullptr;
  const int32_t* zero = nullptr;
  int64_t ldq = 0;
};

// A quantized matrix in its file layout (quant.h), for decoding rows of an embedding and, for the
// block formats, the B panels of a linear.
struct QRows {
  const uint8_t* q = nullptr;
  const uint16_t* scales = nullptr;
  const uint16_t* mins = nullptr;
  QScheme scheme = QScheme::Q8_0;
  int64_t k = 0, group = 0;
  int64_t row_bytes = 0;  // block formats: whole blocks per row
};

struct QKernels {
  int nr = 0;  // panel width: the level's F32GemmKernels::nr
  // compute="int8": the level's tiles take the weights as the unsigned operand (i8_value_bias).
  bool i8_unsigned_weights = false;
  int max_rows = 0;  // rows of x one gemv call takes (16 at every level: a batch's decode steps)
  // y[r * ldy + j] = sum_i x[r * ldx + i] * w[j][i] (+ bias[j]) for rows r < rows (1..max_rows)
  // and the columns j of panels [p0, p1). q4_1 reads xsum[r * groups + g], the sum of row r of x
  // over group g. Each row's result is bit-identical whatever `rows`, the other rows and [p0, p1)
  // are: every row is summed in the same order (batched decoding gives each sequence the tokens it
  // would get alone).
  void (*gemv)(const QPanels& w, int64_t p0, int64_t p1, const float* x, int64_t ldx, int rows, const float* xsum,
               const float* bias, float* y, int64_t ldy) = nullptr;
  // The same sums with every weight decoded before it is multiplied (x * (d q + m), the reference's
  // products), for rows of x that gemv's per-group split would get wrong: an infinity or NaN (q4_1
  // gives inf * 0 or inf - inf where the reference has an infinity), or values large enough for
  // sum(x q) over a group to overflow (the bound in optimized.cpp).
  void (*gemv_decoded)(const QPanels& w, int64_t p0, int64_t p1, const float* x, int64_t ldx, int rows,
                       const float* bias, float* y, int64_t ldy) = nullptr;
  // Rows [k0, k0 + kc) of panel p decoded into dst[kc][nr]: the f32 GEMM's B panel, bit-exact
  // weights (quant.h).
  void (*unpack)(const QPanels& w, int64_t p, int64_t k0, int64_t kc, float* dst) = nullptr;
  // Row `row` of a file-layout matrix decoded into dst[k], bit-exact.
  void (*decode_row)(const QRows& w, int64_t row, float* dst) = nullptr;
  // A block format, rows r < rows (1..max_rows) of x against rows [j0, j1) of W:
  // y[r * ldy + j] = sum_i x[r * ldx + i] * w[j][i] (+ bias[j]). Each block of W decoded once into a
  // tile for all the rows; each row's sum in the same order whatever `rows`, the other rows and
  // [j0, j1) are (the decode steps of a batch get the bits they get alone).
  void (*gemv_blocks)(const QRows& w, int64_t j0, int64_t j1, const float* x, int64_t ldx, int rows, const float* bias,
                      float* y, int64_t ldy) = nullptr;
  // A block format: columns [k0, k0 + kc) of rows [row0, row0 + rows) (rows <= nr) decoded into the
  // f32 GEMM's B panel dst[kc][nr] (column j = row row0 + j; columns past `rows` zero), bit-exact.
  void (*unpack_rows)(const QRows& w, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float* dst) = nullptr;
  // compute="int8": one row x[k] quantized exactly as quant.h's quantize_row_int8 (the reference's
  // bits), into qx[blocks * 32] (zero padded), dx[blocks] and qsum[blocks].
  void (*quantize_i8)(const float* x, int64_t k, int8_t* qx, float* dx, int32_t* qsum) = nullptr;
  // compute="int8": rows r < rows (any count) of quantized x against panels [p0, p1):
  // y[r * ldy + j] = sum over blocks b, in order, of dx[b] * (d * isum + m * qsum[b]) (+ bias[j]),
  // isum the exact integer dot product of the block (m: q4_1's and q5_1's m, the K-quants' c, else
  // none; QI8Panels above): the reference's operations in its order, so
  // the result is bit-exact and each row independent of the others.
  void (*gemm_i8)(const QI8Panels& w, int64_t p0, int64_t p1, const QI8Rows& x, int rows, const float* bias, float* y,
                  int64_t ldy) = nullptr;
  // compute="int8_row": one row x[k] quantized exactly as quant.h's quantize_row_u8, into q[ldq]
  // (zeros from k to ldq), *scale and *zero.
  void (*quantize_u8)(const float* x, int64_t k, int64_t ldq, uint8_t* q, float* scale, int32_t* zero) = nullptr;
  // compute="int8_row": rows r < rows of quantized x against panels [p0, p1):
  // y[r * ldy + j] = (scale[r] * d[j]) * float(isum - zero[r] * wsum[j]) (+ bias[j]), isum the exact
  // integer dot product over all of k: the reference's operations, bit-exact.
  void (*gemm_i8_row)(const QI8RowPanels& w, int64_t p0, int64_t p1, const QI8RowInput& x, int rows, const float* bias,
                      float* y, int64_t ldy) = nullptr;
  int i8_row_tile_panels = 1;  // panels gemm_i8_row takes at once: split the work in runs of this many
};
KILN_ISA_TABLE(QKernels, q_kernels)

}  // namespace kiln::kernels::optimized
