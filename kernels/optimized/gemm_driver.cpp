// The f32 GEMM driver (gemm_driver.h): B packing, cache blocks, tasks on the pool, the epilogue.
#include "optimized/gemm_driver.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "common/half.h"
#include "common/shape_math.h"
#include "kiln/thread_pool.h"
#include "optimized/bf16_gemm.h"
#include "optimized/gemm_activation.h"

// Exactly one library of a package holds the f32 GEMM (docs/architecture.md, "One GEMM").
KILN_KERNEL_CODE_NOTE("f32_gemm")

namespace kiln {
namespace kernels {
namespace optimized {
namespace {

// Below this many flops a product runs on the calling thread: waking a worker
// costs more. A few rows (a decode step) are bound by reading B, two flops per
// float of B, so there the threshold is lower.
constexpr int64_t kMinParallelFlops = int64_t{1} << 20;
constexpr int64_t kMinParallelFlopsFewRows = int64_t{1} << 18;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// True if the problem is worth more than one thread.
bool worth_threads(const F32GemmKernels& kr, const GemmProblem& p, int64_t batches) {
  const int64_t flops = sat_mul(sat_mul(sat_mul(2 * batches, p.m), p.n), std::max<int64_t>(p.k, 1));
  return flops >= (p.m <= kr.mr ? kMinParallelFlopsFewRows : kMinParallelFlops);
}

struct BatchOffsets {
  int64_t a = 0, b = 0, bias = 0, c = 0;
};

BatchOffsets batch_offsets(const GemmBatches& g, int64_t index) {
  BatchOffsets o;
  o.c = index * g.c_stride;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t i = index % g.sizes[d];
    index /= g.sizes[d];
    o.a += i * g.a_strides[d];
    o.b += i * g.b_strides[d];
    o.bias += i * g.bias_strides[d];
  }
  return o;
}

// How the problem is cut into tasks: each batch into mt row ranges times nt
// panel ranges; the pool gives each thread ceil(tasks / threads) consecutive
// tasks. First choice, as before: equal tasks, column panels first (each thread
// streams or packs its own part of B), rows when a few panels do not share
// evenly. That cut is kept unless the slowest thread's share of rows x columns
// is more than an eighth above what the best cut gives, as when rows alone
// leave threads idle (MiniLM's 128 x 384 linears on 16 threads: 11 tasks of 2
// row strips; the best cut is 2 x 8 tasks of 11 strips x 3 panels).
struct Split {
  int64_t mt = 1, nt = 1;
  int64_t rows = 0, panels = 0;  // per task
};

struct Cut {
  int64_t mt = 1, nt = 1, tasks = 1, cost = 0;
};

// The cut into (at most) mt x nt ranges per batch, with the slowest thread's share of rows x columns.
Cut cut_of(const F32GemmKernels& kr, const GemmProblem& p, int64_t batches, int64_t threads, int64_t mt, int64_t nt) {
  const int64_t panels = ceil_div(p.n, kr.nr), strips = ceil_div(p.m, kr.mr);
  const int64_t sp = ceil_div(strips, mt), pp = ceil_div(panels, nt);
  Cut c;
  c.mt = ceil_div(strips, sp), c.nt = ceil_div(panels, pp), c.tasks = batches * c.mt * c.nt;
  c.cost = ceil_div(c.tasks, threads) * std::min(sp * kr.mr, p.m) * std::min(pp * kr.nr, p.n);
  return c;
}

// The cut with the least cost and then, within an eighth of it and giving as many threads work,
// the fewest row ranges and tasks. At most 2 x threads ranges either way, 4 x threads tasks.
Cut best_cut(const F32GemmKernels& kr, const GemmProblem& p, int64_t batches, int64_t threads) {
  const int64_t panels = ceil_div(p.n, kr.nr), strips = ceil_div(p.m, kr.mr);
  auto for_each_cut = [&](auto&& visit) {
    for (int64_t nt = 1; nt <= std::min(panels, 2 * threads); ++nt) {
      for (int64_t mt = 1; mt <= std::min(strips, 2 * threads) && batches * mt * nt <= 4 * threads; ++mt) {
        const Cut c = cut_of(kr, p, batches, threads, mt, nt);
        if (c.mt == mt && c.nt == nt) visit(c);  // else the same cut as a smaller count
      }
    }
  };
  Cut least;
  least.cost = std::numeric_limits<int64_t>::max();
  for_each_cut([&](const Cut& c) {
    if (c.cost < least.cost || (c.cost == least.cost && c.tasks < least.tasks)) least = c;
  });
  Cut chosen = least;
  const int64_t busy = std::min(threads, least.tasks);
  for_each_cut([&](const Cut& c) {
    if (8 * c.cost > 9 * least.cost || c.tasks < busy) return;
    if (c.mt < chosen.mt || (c.mt == chosen.mt && c.tasks < chosen.tasks)) chosen = c;
  });
  return chosen;
}

Split split_work(const F32GemmKernels& kr, const GemmProblem& p, int64_t batches) {
  const int64_t panels = ceil_div(p.n, kr.nr), strips = ceil_div(p.m, kr.mr);
  const int64_t threads = num_threads();
  int64_t want = 1;  // tasks per batch
  if (threads > 1 && worth_threads(kr, p, batches) && batches < 4 * threads) {
    // Enough tasks that every thread gets the same number of equal ones.
    want = threads / std::gcd(batches, threads);
  }
  // Columns first, unless a few panels do not share evenly (a pointwise convolution to 40 or 96
  // channels, run transposed: 2 or 3 panels, the last one partial) and there are rows to share.
  const bool even_columns = panels >= 4 * want || (panels % want == 0 && p.n % kr.nr == 0);
  const int64_t nt = !even_columns && strips >= want ? 1 : std::min(want, panels);
  Cut cut = cut_of(kr, p, batches, threads, std::min(ceil_div(want, nt), strips), nt);
  if (want > 1) {
    const Cut best = best_cut(kr, p, batches, threads);
    if (8 * cut.cost > 9 * best.cost) cut = best;
  }
  Split s;
  s.panels = ceil_div(panels, cut.nt);
  s.rows = ceil_div(strips, cut.mt) * kr.mr;
  s.nt = ceil_div(panels, s.panels);
  s.mt = ceil_div(p.m, s.rows);
  return s;
}

// The part of one batch that a task computes.
struct Task {
  int64_t m0, m1;  // rows
  int64_t p0, p1;  // panels
};

// Rows of K per slice: at most kr.kc, and all slices about equally long, so
// that no short last slice pays a tile's load and store of C for little work.
int64_t k_slice(const F32GemmKernels& kr, int64_t k) {
  return k <= kr.kc ? std::max<int64_t>(k, 1) : ceil_div(k, ceil_div(k, kr.kc));
}

// Row stride of a packed A block: kc plus a cache line, so that the rows of a
// strip do not all map to the same L1 sets when lda is a multiple of 4 KB.
int64_t packed_a_stride(int64_t kc) { return kc + 16; }

// Floats of worker scratch: the B block (when B is packed at run), then the A block.
struct ScratchPlan {
  int64_t b_floats = 0, a_floats = 0;
};

ScratchPlan plan_scratch(const F32GemmKernels& kr, int64_t n, bool b_at_run) {
  ScratchPlan s;
  if (b_at_run) s.b_floats = kr.kc * std::min(kr.nc, ceil_div(std::max<int64_t>(n, 1), kr.nr) * kr.nr);
  s.a_floats = kr.mc * packed_a_stride(kr.kc);
  return s;
}

// `scratch`: the worker's, as large as plan_scratch asks (checked by gemm()).
void run_task(const F32GemmKernels& kr, const GemmProblem& p, int64_t batch, const Task& task, float* scratch) {
  const BatchOffsets off = batch_offsets(p.batches, batch);
  const int64_t nr = kr.nr, mr = kr.mr, kc = k_slice(kr, p.k);
  const bool prepacked = p.packed_b != nullptr;
  const ScratchPlan plan = plan_scratch(kr, p.n, !prepacked);
  float* b_buf = scratch;
  float* a_buf = scratch + plan.b_floats;
  // One row has nothing to gain from a copy of A: it is read once per panel anyway.
  const bool one_row = task.m1 - task.m0 == 1;
  const bool pack_a = p.pack_a != nullptr || !one_row;
  // A prepacked B read by one row is streamed once: no column blocks, so that
  // the four streams of gemv4 (below) are as long as possible.
  const bool streamed = one_row && prepacked;
  const int64_t block_panels = streamed ? task.p1 - task.p0 : kr.nc / nr;
  const int64_t padded_n = ceil_div(p.n, nr) * nr;

  GemmTile t;
  t.ldc = p.ldc;
  t.ldr = p.ldc;
  t.alpha = p.alpha;
  t.bias_per_row = p.bias_per_row;
  t.act = register_activation(p.act);
  const bool post_activation = activation_after_tile(p.act.kind);

  const float* a = p.a != nullptr ? p.a + off.a : nullptr;
  float* c = p.c + off.c;
  const float* residual = p.residual != nullptr ? p.residual + off.c : nullptr;
  const float* bias = p.bias != nullptr ? p.bias + off.bias : nullptr;
  for (int64_t pb = task.p0; pb < task.p1; pb += block_panels) {
    const int64_t pe = std::min(task.p1, pb + block_panels);
    const int64_t n0 = pb * nr, block_cols = std::min(p.n, pe * nr) - n0;
    int64_t k0 = 0;
    do {  // at least once, so that K == 0 still writes the epilogue of an empty sum
      const int64_t kcb = std::min(kc, p.k - k0);
      const float* panel0;
      if (prepacked) {
        panel0 = p.packed_b + off.b + k0 * padded_n + pb * kcb * nr;
      } else {
        if (p.pack_b != nullptr) {
          p.pack_b(p.pack_b_ctx, batch, k0, kcb, n0, block_cols, static_cast<int>(nr), b_buf);
        } else if (p.b_cs == 1) {
          kr.pack_rows(p.b + off.b + k0 * p.b_rs + n0, p.b_rs, kcb, block_cols, b_buf);
        } else {
          pack_b_panels(p.b + off.b + k0 * p.b_rs + n0 * p.b_cs, p.b_rs, p.b_cs, kcb, block_cols, static_cast<int>(nr),
                        b_buf);
        }
        panel0 = b_buf;
      }
      t.kc = kcb;
      t.accumulate = k0 > 0;
      t.last = k0 + kcb >= p.k;
      for (int64_t mb = task.m0; mb < task.m1; mb += kr.mc) {
        const int64_t me = std::min(task.m1, mb + kr.mc);
        const float* a_block = a + mb * p.lda + k0;
        t.lda = p.lda;
        if (pack_a) {
          const int64_t stride = packed_a_stride(kc);
          if (p.pack_a != nullptr) {
            p.pack_a(p.pack_a_ctx, batch, mb, me - mb, k0, kcb, a_buf, stride);
          } else {
            for (int64_t i = mb; i < me; ++i)
              std::memcpy(a_buf + (i - mb) * stride, a + i * p.lda + k0, static_cast<size_t>(kcb) * sizeof(float));
          }
          a_block = a_buf;
          t.lda = stride;
        }
        // The tile of rows [i0, i0 + rows) and panel `panel`.
        auto place = [&](GemmTile& u, int64_t i0, int64_t panel) {
          const int64_t j0 = panel * nr;
          u.b = panel0 + (panel - pb) * kcb * nr;
          u.nc = std::min(nr, p.n - j0);
          u.a = a_block + (i0 - mb) * u.lda;
          u.c = c + i0 * p.ldc + j0;
          u.bias = bias == nullptr ? nullptr : p.bias_per_row ? bias + i0 : bias + j0;
          u.residual = residual == nullptr ? nullptr : residual + i0 * p.ldc + j0;
        };
        if (streamed) {
          // Four quarters of the panels (their sizes differ by one at most) side
          // by side, one panel of each at a time.
          int64_t start[5];
          for (int q = 0; q <= 4; ++q) start[q] = pb + (pe - pb) * q / 4;
          for (int64_t i = 0; i < start[4] - start[3]; ++i) {
            GemmTile four[4] = {t, t, t, t};
            int count = 0;
            for (int q = 0; q < 4; ++q) {
              if (start[q] + i < start[q + 1]) place(four[count++], mb, start[q] + i);
            }
            if (count == 4) {
              kr.gemv4(four);
            } else {
              for (int j = 0; j < count; ++j) kr.tile[0](four[j]);
            }
            for (int j = 0; j < count && t.last && post_activation; ++j)
              activate_tile(*kr.activation, p.act, four[j].c, p.ldc, 1, four[j].nc);
          }
          continue;
        }
        if (me - mb == 1) {
          // One row (B packed at run): four panels at a time, so that eight sums hide the FMA
          // latency; the same sums as the one-row tile's.
          for (int64_t panel = pb; panel < pe; panel += 4) {
            GemmTile four[4] = {t, t, t, t};
            const int count = static_cast<int>(std::min<int64_t>(4, pe - panel));
            for (int j = 0; j < count; ++j) place(four[j], mb, panel + j);
            if (count == 4) {
              kr.gemv4(four);
            } else {
              for (int j = 0; j < count; ++j) (four[j].nc <= nr / 2 ? kr.narrow : kr.tile)[0](four[j]);
            }
          }
        }
        for (int64_t panel = pb; panel < pe && me - mb > 1; ++panel) {
          for (int64_t i0 = mb; i0 < me; i0 += mr) {
            const int64_t rows = std::min(mr, me - i0);
            place(t, i0, panel);
            (t.nc <= nr / 2 ? kr.narrow : kr.tile)[rows - 1](t);
          }
        }
        // Over the finished block (in L2) rather than tile by tile: rows of up to nc columns
        // instead of nr pay the call and the partial vector once per row.
        if (t.last && post_activation)
          activate_tile(*kr.activation, p.act, c + mb * p.ldc + n0, p.ldc, me - mb, block_cols);
      }
      k0 += kcb;
    } while (k0 < p.k);
  }
}

}  // namespace

int64_t GemmBatches::count() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= sizes[d];
  return n;
}

void pack_b_panels(const float* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, int nr, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += nr, dst += kc * nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - j0);
    const float* src = b + j0 * cs;
    if (cs == 1) {  // rows of B contiguous
      for (int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * nr, src + k * rs, static_cast<size_t>(cols) * 4);
    } else {  // columns of B contiguous (B = W^T of a linear weight), or any strides
      // In chunks of K, so that the chunk of the panel being written stays in L1.
      constexpr int64_t kChunk = 64;
      for (int64_t k0 = 0; k0 < kc; k0 += kChunk) {
        const int64_t k1 = std::min(kc, k0 + kChunk);
        for (int64_t j = 0; j < cols; ++j) {
          const float* col = src + j * cs;
          for (int64_t k = k0; k < k1; ++k) dst[k * nr + j] = col[k * rs];
        }
      }
    }
    if (cols < nr) {
      for (int64_t k = 0; k < kc; ++k) std::fill(dst + k * nr + cols, dst + (k + 1) * nr, 0.0f);
    }
  }
}

namespace {

struct PrepackArg {
  const float* b;
  int64_t rs, cs, k, n, kc;
  int nr;
  int64_t batches, batch_stride;
};

// Slices of kc rows of K, one after the other, each as panels (see GemmProblem::packed_b).
// On the pool: a model's weights are hundreds of MB, packed at load.
void prepack_fn(const void* arg, void* dst) {
  const PrepackArg& a = *static_cast<const PrepackArg*>(arg);
  const int64_t panels = ceil_div(a.n, a.nr), slices = ceil_div(a.k, a.kc), per_batch = slices * panels;
  parallel_for(a.batches * per_batch, grain_for(a.kc * a.nr), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t batch = t / per_batch, u = t % per_batch;
      const int64_t k0 = u / panels * a.kc, kc = std::min(a.kc, a.k - k0), j0 = u % panels * a.nr;
      float* out = static_cast<float*>(dst) + batch * a.k * panels * a.nr + k0 * panels * a.nr + j0 * kc;
      pack_b_panels(a.b + batch * a.batch_stride + k0 * a.rs + j0 * a.cs, a.rs, a.cs, kc,
                    std::min<int64_t>(a.nr, a.n - j0), a.nr, out);
    }
  });
}

}  // namespace

int64_t prepacked_b_floats(const F32GemmKernels& kernels, int64_t k, int64_t n, int64_t batches) {
  return batches * ceil_div(n, kernels.nr) * kernels.nr * k;
}

void prepack_b_into(const F32GemmKernels& kernels, const float* b, int64_t rs, int64_t cs, int64_t k, int64_t n,
                    int64_t batches, int64_t batch_stride, float* dst) {
  const PrepackArg arg{b, rs, cs, k, n, k_slice(kernels, k), kernels.nr, batches, batch_stride};
  prepack_fn(&arg, dst);
}

Result<const float*> prepack_b(KernelContext& ctx, const F32GemmKernels& kernels, const Tensor& source, int64_t rs,
                               int64_t cs, int64_t k, int64_t n, int64_t batches, int64_t batch_stride) {
  const int64_t kc = k_slice(kernels, k);
  const PrepackArg arg{source.data_as<const float>(), rs, cs, k, n, kc, kernels.nr, batches, batch_stride};
  const size_t bytes =
      static_cast<size_t>(batches * ceil_div(n, kernels.nr) * kernels.nr) * static_cast<size_t>(k) * sizeof(float);
  // Everything that determines the packed bytes besides the source's.
  const std::string layout =
      format("f32-gemm-b-kc%lld-nr%d-k%lld-n%lld-rs%lld-cs%lld-b%lldx%lld", static_cast<long long>(kc), kernels.nr,
             static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(rs),
             static_cast<long long>(cs), static_cast<long long>(batches), static_cast<long long>(batch_stride));
  Result<const void*> packed = packed_constant(ctx, source, layout.c_str(), bytes, prepack_fn, &arg);
  if (!packed.ok()) return packed.status();
  return static_cast<const float*>(packed.value());
}

namespace {

struct PrepackPairsArg {
  const float* b;  // B[k][j] = b[k * rs + j * cs]
  int64_t rs, cs, k, n, kc;
  int nr;
};

// Panel slot (p, j) = (B[2p][j], B[2p + 1][j]) as one 32-bit slot, zero past column n and past row k.
void prepack_pairs_fn(const void* arg, void* dst) {
  const PrepackPairsArg& a = *static_cast<const PrepackPairsArg*>(arg);
  const int64_t pairs = ceil_div(a.k, 2), panels = ceil_div(a.n, a.nr), slices = ceil_div(pairs, a.kc);
  parallel_for(slices * panels, grain_for(a.kc * a.nr), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t p0 = t / panels * a.kc, kc = std::min(a.kc, pairs - p0), j0 = t % panels * a.nr;
      uint32_t* out = static_cast<uint32_t*>(dst) + p0 * panels * a.nr + j0 * kc;
      for (int64_t j = 0; j < a.nr; ++j) {
        const float* col = j0 + j < a.n ? a.b + (j0 + j) * a.cs : nullptr;
        for (int64_t q = 0; q < kc; ++q) {
          const int64_t e = 2 * (p0 + q);
          uint32_t pair = 0;
          if (col != nullptr) {
            pair = bf16_gemm_operand(col[e * a.rs]);
            if (e + 1 < a.k) pair |= static_cast<uint32_t>(bf16_gemm_operand(col[(e + 1) * a.rs])) << 16;
          }
          out[q * a.nr + j] = pair;
        }
      }
    }
  });
}

struct ConvertA {
  const Bf16GemmKernels* kernels;
  const float* a;
  int64_t lda, k;
};

void convert_a_block(const void* arg, int64_t /*batch*/, int64_t m0, int64_t mc, int64_t p0, int64_t pairs, float* dst,
                     int64_t ld) {
  const ConvertA& c = *static_cast<const ConvertA*>(arg);
  c.kernels->convert_rows(c.a + m0 * c.lda, c.lda, c.k, mc, p0, pairs, dst, ld);
}

}  // namespace

Result<const float*> prepack_b_bf16(KernelContext& ctx, const Bf16GemmKernels& kernels, const Tensor& source,
                                    int64_t rs, int64_t cs, int64_t k, int64_t n) {
  const int64_t pairs = ceil_div(k, 2), kc = k_slice(kernels.gemm, pairs);
  const PrepackPairsArg arg{source.data_as<const float>(), rs, cs, k, n, kc, kernels.gemm.nr};
  const size_t bytes = static_cast<size_t>(ceil_div(n, kernels.gemm.nr) * kernels.gemm.nr) *
                       static_cast<size_t>(pairs) * sizeof(uint32_t);
  const std::string layout = format("bf16-pairs-gemm-b-kc%lld-nr%d-k%lld-n%lld-rs%lld-cs%lld",
                                    static_cast<long long>(kc), kernels.gemm.nr, static_cast<long long>(k),
                                    static_cast<long long>(n), static_cast<long long>(rs), static_cast<long long>(cs));
  Result<const void*> packed = packed_constant(ctx, source, layout.c_str(), bytes, prepack_pairs_fn, &arg);
  if (!packed.ok()) return packed.status();
  return static_cast<const float*>(packed.value());
}

Status gemm_bf16(const Bf16GemmKernels& kernels, const GemmProblem& p, const KernelContext& ctx, size_t scratch_bytes) {
  KILN_CHECK_OR_RETURN(p.packed_b != nullptr && p.a != nullptr && p.batches.ndim == 0, KernelFailure,
                       "%s: a bfloat16 GEMM takes rows of A and a B packed in pairs", ctx.op_name);
  const ConvertA convert{&kernels, p.a, p.lda, p.k};
  GemmProblem pairs = p;
  pairs.k = ceil_div(p.k, 2);
  pairs.a = nullptr;
  pairs.pack_a = convert_a_block;
  pairs.pack_a_ctx = &convert;
  return gemm(kernels.gemm, pairs, ctx, scratch_bytes);
}

size_t gemm_worker_scratch_bytes(const F32GemmKernels& kernels, int64_t n, bool b_prepacked) {
  const ScratchPlan plan = plan_scratch(kernels, n, !b_prepacked);
  return static_cast<size_t>(plan.b_floats + plan.a_floats) * sizeof(float);
}

Status gemm(const F32GemmKernels& kernels, const GemmProblem& p, const KernelContext& ctx, size_t scratch_bytes) {
  const int64_t batches = p.batches.count();
  if (p.m <= 0 || p.n <= 0 || batches <= 0) return Status::ok();
  const ScratchPlan plan = plan_scratch(kernels, p.n, p.packed_b == nullptr);
  KILN_CHECK_OR_RETURN(static_cast<size_t>(plan.b_floats + plan.a_floats) * sizeof(float) <= scratch_bytes,
                       KernelFailure, "%s: the scratch planned at load is too small for a product with %lld columns",
                       ctx.op_name, static_cast<long long>(p.n));
  const Split s = split_work(kernels, p, batches);
  const int64_t tasks_per_batch = s.mt * s.nt;
  const int64_t panels = ceil_div(p.n, kernels.nr);
  const int64_t tasks = batches * tasks_per_batch;
  parallel_for(tasks, worth_threads(kernels, p, batches) ? 1 : tasks, [&](int64_t begin, int64_t end) {
    float* scratch = static_cast<float*>(worker_scratch(ctx));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t batch = t / tasks_per_batch, mi = (t % tasks_per_batch) / s.nt, ni = t % s.nt;
      Task task;
      task.m0 = mi * s.rows, task.m1 = std::min(p.m, task.m0 + s.rows);
      task.p0 = ni * s.panels, task.p1 = std::min(panels, task.p0 + s.panels);
      run_task(kernels, p, batch, task, scratch);
    }
  });
  return Status::ok();
}

}  // namespace optimized
}  // namespace kernels
}  // namespace kiln
