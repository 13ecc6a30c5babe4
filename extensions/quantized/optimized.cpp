// The fast kernels of kiln_quantized::linear and ::embedding (the optimized tier).
//
// linear: a constant quantized weight is repacked once per program into the level's panels
// (q_kernels.h). Up to QKernels::max_rows (16) rows of x (decode steps, one per sequence of a batch)
// go through gemv, which reads the 4- or 8-bit panels once for all the rows and gives each row the
// bits it gets alone; more rows (prefill) go through the
// f32 GEMM (optimized/gemm_driver.h) with a packing hook that decodes each B block from the panels
// into worker scratch, so every weight is decoded once per call and multiplied as float32.
// compute="int8" (split formats, constant weights): the weight is repacked once into the level-
// neutral int8 panels of q_kernels.h (QI8Panels); each call quantizes the rows of x (quantize_i8,
// on the pool) into scratch and runs gemm_i8 over the panels, split over the pool: integer dot
// products per 32-block, combined in float exactly as the reference does (bit-exact, and each row
// independent of the others for any number of rows). compute="int8_row" (q8_0 per output channel):
// repacked once into QI8RowPanels; each call quantizes the rows of x to bytes with a zero point
// (quantize_u8) and runs gemm_i8_row: one integer sum per output over all of k, one float epilogue.
//
// The block formats (q5_0, q5_1, q4_k, q5_k, q6_k; the 16-bit f16, bf16) are not repacked: they are
// decoded from the file's blocks at every call, each weight once for all the rows of x. Up to max_rows rows go through
// gemv_blocks (per row of W, each run of 32 decoded into registers for 1-2 rows, 1-4 at AVX-512, else
// into an L1 tile, and dotted with every row of x; each row of x gets the bits it gets alone), more
// through the f32 GEMM whose packing hook decodes each B block (QKernels::unpack_rows).
//
// embedding: rows decoded straight from the file layout.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "common/kernel_args.h"
#include "optimized/gemm_driver.h"
#include "q_kernels.h"
#include "quant.h"

namespace kiln {
namespace quantized {
namespace {

using namespace kernels;
using optimized::F32GemmKernels;
using optimized::QKernels;
using optimized::QPanels;
using optimized::QScheme;

// The two enums list the schemes in the same order (q_kernels.h keeps no dependency on quant.h).
QScheme q_scheme(Scheme s) { return static_cast<QScheme>(static_cast<int>(s)); }
static_assert(static_cast<int>(Scheme::BF16) == static_cast<int>(QScheme::BF16), "scheme enums differ");

optimized::QRows file_rows(const QuantMatrix& w) {
  return {w.q, w.scales, w.mins, q_scheme(w.scheme), w.k, w.group, w.row_bytes()};
}

// Below this many weights a decode step stays on the calling thread (waking a worker costs more).
constexpr int64_t kMinParallelWeights = int64_t{1} << 17;
// At least QKernels::max_rows: the rows of one decode call (a batch's steps).
constexpr int kMaxDecodeRows = 16;

struct PackArg {
  QuantMatrix w;
  QPanels layout;
};

// File layout -> panels (q_kernels.h), on the pool: a model's weights are packed at load.
void pack_panels(const void* arg, void* dst) {
  const PackArg& a = *static_cast<const PackArg*>(arg);
  const QuantMatrix& w = a.w;
  const QPanels& l = a.layout;
  const int64_t nr = l.nr, half = nr / 2;
  parallel_for(l.panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* panel = static_cast<uint8_t*>(dst) + p * l.panel_bytes;
      std::fill(panel, panel + l.panel_bytes, uint8_t{0});  // rows past N: zero scales and values
      for (int64_t j = 0; j < nr && p * nr + j < w.n; ++j) {
        const int64_t row = p * nr + j;
        const uint8_t* src = w.q + row * w.row_bytes();
        // Column j's byte in a panel row and, for 4 bits, its nibble.
        const int64_t at = w.four_bit() && j >= half ? j - half : j;
        const int shift = w.four_bit() && j >= half ? 4 : 0;
        for (int64_t g = 0; g < l.groups; ++g) {
          uint8_t* block = panel + g * l.group_bytes;
          std::memcpy(block + j * 2, &w.scales[row * l.groups + g], 2);
          if (w.mins != nullptr) std::memcpy(block + nr * 2 + j * 2, &w.mins[row * l.groups + g], 2);
          uint8_t* dst_rows = block + l.scale_bytes + at;
          if (!w.four_bit()) {
            for (int64_t i = 0; i < l.group; ++i) dst_rows[i * l.row_bytes] = src[g * l.group + i];
            continue;
          }
          for (int64_t i0 = 0; i0 < l.group; i0 += 32) {  // one GGUF run of 32: 16 bytes
            const uint8_t* run = src + (g * l.group + i0) / 2;
            uint8_t* out = dst_rows + i0 * l.row_bytes;
            for (int64_t i = 0; i < 16; ++i) {
              out[i * l.row_bytes] = static_cast<uint8_t>(out[i * l.row_bytes] | ((run[i] & 15) << shift));
              out[(i + 16) * l.row_bytes] =
                  static_cast<uint8_t>(out[(i + 16) * l.row_bytes] | ((run[i] >> 4) << shift));
            }
          }
        }
      }
    }
  });
}

// FNV-1a over the scales and mins: with the layout name it keys the packed copy, so that two
// weights with equal values but other scales never share one.
uint64_t hash_scales(const QuantMatrix& w) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const uint16_t* p) {
    if (p == nullptr) return;
    const auto* b = reinterpret_cast<const uint8_t*>(p);
    for (int64_t i = 0; i < w.n * w.groups() * 2; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  mix(w.scales);
  mix(w.mins);
  return h;
}

// Whether every |x[i]| of [0, count) is at most `limit` (NaN is not): the magnitude bits compared
// as integers, a loop the compiler vectorizes. Costs one read of the rows of x per decode step.
bool within(const float* x, int64_t count, float limit) {
  uint32_t bits;
  std::memcpy(&bits, &limit, sizeof bits);
  const int32_t bound = static_cast<int32_t>(bits & 0x7fffffffu);
  int32_t over = 0;
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(&bits, x + i, sizeof bits);
    over |= static_cast<int32_t>(bits & 0x7fffffffu) > bound;
  }
  return over == 0;
}

// File layout -> int8 panels (q_kernels.h, QI8Panels), on the pool.
struct PackI8Arg {
  QuantMatrix w;
  optimized::QI8Panels layout;
};

void pack_i8_panels(const void* arg, void* dst) {
  const PackI8Arg& a = *static_cast<const PackI8Arg*>(arg);
  const QuantMatrix& w = a.w;
  const optimized::QI8Panels& l = a.layout;
  constexpr int64_t cols = optimized::kI8Cols, block = optimized::kI8Block;
  const bool four_bit = optimized::i8_four_bit(l.scheme), blocks = is_block_format(w.scheme);
  const int halves = optimized::i8_scale_halves(l.scheme);
  parallel_for(l.panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* panel = static_cast<uint8_t*>(dst) + p * l.panel_bytes;
      std::fill(panel, panel + l.panel_bytes, uint8_t{0});  // rows past N, a short last block: zeros
      for (int64_t j = 0; j < cols && p * cols + j < w.n; ++j) {
        const int64_t row = p * cols + j;
        for (int64_t g = 0; g < l.groups; ++g) {
          uint8_t* gp = panel + g * l.group_bytes;
          if (!blocks) {
            std::memcpy(gp + j * 2, &w.scales[row * l.groups + g], 2);
            if (w.mins != nullptr) std::memcpy(gp + cols * 2 + j * 2, &w.mins[row * l.groups + g], 2);
          }
          for (int64_t bb = 0; bb < l.group_blocks; ++bb) {
            uint8_t* blk = gp + l.scale_bytes + bb * l.block_bytes;
            int8_t values[block] = {};
            if (blocks) {  // a group is one file block (quant.h, Int8Block)
              Int8Block parts;
              block_int8_parts(w.scheme, w.q + row * w.row_bytes() + g * block_bytes(w.scheme), bb, &parts);
              std::memcpy(values, parts.q, sizeof values);
              std::memcpy(gp + j * 2, &parts.d, 2);
              if (optimized::i8_group_min(l.scheme)) std::memcpy(gp + cols * 2 + j * 2, &parts.m, 2);
              for (int h = 0; h < halves; ++h) {
                const auto sc = static_cast<int16_t>(parts.sc[h]);
                std::memcpy(blk + h * 32 + j * 4, &sc, 2);
                std::memcpy(blk + h * 32 + j * 4 + 2, &sc, 2);
              }
              if (optimized::i8_block_min(l.scheme)) std::memcpy(blk + halves * 32 + j * 4, &parts.c, 4);
            } else {
              for (int64_t e = 0; e < block && bb * block + e < l.group; ++e)
                values[e] = static_cast<int8_t>(w.raw(row, g * l.group + bb * block + e));
            }
            uint8_t* vals = blk + l.extra_bytes;
            for (int64_t e = 0; e < block; ++e) {
              if (!four_bit) {
                vals[32 * (e / 4) + 4 * j + e % 4] = static_cast<uint8_t>(values[e] + l.value_bias);
              } else {
                const int64_t h = e % 16;  // elements 16..31 take the high nibbles
                uint8_t& byte = vals[32 * (h / 4) + 4 * j + h % 4];
                byte = static_cast<uint8_t>(byte | (e < 16 ? values[e] : values[e] << 4));
              }
            }
          }
        }
      }
    }
  });
}

// File layout (q8_0 per output channel) -> the int8_row panels (q_kernels.h, QI8RowPanels), on the pool.
struct PackI8RowArg {
  QuantMatrix w;
  optimized::QI8RowPanels layout;
};

void pack_i8_row_panels(const void* arg, void* dst) {
  const PackI8RowArg& a = *static_cast<const PackI8RowArg*>(arg);
  const QuantMatrix& w = a.w;
  const optimized::QI8RowPanels& l = a.layout;
  constexpr int64_t cols = optimized::kI8RowCols;
  parallel_for(l.panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* panel = static_cast<uint8_t*>(dst) + p * l.panel_bytes;
      std::fill(panel, panel + l.panel_bytes, uint8_t{0});  // rows past N and k past K: zeros
      for (int64_t j = 0; j < cols && p * cols + j < w.n; ++j) {
        const int64_t row = p * cols + j;
        const float d = half_to_float(w.scales[row]);
        int32_t wsum = 0;
        for (int64_t i = 0; i < w.k; ++i) {
          const int32_t v = w.raw(row, i);
          wsum += v;
          panel[2 * 4 * cols + 4 * cols * (i / 4) + 4 * j + i % 4] = static_cast<uint8_t>(v);
        }
        std::memcpy(panel + 4 * j, &d, 4);
        std::memcpy(panel + 4 * cols + 4 * j, &wsum, 4);
      }
    }
  });
}

// Scratch of compute="int8_row": q [m][ldq], then scale and zero [m].
size_t i8_row_scratch_bytes(int64_t m, int64_t ldq) {
  return (static_cast<size_t>(m * ldq) + 63) / 64 * 64 + static_cast<size_t>(m) * (sizeof(float) + sizeof(int32_t));
}

// Scratch of compute="int8": qx [m][blocks * 32], then dx and qsum [m][blocks].
size_t i8_scratch_bytes(int64_t m, int64_t blocks) {
  const size_t q = (static_cast<size_t>(m * blocks * optimized::kI8Block) + 63) / 64 * 64;
  return q + static_cast<size_t>(m * blocks) * (sizeof(float) + sizeof(int32_t));
}

struct LinearState {
  const QKernels* q = nullptr;
  const F32GemmKernels* gemm = nullptr;
  QPanels panels;
  size_t gemm_scratch = 0;  // per worker
  bool blocks = false;      // a block format: decoded from the file at every call
  bool int8 = false;        // compute="int8": i8 panels
  optimized::QI8Panels i8;
  bool int8_row = false;  // compute="int8_row": i8 row panels
  optimized::QI8RowPanels i8_row;
};

Status linear_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  LinearArgs a;
  Status st = linear_args(true, in, out, &a);
  // Malformed arguments: the reference kernel serves, and reports them.
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  const Tensor* q = &in[1]->as_tensor();
  // Block formats are decoded from their tensor at every call: constant or not.
  const bool blocks = is_block_format(a.w.scheme);
  // compute="int8" repacks the weight: a program constant, whatever its format.
  KILN_CHECK_OR_RETURN((blocks && a.compute == Compute::Float32) ||
                           (q->is_constant() && (in[2]->is_none() || in[2]->as_tensor().is_constant()) &&
                            (in[3]->is_none() || in[3]->as_tensor().is_constant())),
                       NotSupported, "%s: the quantized weight is not a program constant", kLinearOp);
  const QKernels& qk = optimized::q_kernels_for(ctx.isa);
  const F32GemmKernels& gk = optimized::f32_gemm_for(ctx.isa);
  KILN_CHECK_OR_RETURN(qk.nr == gk.nr, Internal, "%s: panel widths differ (%d, %d)", kLinearOp, qk.nr, gk.nr);

  auto s = std::make_unique<LinearState>();
  s->q = &qk;
  s->gemm = &gk;
  if (a.compute == Compute::Int8Row) {
    PackI8RowArg arg{a.w, optimized::q_i8_row_panel_layout(a.w.n, a.w.k)};
    const std::string layout = format("kiln-quantized-i8-row-panels-n%lld-k%lld-%016llx", static_cast<long long>(a.w.n),
                                      static_cast<long long>(a.w.k), static_cast<unsigned long long>(hash_scales(a.w)));
    const size_t bytes = static_cast<size_t>(arg.layout.panels) * static_cast<size_t>(arg.layout.panel_bytes);
    Result<const void*> packed = packed_constant(ctx, *q, layout.c_str(), bytes, pack_i8_row_panels, &arg);
    if (!packed.ok()) return packed.status();
    s->int8_row = true;
    s->i8_row = arg.layout;
    s->i8_row.data = static_cast<const uint8_t*>(packed.value());
    ctx.scratch_bytes = i8_row_scratch_bytes(a.m, arg.layout.steps * 4);
    *state = s.release();
    return Status::ok();
  }
  if (a.compute == Compute::Int8) {
    PackI8Arg arg{a.w,
                  optimized::q_i8_panel_layout(q_scheme(a.w.scheme), a.w.n, a.w.k, a.w.group, qk.i8_unsigned_weights)};
    const std::string layout =
        format("kiln-quantized-i8-panels-%s-g%lld-n%lld-k%lld-b%d-%016llx", scheme_name(a.w.scheme),
               static_cast<long long>(a.w.group), static_cast<long long>(a.w.n), static_cast<long long>(a.w.k),
               arg.layout.value_bias, static_cast<unsigned long long>(hash_scales(a.w)));
    const size_t bytes = static_cast<size_t>(arg.layout.panels) * static_cast<size_t>(arg.layout.panel_bytes);
    Result<const void*> packed = packed_constant(ctx, *q, layout.c_str(), bytes, pack_i8_panels, &arg);
    if (!packed.ok()) return packed.status();
    s->int8 = true;
    s->i8 = arg.layout;
    s->i8.data = static_cast<const uint8_t*>(packed.value());
    ctx.scratch_bytes = i8_scratch_bytes(a.m, arg.layout.blocks);
    *state = s.release();
    return Status::ok();
  }
  if (blocks) {
    s->blocks = true;
    if (a.m > qk.max_rows) {
      s->gemm_scratch = optimized::gemm_worker_scratch_bytes(gk, a.w.n, /*b_prepacked=*/false);
      ctx.worker_scratch_bytes = s->gemm_scratch;
    }
    *state = s.release();
    return Status::ok();
  }
  PackArg arg{a.w, optimized::q_panel_layout(q_scheme(a.w.scheme), a.w.n, a.w.k, a.w.group, qk.nr)};
  const std::string layout = format("kiln-quantized-panels-%s-g%lld-nr%d-n%lld-k%lld-%016llx", scheme_name(a.w.scheme),
                                    static_cast<long long>(a.w.group), qk.nr, static_cast<long long>(a.w.n),
                                    static_cast<long long>(a.w.k), static_cast<unsigned long long>(hash_scales(a.w)));
  const size_t bytes = static_cast<size_t>(arg.layout.panels) * static_cast<size_t>(arg.layout.panel_bytes);
  Result<const void*> packed = packed_constant(ctx, *q, layout.c_str(), bytes, pack_panels, &arg);
  if (!packed.ok()) return packed.status();
  s->panels = arg.layout;
  s->panels.data = static_cast<const uint8_t*>(packed.value());
  // Decode steps: q4_1 needs the sums of x per group; prefill: the GEMM's blocks.
  KILN_CHECK_OR_RETURN(qk.max_rows <= kMaxDecodeRows, Internal, "%s: gemv takes %d rows", kLinearOp, qk.max_rows);
  if (a.w.scheme == Scheme::Q4_1) {
    ctx.scratch_bytes = static_cast<size_t>(std::min<int64_t>(a.m, qk.max_rows) * a.w.groups()) * sizeof(float);
  }
  if (a.m > qk.max_rows) {
    s->gemm_scratch = optimized::gemm_worker_scratch_bytes(gk, a.w.n, /*b_prepacked=*/false);
    ctx.worker_scratch_bytes = s->gemm_scratch;
  }
  *state = s.release();
  return Status::ok();
}

void linear_release(void* state) { delete static_cast<LinearState*>(state); }

struct UnpackCtx {
  const LinearState* s;
  optimized::QRows rows;  // the block formats' file layout
};

// The GEMM's B block [k0, k0 + kc) x [n0, n0 + nc): n0 is a multiple of nr (blocks start at panels).
void unpack_block(const void* ctx, int64_t, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst) {
  const LinearState& s = *static_cast<const UnpackCtx*>(ctx)->s;
  for (int64_t j = 0; j < nc; j += nr, dst += kc * nr) s.q->unpack(s.panels, (n0 + j) / nr, k0, kc, dst);
}

// The same block from a block format's rows [n0, n0 + nc) (nr of them per panel, the last one short).
void unpack_file_block(const void* ctx, int64_t, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst) {
  const UnpackCtx& u = *static_cast<const UnpackCtx*>(ctx);
  for (int64_t j = 0; j < nc; j += nr, dst += kc * nr) {
    u.s->q->unpack_rows(u.rows, n0 + j, std::min<int64_t>(nr, nc - j), k0, kc, dst);
  }
}

Status linear_run(KernelContext& ctx, Inputs in, Outputs out) {
  LinearArgs a;
  KILN_RETURN_IF_ERROR(linear_args(false, in, out, &a));
  const LinearState& s = *static_cast<const LinearState*>(ctx.state);
  const QPanels& w = s.panels;
  const float* x = a.x->data_as<const float>();
  const float* bias = a.bias != nullptr ? a.bias->data_as<const float>() : nullptr;
  float* y = out[0]->data_as<float>();
  if (a.m == 0) return Status::ok();

  if (s.int8_row) {
    const optimized::QI8RowPanels& w8 = s.i8_row;
    KILN_CHECK_OR_RETURN(ctx.scratch != nullptr, KernelFailure, "%s: no scratch was planned for compute=int8_row",
                         kLinearOp);
    const int64_t ldq = w8.steps * 4;
    auto* q8 = static_cast<uint8_t*>(ctx.scratch);
    auto* scale = reinterpret_cast<float*>(q8 + (a.m * ldq + 63) / 64 * 64);  // i8_row_scratch_bytes
    auto* zero = reinterpret_cast<int32_t*>(scale + a.m);
    parallel_for(a.m, grain_for(a.w.k), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) s.q->quantize_u8(x + r * a.w.k, a.w.k, ldq, q8 + r * ldq, scale + r, zero + r);
    });
    const int m = static_cast<int>(std::min<int64_t>(a.m, std::numeric_limits<int>::max()));
    KILN_CHECK_OR_RETURN(m == a.m, KernelFailure, "%s: %lld rows is too many", kLinearOp, static_cast<long long>(a.m));
    const optimized::QI8RowInput rows{q8, scale, zero, ldq};
    // Panels split over the pool in whole tiles of the level.
    const int64_t tile = s.q->i8_row_tile_panels;
    const bool threads = a.w.n * a.w.k * a.m >= kMinParallelWeights && num_threads() > 1;
    const int64_t units = (w8.panels + tile - 1) / tile;
    const int64_t grain = threads ? (units + num_threads() - 1) / num_threads() : units;
    parallel_for(units, std::max<int64_t>(grain, 1), [&](int64_t u0, int64_t u1) {
      s.q->gemm_i8_row(w8, tile * u0, std::min(tile * u1, w8.panels), rows, m, bias, y, a.w.n);
    });
    return Status::ok();
  }

  if (s.int8) {
    const optimized::QI8Panels& w8 = s.i8;
    KILN_CHECK_OR_RETURN(ctx.scratch != nullptr, KernelFailure, "%s: no scratch was planned for compute=int8",
                         kLinearOp);
    auto* bytes = static_cast<uint8_t*>(ctx.scratch);
    const int64_t ldq = w8.blocks * optimized::kI8Block;
    auto* qx = reinterpret_cast<int8_t*>(bytes);
    auto* dx = reinterpret_cast<float*>(bytes + (a.m * ldq + 63) / 64 * 64);  // i8_scratch_bytes
    auto* qsum = reinterpret_cast<int32_t*>(dx + a.m * w8.blocks);
    const optimized::QI8Rows rows{qx, dx, qsum, w8.blocks};
    parallel_for(a.m, grain_for(a.w.k), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        s.q->quantize_i8(x + r * a.w.k, a.w.k, qx + r * ldq, dx + r * w8.blocks, qsum + r * w8.blocks);
      }
    });
    const bool threads = a.w.n * a.w.k * a.m >= kMinParallelWeights && num_threads() > 1;
    const int64_t grain = threads ? (w8.panels + num_threads() - 1) / num_threads() : w8.panels;
    const int m = static_cast<int>(std::min<int64_t>(a.m, std::numeric_limits<int>::max()));
    KILN_CHECK_OR_RETURN(m == a.m, KernelFailure, "%s: %lld rows is too many", kLinearOp, static_cast<long long>(a.m));
    parallel_for(w8.panels, std::max<int64_t>(grain, 1),
                 [&](int64_t p0, int64_t p1) { s.q->gemm_i8(w8, p0, p1, rows, m, bias, y, a.w.n); });
    return Status::ok();
  }

  if (s.blocks && a.m <= s.q->max_rows) {
    // Decode steps of a block format: rows of W split over the pool (W's bytes read once per call).
    const int rows = static_cast<int>(a.m);
    const bool threads = a.w.n * a.w.k * rows >= kMinParallelWeights && num_threads() > 1;
    const int64_t grain = threads ? (a.w.n + num_threads() - 1) / num_threads() : a.w.n;
    const optimized::QRows file = file_rows(a.w);
    parallel_for(a.w.n, std::max<int64_t>(grain, 1),
                 [&](int64_t j0, int64_t j1) { s.q->gemv_blocks(file, j0, j1, x, a.w.k, rows, bias, y, a.w.n); });
    return Status::ok();
  }

  if (!s.blocks && a.m <= s.q->max_rows) {
    const int rows = static_cast<int>(a.m);
    // gemv sums x * q per group before scaling by d: |q| <= 128, so below this bound no such sum
    // overflows. Infinities, NaN and larger values take the decoded products (QKernels::gemv_decoded).
    // Decided per row, so that a row's path (and its bits) never depends on the other rows of a batch.
    const float limit = std::numeric_limits<float>::max() / (128.0f * static_cast<float>(w.group));
    bool split[kMaxDecodeRows];
    for (int r = 0; r < rows; ++r) split[r] = within(x + r * w.k, w.k, limit);
    float* xsum = w.scheme == QScheme::Q4_1 ? static_cast<float*>(ctx.scratch) : nullptr;
    if (xsum != nullptr) {
      for (int r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < w.groups && split[r]; ++g) {
          float sum = 0.0f;
          for (int64_t i = 0; i < w.group; ++i) sum += x[r * w.k + g * w.group + i];
          xsum[r * w.groups + g] = sum;
        }
      }
    }
    const bool threads = w.n * w.k * rows >= kMinParallelWeights && num_threads() > 1;
    const int64_t grain = threads ? (w.panels + num_threads() - 1) / num_threads() : w.panels;
    parallel_for(w.panels, std::max<int64_t>(grain, 1), [&](int64_t p0, int64_t p1) {
      // Runs of consecutive rows that take the same path.
      for (int r0 = 0, r1 = 0; r0 < rows; r0 = r1) {
        for (r1 = r0 + 1; r1 < rows && split[r1] == split[r0];) ++r1;
        const float* xr = x + r0 * w.k;
        float* yr = y + r0 * w.n;
        if (split[r0])
          s.q->gemv(w, p0, p1, xr, w.k, r1 - r0, xsum != nullptr ? xsum + r0 * w.groups : nullptr, bias, yr, w.n);
        else
          s.q->gemv_decoded(w, p0, p1, xr, w.k, r1 - r0, bias, yr, w.n);
      }
    });
    return Status::ok();
  }

  UnpackCtx uctx{&s, file_rows(a.w)};
  optimized::GemmProblem p;
  p.m = a.m, p.n = a.w.n, p.k = a.w.k;
  p.a = x, p.lda = a.w.k;
  p.c = y, p.ldc = a.w.n;
  p.pack_b = s.blocks ? unpack_file_block : unpack_block;
  p.pack_b_ctx = &uctx;
  p.bias = bias;
  return optimized::gemm(*s.gemm, p, ctx, s.gemm_scratch);
}

// The level's row decoder, chosen at load.
using DecodeRowFn = void (*)(const optimized::QRows&, int64_t, float*);

Status embedding_prepare(KernelContext& ctx, Inputs in, Outputs out, void** state) {
  EmbeddingArgs a;
  Status st = embedding_args(true, in, out, &a);
  if (!st.is_ok()) return Status(Error::NotSupported, st.message());
  *state = reinterpret_cast<void*>(optimized::q_kernels_for(ctx.isa).decode_row);
  return Status::ok();
}

Status embedding_run(KernelContext& ctx, Inputs in, Outputs out) {
  EmbeddingArgs a;
  KILN_RETURN_IF_ERROR(embedding_args(false, in, out, &a));
  const QuantMatrix& w = a.w;
  const Tensor& idx = *a.indices;
  const optimized::QRows rows = file_rows(w);
  const DecodeRowFn decode_row = reinterpret_cast<DecodeRowFn>(ctx.state);
  float* y = out[0]->data_as<float>();
  for (int64_t t = 0; t < idx.numel(); ++t) {
    const int64_t row =
        idx.dtype() == ScalarType::Int64 ? idx.data_as<const int64_t>()[t] : idx.data_as<const int32_t>()[t];
    KILN_CHECK_OR_RETURN(row >= 0 && row < w.n, KernelFailure, "%s: index %lld is out of range for %lld rows",
                         kEmbeddingOp, static_cast<long long>(row), static_cast<long long>(w.n));
    decode_row(rows, row, y + t * w.k);
  }
  return Status::ok();
}

}  // namespace
}  // namespace quantized
}  // namespace kiln

KILN_REGISTER_TIERED_KERNEL(kiln::kTierOptimized, kiln::quantized::kLinearOp, KILN_QUANTIZED_LINEAR_DTYPES,
                            kiln::quantized::linear_run, kiln::quantized::linear_prepare,
                            kiln::quantized::linear_release);
KILN_REGISTER_TIERED_KERNEL(kiln::kTierOptimized, kiln::quantized::kEmbeddingOp, KILN_QUANTIZED_EMBEDDING_DTYPES,
                            kiln::quantized::embedding_run, kiln::quantized::embedding_prepare);
