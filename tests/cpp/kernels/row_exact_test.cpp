// Row-exactness of the products a batched LLM decoder runs (docs/kernels.md, "Row-exact
// products"): row r of linear(x[M rows]) must be bit-identical to linear(x[r : r + 1]), so that a
// sequence decoded greedily in a batch gets exactly the tokens it gets alone. Checked for the
// quantized linear (every scheme), the f32 linear, fused_linear and mm and the bfloat16 linear, at both tiers and every
// level (on 1 and 2 pool threads, as every case of this harness), prepared for M rows and prepared
// for 64 rows then run with M; with an infinity and a large value in some rows of the quantized
// inputs, which take another path than the finite rows (their own, not the batch's).
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace kiln::test {
namespace {

constexpr int64_t kMaxM = 64;
// The quantized linear is row-exact up to the decode steps' 16 rows (QKernels::max_rows); above
// them a prefill runs the f32 GEMM over decoded weights (other sums).
constexpr int64_t kQuantizedExactRows = 16;

struct Level {
  int32_t tier;
  Isa isa;
  std::string name() const { return tier == kTierPortable ? "portable" : std::string("optimized ") + isa_name(isa); }
};

std::vector<Level> levels() {
  std::vector<Level> out{{kTierPortable, Isa::Baseline}};
  for (Isa isa : supported_isas()) out.push_back({kTierOptimized, isa});
  return out;
}

// M = 1..20, and a few around the GEMM's tiles and blocks up to 64.
std::vector<int64_t> row_counts() {
  std::vector<int64_t> m;
  for (int64_t i = 1; i <= 20; ++i) m.push_back(i);
  for (int64_t i : {23, 24, 25, 31, 32, 33, 47, 48, 49, 63, 64}) m.push_back(i);
  return m;
}

// Args of the product with input `x` ([rows, k]).
using MakeArgs = std::function<Args(TestTensor& x)>;

// Runs `op` on x; `prepared_rows` > rows: prepared for that many rows (x's capacity), run with `rows`.
bool run_rows(const char* op, const MakeArgs& make, const TestTensor& x_all, int64_t r0, int64_t rows,
              int64_t prepared_rows, int64_t k, int64_t n, const Level& level, TestTensor* y) {
  TestTensor x({prepared_rows, k});
  std::memcpy(x.f(), x_all.f() + r0 * k, static_cast<size_t>(std::min(rows, prepared_rows) * k) * sizeof(float));
  *y = TestTensor::output(prepared_rows * n);
  Args args = make(x);
  std::vector<ResizeAfterPrepare> resize;
  if (prepared_rows != rows) resize.push_back({&x, {rows, k}});
  const KernelRun r = run_kernel(op, args, {y}, level.tier, level.isa, resize);
  KILN_EXPECT(r.found && !r.declined && r.status.is_ok(), "%s [%s] m=%lld: found %d, declined %d, %s", op,
              level.name().c_str(), (long long)rows, r.found, r.declined, r.status.to_string().c_str());
  return r.found && !r.declined && r.status.is_ok();
}

// Every row of every M-row product (M in row_counts() up to exact_rows at the optimized tier) is
// bit-identical to the same row run alone.
void expect_rows_exact(const std::string& what, const char* op, const TestTensor& x, int64_t k, int64_t n,
                       int64_t exact_rows, const MakeArgs& make) {
  for (const Level& level : levels()) {
    const std::string where = what + " [" + level.name() + "]";
    std::vector<TestTensor> alone(kMaxM);
    bool ok = true;
    for (int64_t r = 0; r < kMaxM && ok; ++r) ok = run_rows(op, make, x, r, 1, 1, k, n, level, &alone[r]);
    if (!ok) continue;
    for (int64_t m : row_counts()) {
      if (level.tier == kTierOptimized && m > exact_rows) break;
      for (int64_t prepared : {m, kMaxM}) {
        TestTensor y;
        if (!run_rows(op, make, x, 0, m, prepared, k, n, level, &y)) continue;
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < m * n; ++i) {
          if (std::memcmp(y.f() + i, alone[i / n].f() + i % n, sizeof(float)) != 0) {
            if (first < 0) first = i;
            ++bad;
          }
        }
        KILN_EXPECT(bad == 0,
                    "%s m=%lld (prepared for %lld rows): %lld elements differ from their row alone, first row %lld "
                    "column %lld: %.9g, alone %.9g",
                    where.c_str(), (long long)m, (long long)prepared, (long long)bad, (long long)(first / n),
                    (long long)(first % n), first < 0 ? 0.0 : y.f()[first],
                    first < 0 ? 0.0 : alone[first / n].f()[first % n]);
      }
    }
  }
}

// N = 300: 10 panels of 32 (four streams of unequal length, a last panel of 12 columns), 19 of 16,
// 38 of 8; K = 640: several groups, and two or three slices of K in the f32 GEMM. Big enough for the
// decode steps to use both threads.
constexpr int64_t kN = 300, kK = 640;

KILN_TEST(row_exact_f32_linear_and_mm) {
  TestTensor x = TestTensor::random({kMaxM, kK});
  TestTensor w = TestTensor::random({kN, kK}, true), w_run = TestTensor::random({kN, kK});
  TestTensor b = TestTensor::random({kN}, true);
  TestTensor bt = TestTensor::random({kK, kN}, true), bt_run = TestTensor::random({kK, kN});
  expect_rows_exact("linear, constant weight and bias", "aten::linear.default", x, kK, kN, kMaxM, [&](TestTensor& xi) {
    Args a;
    a.tensor(xi).tensor(w).tensor(b);
    return a;
  });
  expect_rows_exact("linear, weight at run", "aten::linear.default", x, kK, kN, kMaxM, [&](TestTensor& xi) {
    Args a;
    a.tensor(xi).tensor(w_run).none();
    return a;
  });
  expect_rows_exact("fused_linear silu", "kiln::fused_linear.default", x, kK, kN, kMaxM, [&](TestTensor& xi) {
    Args a;
    a.tensor(xi).tensor(w).tensor(b).none().str("silu").d(0).d(0);
    return a;
  });
  for (TestTensor* operand : {&bt, &bt_run}) {
    expect_rows_exact(operand == &bt ? "mm, constant B" : "mm, B at run", "aten::mm.default", x, kK, kN, kMaxM,
                      [&](TestTensor& xi) {
                        Args a;
                        a.tensor(xi).tensor(*operand);
                        return a;
                      });
  }
}

// The bfloat16 GEMM (GemmPrecision::Bfloat16) sums as the f32 one does, over pairs of K.
KILN_TEST(row_exact_bf16_linear) {
  ScopedGemmPrecision bf16(GemmPrecision::Bfloat16);
  TestTensor x = TestTensor::random({kMaxM, kK});
  TestTensor w = TestTensor::random({kN, kK}, true), b = TestTensor::random({kN}, true);
  expect_rows_exact("bf16 fused_linear gelu", "kiln::fused_linear.default", x, kK, kN, kMaxM, [&](TestTensor& xi) {
    Args a;
    a.tensor(xi).tensor(w).tensor(b).none().str("gelu").d(0).d(0);
    return a;
  });
}

KILN_TEST(row_exact_quantized_linear) {
  struct Scheme {
    const char* name;
    int64_t group;
  };
  for (const Scheme& sc :
       {Scheme{"q8_0", 32}, Scheme{"q8_0", kK}, Scheme{"q4_0", 32}, Scheme{"q4_1", 32}, Scheme{"q4_1", 64}}) {
    const bool four = std::string(sc.name) != "q8_0";
    TestTensor q({kN, four ? kK / 2 : kK}, four ? ScalarType::UInt8 : ScalarType::Int8, -1, true);
    for (int64_t i = 0; i < q.numel(); ++i) q.t.data_as<uint8_t>()[i] = static_cast<uint8_t>(next_random());
    TestTensor scales({kN, kK / sc.group}, ScalarType::Float16, -1, true);
    TestTensor mins({kN, kK / sc.group}, ScalarType::Float16, -1, true);
    for (int64_t i = 0; i < scales.numel(); ++i) {
      // Normal float16 values of 2^-7..2^-4 (scales) and 2^-4..2^-1 (mins), either sign.
      scales.t.data_as<uint16_t>()[i] =
          static_cast<uint16_t>((uniform_int(0, 1) << 15) | (uniform_int(8, 11) << 10) | uniform_int(0, 1023));
      mins.t.data_as<uint16_t>()[i] =
          static_cast<uint16_t>((uniform_int(0, 1) << 15) | (uniform_int(11, 14) << 10) | uniform_int(0, 1023));
    }
    TestTensor b = TestTensor::random({kN}, true);
    const MakeArgs make = [&](TestTensor& xi) {
      Args a;
      a.tensor(xi).tensor(q).tensor(scales);
      if (std::string(sc.name) == "q4_1")
        a.tensor(mins);
      else
        a.none();
      a.tensor(b).str(sc.name).i(sc.group).str("float32");
      return a;
    };
    const std::string what = format("quantized %s group %lld", sc.name, (long long)sc.group);
    TestTensor x = TestTensor::random({kMaxM, kK});
    expect_rows_exact(what, "kiln_quantized::linear.default", x, kK, kN, kQuantizedExactRows, make);
    // Rows that take the decoded products (an infinity, a value near the float range) among finite ones.
    x.f()[2 * kK + 7] = std::numeric_limits<float>::infinity();
    x.f()[5 * kK + 100] = 3e36f;
    x.f()[6 * kK + 1] = -std::numeric_limits<float>::infinity();
    expect_rows_exact(what + " with inf and 3e36 rows", "kiln_quantized::linear.default", x, kK, kN,
                      kQuantizedExactRows, make);
  }
}

// The block formats: decode steps (gemv_blocks) up to 16 rows, the f32 GEMM over decoded blocks above. K = 512: two
// K-quant blocks, 16 of 32; N = 130: five panels of 32 (a short last one), and small enough for the reference, which
// decodes every weight for every row, to stay quick.
KILN_TEST(row_exact_quantized_block_formats) {
  constexpr int64_t k = 512, n = 130;
  struct Format {
    const char* name;
    int64_t elements, bytes, half_at;
  };
  for (const Format& f : {Format{"q5_0", 32, 22, 0}, Format{"q5_1", 32, 24, 0}, Format{"q4_k", 256, 144, 0},
                          Format{"q5_k", 256, 176, 0}, Format{"q6_k", 256, 210, 208}}) {
    TestTensor q({n, k / f.elements * f.bytes}, ScalarType::UInt8, -1, true);
    uint8_t* p = q.t.data_as<uint8_t>();
    for (int64_t i = 0; i < q.numel(); ++i) p[i] = static_cast<uint8_t>(next_random());
    for (int64_t b = 0; b < n * (k / f.elements); ++b) {
      // Small normal float16 scales (and mins: bytes 2..3 of q5_1, q4_k, q5_k), either sign.
      for (int64_t at : {f.half_at, f.half_at + 2}) {
        if (at == f.half_at + 2 && (std::string(f.name) == "q5_0" || std::string(f.name) == "q6_k")) continue;
        const uint16_t h =
            static_cast<uint16_t>((uniform_int(0, 1) << 15) | (uniform_int(3, 6) << 10) | uniform_int(0, 1023));
        p[b * f.bytes + at] = static_cast<uint8_t>(h & 0xff);
        p[b * f.bytes + at + 1] = static_cast<uint8_t>(h >> 8);
      }
    }
    TestTensor b = TestTensor::random({n}, true);
    const MakeArgs make = [&](TestTensor& xi) {
      Args a;
      a.tensor(xi).tensor(q).none().none().tensor(b).str(f.name).i(f.elements).str("float32");
      return a;
    };
    const std::string what = format("quantized %s", f.name);
    TestTensor x = TestTensor::random({kMaxM, k});
    expect_rows_exact(what, "kiln_quantized::linear.default", x, k, n, kQuantizedExactRows, make);
    x.f()[2 * k + 7] = std::numeric_limits<float>::infinity();
    x.f()[5 * k + 100] = 3e36f;
    expect_rows_exact(what + " with inf and 3e36 rows", "kiln_quantized::linear.default", x, k, n, kQuantizedExactRows,
                      make);
  }
}

}  // namespace
}  // namespace kiln::test
