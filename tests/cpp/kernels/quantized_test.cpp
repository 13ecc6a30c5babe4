// kiln_quantized::linear and ::embedding (extensions/quantized): the optimized kernels against the
// reference ones at every level, for every scheme and group size, over awkward shapes; exact decoding
// of the weights; malformed weights and arguments as clear errors.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "harness.h"

namespace kiln::test {
namespace {

const int kLevels = static_cast<int>(supported_isas().size());
constexpr const char* kLinear = "kiln_quantized::linear.default";
constexpr const char* kEmbedding = "kiln_quantized::embedding.default";

// A random normal float16 with exponent in [lo, hi] (bias 15), either sign.
uint16_t random_half(int lo, int hi) {
  const uint16_t sign = static_cast<uint16_t>(uniform_int(0, 1) << 15);
  const uint16_t exp = static_cast<uint16_t>(uniform_int(lo, hi) << 10);
  return static_cast<uint16_t>(sign | exp | uniform_int(0, 1023));
}

struct QWeight {
  std::string scheme;
  int64_t n, k, group;
  TestTensor q, scales, mins;
  bool has_mins() const { return scheme == "q4_1"; }
};

// Random values and scales chosen so that weights are about [-1, 1] (the tolerance assumes it).
QWeight random_weight(const std::string& scheme, int64_t n, int64_t k, int64_t group) {
  QWeight w{scheme, n, k, group, {}, {}, {}};
  const bool four = scheme != "q8_0";
  w.q = TestTensor({n, four ? k / 2 : k}, four ? ScalarType::UInt8 : ScalarType::Int8, -1, true);
  for (int64_t i = 0; i < w.q.numel(); ++i) w.q.t.data_as<uint8_t>()[i] = static_cast<uint8_t>(next_random());
  w.scales = TestTensor({n, k / group}, ScalarType::Float16, -1, true);
  w.mins = TestTensor({n, k / group}, ScalarType::Float16, -1, true);
  for (int64_t i = 0; i < w.scales.numel(); ++i) {
    w.scales.t.data_as<uint16_t>()[i] = four ? random_half(10, 11) : random_half(6, 7);  // 2^-5..2^-3, 2^-9..2^-7
    w.mins.t.data_as<uint16_t>()[i] = random_half(12, 14);                               // 2^-3..1
  }
  return w;
}

void weight_args(Args& args, QWeight& w) {
  args.tensor(w.q).tensor(w.scales);
  if (w.has_mins())
    args.tensor(w.mins);
  else
    args.none();
}

Args linear_args(TestTensor& x, QWeight& w, TestTensor* bias, const char* compute = "float32") {
  Args args;
  args.tensor(x);
  weight_args(args, w);
  if (bias != nullptr)
    args.tensor(*bias);
  else
    args.none();
  args.str(w.scheme.c_str()).i(w.group).str(compute);
  return args;
}

// The decoded weights are exact and the sums differ from the reference's order only: the f32 GEMM's
// tolerance (gemm_test_util.h), doubled for the decode steps' per-group scaling (sum of x * q times d).
Tolerance tolerance(int64_t k) {
  Tolerance t = gemm_tolerance(k);
  return Tolerance{2 * t.rtol, 2 * t.atol};
}

struct Case {
  std::string scheme;
  int64_t group;  // 0: the row length (q8_0 per output channel)
};
const Case kCases[] = {{"q8_0", 32},  {"q8_0", 64}, {"q8_0", 0},  {"q4_0", 32}, {"q4_0", 64},
                       {"q4_0", 128}, {"q4_1", 32}, {"q4_1", 64}, {"q4_1", 128}};

// (m, n, k in groups): one row (decode) and the row counts around gemv's limits (all sums in
// registers up to 2 rows on AVX2 and the baseline, 4 on AVX-512 and NEON; row tiles of 4 or 8 up to
// 16 rows; the GEMM above) and the GEMM's tiles; N of 1, primes and around the panel widths (8, 16,
// 32); K of one group to much larger than N.
struct Shape {
  int64_t m, n, groups;
};
const Shape kShapes[] = {{1, 1, 1},   {1, 7, 3},  {1, 33, 2},  {2, 31, 5},  {3, 17, 4},   {4, 64, 2},  {5, 9, 3},
                         {7, 100, 1}, {8, 32, 6}, {1, 3, 64},  {64, 65, 3}, {65, 257, 2}, {13, 16, 9}, {1, 576, 9},
                         {2, 8, 17},  {33, 1, 4}, {16, 70, 3}, {17, 40, 2}, {11, 1, 2},   {9, 200, 4}};

KILN_TEST(quantized_linear_matches_reference) {
  for (const Case& c : kCases) {
    for (const Shape& s : kShapes) {
      const int64_t group = c.group != 0 ? c.group : 32;
      const int64_t k = s.groups * group;
      QWeight w = random_weight(c.scheme, s.n, k, c.group != 0 ? c.group : k);
      TestTensor x = TestTensor::random({s.m, k});
      TestTensor bias = TestTensor::random({s.n}, true);
      for (bool with_bias : {false, true}) {
        Args args = linear_args(x, w, with_bias ? &bias : nullptr);
        const std::string what = format("%s group %lld m=%lld n=%lld k=%lld bias=%d", c.scheme.c_str(),
                                        (long long)w.group, (long long)s.m, (long long)s.n, (long long)k, with_bias);
        const int ran = expect_tiers_match(what, kLinear, args, {s.m * s.n}, tolerance(k));
        KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
      }
    }
  }
}

KILN_TEST(quantized_linear_per_channel_any_row_length) {
  // q8_0 with one scale per output channel takes rows of any length (no group of 32).
  for (int64_t k : {1, 5, 37, 100, 577}) {
    for (int64_t m : {1, 3, 9}) {
      QWeight w = random_weight("q8_0", 45, k, k);
      TestTensor x = TestTensor::random({m, k});
      Args args = linear_args(x, w, nullptr);
      const std::string what = format("q8_0 per channel m=%lld k=%lld", (long long)m, (long long)k);
      const int ran = expect_tiers_match(what, kLinear, args, {m * 45}, tolerance(k));
      KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
    }
  }
}

KILN_TEST(quantized_linear_batched_and_fewer_rows_than_prepared) {
  for (const Case& c : {Case{"q4_1", 32}, Case{"q4_0", 64}, Case{"q8_0", 0}}) {
    // [2, 3, T, K] inputs: the leading dims are more rows.
    QWeight w = random_weight(c.scheme, 70, 128, c.group != 0 ? c.group : 128);
    TestTensor x = TestTensor::random({2, 3, 5, 128});
    Args args = linear_args(x, w, nullptr);
    int ran = expect_tiers_match(c.scheme + " batched", kLinear, args, {2 * 3 * 5 * 70}, tolerance(128));
    KILN_EXPECT(ran == kLevels, "%s batched: ran at %d levels", c.scheme.c_str(), ran);
    // Prepared for a prefill of 64 rows (the GEMM), run as decode steps and short chunks.
    for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{63}}) {
      TestTensor x64({64, 128}, ScalarType::Float32, -1);
      for (int64_t i = 0; i < x64.numel(); ++i) x64.f()[i] = uniform(-1, 1);
      Args a = linear_args(x64, w, nullptr);
      ran = expect_tiers_match(format("%s prepared for 64 rows, run with %lld", c.scheme.c_str(), (long long)rows),
                               kLinear, a, {64 * 70}, tolerance(128), false, {{&x64, {rows, 128}}});
      KILN_EXPECT(ran == kLevels, "%s fewer rows: ran at %d levels", c.scheme.c_str(), ran);
    }
  }
}

// One-hot rows of x pick single weights: every path (decode steps and the GEMM's decoded panels)
// must give the reference's decoded weights exactly, so a wrong nibble, scale or min cannot hide in
// a tolerance.
KILN_TEST(quantized_linear_decodes_weights_exactly) {
  for (const Case& c : kCases) {
    for (int64_t m : {1, 2, 4, 40}) {
      const int64_t k = c.group == 0 ? 96 : 2 * c.group, n = 37;
      QWeight w = random_weight(c.scheme, n, k, c.group != 0 ? c.group : k);
      TestTensor x({m, k});
      for (int64_t i = 0; i < m; ++i) x.f()[i * k + (i * 37 + 11) % k] = 1.0f;
      Args args = linear_args(x, w, nullptr);
      const std::string what =
          format("%s group %lld one-hot m=%lld", c.scheme.c_str(), (long long)w.group, (long long)m);
      const int ran = expect_tiers_match(what, kLinear, args, {m * n}, Tolerance{0, 0});
      KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
    }
  }
}

KILN_TEST(quantized_linear_nan_and_infinity_reach_their_rows) {
  QWeight w = random_weight("q4_1", 40, 64, 32);
  TestTensor x = TestTensor::random({6, 64});
  x.f()[1 * 64 + 3] = std::numeric_limits<float>::quiet_NaN();
  x.f()[4 * 64 + 60] = std::numeric_limits<float>::infinity();
  for (int64_t m : {1, 2, 6}) {
    TestTensor xm({m, 64});
    std::memcpy(xm.f(), x.f(), static_cast<size_t>(m * 64) * sizeof(float));
    Args args = linear_args(xm, w, nullptr);
    const int ran =
        expect_tiers_match(format("q4_1 NaN/inf m=%lld", (long long)m), kLinear, args, {m * 40}, tolerance(64));
    KILN_EXPECT(ran == kLevels, "NaN rows: ran at %d levels", ran);
  }
}

// Decode steps (1 to 16 rows: gemv) and a prefill (20 rows: the GEMM) with infinities and values
// near the float range in single rows, every scheme. The reference multiplies x by each decoded
// weight, so a +-inf in x gives +-inf (NaN only against a zero weight), and x = 3e36 against
// |w| < 1 stays finite; per-group sums of x * q would give q4_1's inf * 0 and inf - inf, and reach
// 3e36 * 127 > FLT_MAX for q8_0.
KILN_TEST(quantized_linear_infinities_and_large_values_like_the_reference) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const Case& c : kCases) {
    const int64_t k = c.group == 0 ? 96 : 2 * c.group, n = 45;
    QWeight w = random_weight(c.scheme, n, k, c.group != 0 ? c.group : k);
    for (int64_t m : {1, 2, 3, 4, 6, 9, 16, 20}) {
      for (int variant = 0; variant < 3; ++variant) {
        TestTensor x = TestTensor::random({m, k});
        const int64_t last = (m - 1) * k;
        if (variant == 0) {
          x.f()[last + 5] = kInf;  // one infinity in the last row
        } else if (variant == 1) {
          x.f()[last + k - 1] = -kInf;
          if (m > 1) x.f()[1] = kInf;  // and one in the first row
        } else {
          x.f()[last + 3] = 3e36f;  // one large finite value (two could cancel in the sum)
        }
        Args args = linear_args(x, w, nullptr);
        const std::string what = format("%s group %lld m=%lld %s", c.scheme.c_str(), (long long)w.group, (long long)m,
                                        variant == 0   ? "inf"
                                        : variant == 1 ? "-inf and inf"
                                                       : "3e36");
        const int ran = expect_tiers_match(what, kLinear, args, {m * n}, tolerance(k));
        KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
      }
    }
  }
}

// compute="int8": the optimized tier quantizes x as the reference does and combines the exact
// integer block sums in the reference's float order, so every result is bit-exact (tolerance 0),
// which also makes each row of a batch independent of the others (the reference's rows are).
KILN_TEST(quantized_linear_int8_matches_reference_exactly) {
  for (const Case& c : kCases) {
    for (const Shape& s : kShapes) {
      const int64_t group = c.group != 0 ? c.group : 32;
      const int64_t k = s.groups * group;
      QWeight w = random_weight(c.scheme, s.n, k, c.group != 0 ? c.group : k);
      TestTensor x = TestTensor::random({s.m, k});
      TestTensor bias = TestTensor::random({s.n}, true);
      for (bool with_bias : {false, true}) {
        Args args = linear_args(x, w, with_bias ? &bias : nullptr, "int8");
        const std::string what = format("int8 %s group %lld m=%lld n=%lld k=%lld bias=%d", c.scheme.c_str(),
                                        (long long)w.group, (long long)s.m, (long long)s.n, (long long)k, with_bias);
        const int ran = expect_tiers_match(what, kLinear, args, {s.m * s.n}, Tolerance{0, 0});
        KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
      }
    }
  }
  // q8_0 per output channel: rows of any length, the last 32-block short (zero padded in the panels
  // and in the quantized rows); row counts that leave every remainder of a tile of 4 and of 8 rows.
  for (int64_t k : {1, 5, 31, 33, 37, 100, 577}) {
    for (int64_t m : {1, 2, 3, 7, 12, 14, 16, 17, 64}) {
      QWeight w = random_weight("q8_0", 45, k, k);
      TestTensor x = TestTensor::random({m, k});
      const std::string what = format("int8 q8_0 per channel m=%lld k=%lld", (long long)m, (long long)k);
      const int ran = expect_tiers_match(what, kLinear, linear_args(x, w, nullptr, "int8"), {m * 45}, Tolerance{0, 0});
      KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
    }
  }
}

// The bounds the integer sums rely on (q_int8.h): q8_0 weights of -128 and 127 against qx = +-127
// (each pair of products of vpmaddubsw at 2 * 128 * 127, the most an int16 holds without saturating
// after the sign trick), nibbles of 15 against +-127 (the 4-bit int16 sums at 30480); zero rows and
// zero blocks (dx = 0); values near FLT_MAX and tiny subnormal ones (1 / dx overflows: the
// reference's clamp then gives -127 for the zeros of that block); NaN and infinities in single
// blocks (dx NaN or inf).
KILN_TEST(quantized_linear_int8_extreme_values_like_the_reference) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const Case& c : kCases) {
    const int64_t k = c.group == 0 ? 96 : 2 * c.group, n = 21;
    for (int weights = 0; weights < 3; ++weights) {
      QWeight w = random_weight(c.scheme, n, k, c.group != 0 ? c.group : k);
      uint8_t* q = w.q.t.data_as<uint8_t>();
      for (int64_t i = 0; i < w.q.numel() && weights > 0; ++i) {
        if (c.scheme == "q8_0")
          q[i] = weights == 1 ? 0x80 : (i % 3 == 0 ? 0x7f : 0x80);  // -128, or -128 and 127
        else
          q[i] = weights == 1 ? 0xff : static_cast<uint8_t>(i % 5 == 0 ? 0x0f : 0xf0);  // 15, or 15 and 0
      }
      for (int64_t m : {1, 3, 5, 16, 17, 40}) {
        TestTensor x = TestTensor::random({m, k});
        float* f = x.f();
        for (int64_t r = 0; r < m; ++r) {
          float* row = f + r * k;
          switch (r % 8) {
            case 0:  // qx = +-127
              for (int64_t i = 0; i < k; ++i) row[i] = i % 2 ? 1.0f : -1.0f;
              break;
            case 1:
              for (int64_t i = 0; i < k; ++i) row[i] = 0.0f;
              break;
            case 2:  // one block of zeros, either sign
              for (int64_t i = 0; i < 32; ++i) row[i] = i % 3 ? -0.0f : 0.0f;
              break;
            case 3:
              for (int64_t i = 0; i < k; i += 7) row[i] = i % 2 ? 3e38f : -3.3e38f;
              break;
            case 4:
              for (int64_t i = 0; i < 32; ++i) row[i] = i == 5 ? 1e-44f : (i % 4 ? 0.0f : -3e-45f);
              break;
            case 5: row[k - 1] = std::numeric_limits<float>::quiet_NaN(); break;
            case 6: row[3] = kInf, row[k / 2] = -kInf; break;
            default:
              for (int64_t i = 0; i < k; ++i) row[i] = i % 2 ? 127.0f : -127.0f;
              break;
          }
        }
        TestTensor bias = TestTensor::random({n}, true);
        const std::string what =
            format("int8 %s group %lld weights %d m=%lld", c.scheme.c_str(), (long long)w.group, weights, (long long)m);
        const int ran = expect_tiers_match(what, kLinear, linear_args(x, w, &bias, "int8"), {m * n}, Tolerance{0, 0});
        KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
      }
    }
  }
}

// compute="int8_row" (q8_0 per output channel, x per row with a zero point): bit-exact at every level
// (tolerance 0), over row counts that leave every remainder of the 8-row tile, k not a multiple of
// the 4-byte step, and n around the 16-column panel and the 3-panel tile.
KILN_TEST(quantized_linear_int8_row_matches_reference_exactly) {
  const int64_t ks[] = {1, 3, 4, 5, 31, 37, 100, 384, 577};
  const int64_t ns[] = {1, 15, 16, 17, 33, 48, 49, 100};
  const int64_t ms[] = {1, 2, 7, 8, 9, 16, 17, 64};
  for (size_t c = 0; c < sizeof(ks) / sizeof(ks[0]); ++c) {
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); ++i) {
      const int64_t k = ks[c], m = ms[i], n = ns[(c + i) % (sizeof(ns) / sizeof(ns[0]))];
      QWeight w = random_weight("q8_0", n, k, k);
      TestTensor x = TestTensor::random({m, k});
      TestTensor bias = TestTensor::random({n}, true);
      const bool with_bias = (c + i) % 2 == 1;
      const std::string what =
          format("int8_row m=%lld n=%lld k=%lld bias=%d", (long long)m, (long long)n, (long long)k, with_bias);
      const int ran = expect_tiers_match(what, kLinear, linear_args(x, w, with_bias ? &bias : nullptr, "int8_row"),
                                         {m * n}, Tolerance{0, 0});
      KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
    }
  }
}

// The rows quantize_row_u8 treats apart (quant.h) and the int32 bound: all zeros (s = 0), only
// positive values (z = 0) and only negative ones (z = 255), -0.0, values near FLT_MAX either sign
// (s stays finite), subnormals alone (1 / s overflows: a zero row), one outlier, NaN and infinities
// (s = NaN); weights of -128 and 127 against q = 255 at k = kInt8RowMaxK (the sums at their bound).
KILN_TEST(quantized_linear_int8_row_extreme_values_like_the_reference) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int64_t k : {int64_t{96}, int64_t{65536}}) {
    const int64_t n = 19;
    for (int weights = 0; weights < 3; ++weights) {
      QWeight w = random_weight("q8_0", n, k, k);
      uint8_t* q = w.q.t.data_as<uint8_t>();
      for (int64_t i = 0; i < w.q.numel() && weights > 0; ++i)
        q[i] = weights == 1 ? 0x80 : (i % 3 == 0 ? 0x7f : 0x80);  // -128, or -128 and 127
      for (int64_t m : k > 1000 ? std::vector<int64_t>{3} : std::vector<int64_t>{1, 5, 10, 17}) {
        TestTensor x = TestTensor::random({m, k});
        float* f = x.f();
        for (int64_t r = 0; r < m; ++r) {
          float* row = f + r * k;
          switch (r % 10) {
            case 0:  // q = 255 everywhere, z = 0
              for (int64_t i = 0; i < k; ++i) row[i] = 2.5f;
              break;
            case 1:
              for (int64_t i = 0; i < k; ++i) row[i] = i % 3 ? -0.0f : 0.0f;
              break;
            case 2:  // z = 255
              for (int64_t i = 0; i < k; ++i) row[i] = -1.0f - static_cast<float>(i % 7);
              break;
            case 3:
              for (int64_t i = 0; i < k; i += 7) row[i] = i % 2 ? 3.4e38f : -3.4e38f;
              break;
            case 4:
              for (int64_t i = 0; i < k; ++i) row[i] = i == 5 ? 1e-44f : (i % 4 ? 0.0f : -3e-45f);
              break;
            case 5: row[k - 1] = std::numeric_limits<float>::quiet_NaN(); break;
            case 6: row[3] = kInf, row[k / 2] = -kInf; break;
            case 7: row[k / 3] = 1e30f; break;
            default: break;  // random
          }
        }
        TestTensor bias = TestTensor::random({n}, true);
        const std::string what = format("int8_row k=%lld weights %d m=%lld", (long long)k, weights, (long long)m);
        const int ran =
            expect_tiers_match(what, kLinear, linear_args(x, w, &bias, "int8_row"), {m * n}, Tolerance{0, 0});
        KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
      }
    }
  }
}

KILN_TEST(quantized_embedding_matches_reference) {
  for (const Case& c : kCases) {
    for (int64_t k : {int64_t{32}, int64_t{128}, int64_t{576}}) {
      const int64_t group = c.group == 0 ? k : c.group;
      if (k % group) continue;
      QWeight w = random_weight(c.scheme, 50, k, group);
      for (ScalarType dtype : {ScalarType::Int64, ScalarType::Int32}) {
        TestTensor idx({2, 3}, dtype);
        const int64_t rows[] = {0, 49, 7, 7, 23, 1};
        for (int i = 0; i < 6; ++i) {
          if (dtype == ScalarType::Int64)
            idx.t.data_as<int64_t>()[i] = rows[i];
          else
            idx.t.data_as<int32_t>()[i] = static_cast<int32_t>(rows[i]);
        }
        Args args;
        weight_args(args, w);
        args.tensor(idx).str(c.scheme.c_str()).i(group);
        const std::string what =
            format("embedding %s group %lld k=%lld", c.scheme.c_str(), (long long)group, (long long)k);
        const int ran = expect_tiers_match(what, kEmbedding, args, {6 * k}, Tolerance{0, 0});
        KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
      }
    }
  }
  // q8_0 per row with a row length that is not a multiple of 32.
  QWeight w = random_weight("q8_0", 9, 45, 45);
  TestTensor idx({4}, ScalarType::Int64);
  for (int i = 0; i < 4; ++i) idx.t.data_as<int64_t>()[i] = 8 - 2 * i;
  Args args;
  weight_args(args, w);
  args.tensor(idx).str("q8_0").i(45);
  KILN_EXPECT(expect_tiers_match("embedding q8_0 k=45", kEmbedding, args, {4 * 45}, Tolerance{0, 0}) == kLevels,
              "embedding q8_0 k=45 did not run at every level");
}

// ---- the block formats (GGUF's blocks kept whole, quant.h): random bytes with finite float16 scales

struct BlockFormat {
  const char* scheme;
  int64_t elements, bytes;
  // float16 fields: byte offset in the block and the exponent range (bias 15) that keeps the
  // weights about [-1, 1] (the tolerance assumes it)
  struct Half {
    int at, lo, hi;
  };
  std::vector<Half> halves;
};
// The 16-bit formats: each of a block's 32 values is such a field. Read as bfloat16, float16 bits of
// exponent 15 are 2^-7..2^1 in magnitude.
std::vector<BlockFormat::Half> every_value(int lo, int hi) {
  std::vector<BlockFormat::Half> halves;
  for (int at = 0; at < 64; at += 2) halves.push_back({at, lo, hi});
  return halves;
}

const BlockFormat kBlockFormats[] = {
    {"q5_0", 32, 22, {{0, 10, 11}}},              // d (q - 16), |q - 16| <= 16
    {"q5_1", 32, 24, {{0, 9, 10}, {2, 12, 14}}},  // d q + m, q <= 31
    {"q4_k", 256, 144, {{0, 4, 5}, {2, 7, 8}}},   // d sc q - dmin m, sc, m <= 63, q <= 15
    {"q5_k", 256, 176, {{0, 3, 4}, {2, 7, 8}}},   // q <= 31
    {"q6_k", 256, 210, {{208, 2, 3}}},            // d sc (q - 32), |sc| <= 128
    {"f16", 32, 64, every_value(13, 15)},         // the values themselves, 2^-2..2
    {"bf16", 32, 64, every_value(15, 15)},
};

TestTensor random_blocks(const BlockFormat& f, int64_t n, int64_t k) {
  TestTensor q({n, k / f.elements * f.bytes}, ScalarType::UInt8, -1, true);
  uint8_t* p = q.t.data_as<uint8_t>();
  for (int64_t i = 0; i < q.numel(); ++i) p[i] = static_cast<uint8_t>(next_random());
  for (int64_t b = 0; b < n * (k / f.elements); ++b) {
    for (const BlockFormat::Half& h : f.halves) {
      const uint16_t v = random_half(h.lo, h.hi);
      p[b * f.bytes + h.at] = static_cast<uint8_t>(v & 0xff);
      p[b * f.bytes + h.at + 1] = static_cast<uint8_t>(v >> 8);
    }
  }
  return q;
}

Args block_linear_args(TestTensor& x, TestTensor& q, const BlockFormat& f, TestTensor* bias,
                       const char* compute = "float32") {
  Args args;
  args.tensor(x).tensor(q).none().none();
  if (bias != nullptr)
    args.tensor(*bias);
  else
    args.none();
  args.str(f.scheme).i(f.elements).str(compute);
  return args;
}

// (m, n, k in blocks): one row, a few, a batch's 16 and 17, the GEMM's tiles; N of 1, primes and
// around the panel widths.
const Shape kBlockShapes[] = {{1, 1, 1},   {1, 33, 2},  {3, 17, 1},  {5, 9, 3}, {16, 70, 2},
                              {17, 40, 1}, {64, 65, 1}, {1, 300, 3}, {2, 8, 5}, {33, 1, 2}};

bool takes_int8(const BlockFormat& f) { return !(f.elements == 32 && f.bytes == 64); }  // not f16 or bf16

// compute="float32" within the GEMM tolerance; compute="int8" (quant.h, Int8Block: each block's
// integer parts repacked into the int8 panels) bit-exact, at every level.
KILN_TEST(quantized_block_formats_match_reference) {
  for (const BlockFormat& f : kBlockFormats) {
    for (const Shape& s : kBlockShapes) {
      const int64_t k = s.groups * f.elements;
      TestTensor q = random_blocks(f, s.n, k);
      TestTensor x = TestTensor::random({s.m, k});
      TestTensor bias = TestTensor::random({s.n}, true);
      for (const char* compute : {"float32", "int8"}) {
        if (std::string(compute) == "int8" && !takes_int8(f)) continue;
        for (bool with_bias : {false, true}) {
          Args args = block_linear_args(x, q, f, with_bias ? &bias : nullptr, compute);
          const std::string what = format("%s %s m=%lld n=%lld k=%lld bias=%d", compute, f.scheme, (long long)s.m,
                                          (long long)s.n, (long long)k, with_bias);
          const Tolerance tol = std::string(compute) == "int8" ? Tolerance{0, 0} : tolerance(k);
          const int ran = expect_tiers_match(what, kLinear, args, {s.m * s.n}, tol);
          KILN_EXPECT(ran == kLevels, "%s: the optimized kernel ran at %d levels", what.c_str(), ran);
        }
      }
    }
  }
}

// compute="int8" on the block formats at the extremes the integer sums rely on (q_kernels.h): all
// bits set (q5 values of 31, K-quant scales and mins of 63, q6_k values of 31 under scales of -1)
// and all clear (q6_k values of -32), against rows of +-1 and of +-127 (qx = +-127), zero rows and
// a NaN: the reference's bits at every level.
KILN_TEST(quantized_block_formats_int8_extremes_like_the_reference) {
  for (const BlockFormat& f : kBlockFormats) {
    if (!takes_int8(f)) continue;
    for (int fill : {0x00, 0xff}) {
      const int64_t n = 19, k = 2 * f.elements, m = 5;
      TestTensor q = random_blocks(f, n, k);
      uint8_t* p = q.t.data_as<uint8_t>();
      // Every byte but the float16 fields (kept finite and small by random_blocks).
      for (int64_t b = 0; b < n * 2; ++b) {
        for (int64_t i = 0; i < f.bytes; ++i) {
          bool half = false;
          for (const BlockFormat::Half& h : f.halves) half = half || i == h.at || i == h.at + 1;
          if (!half) p[b * f.bytes + i] = static_cast<uint8_t>(fill);
        }
      }
      TestTensor x = TestTensor::random({m, k});
      float* row = x.f();
      for (int64_t i = 0; i < k; ++i) {
        row[i] = i % 2 ? 1.0f : -1.0f;
        row[k + i] = i % 3 ? 127.0f : -127.0f;
        row[2 * k + i] = 0.0f;
        row[3 * k + i] = 1.0f;
      }
      row[4 * k + 7] = std::numeric_limits<float>::quiet_NaN();
      // One row alone too (a decode step: the tiles of height 1), the row of +-127.
      TestTensor one = TestTensor::random({1, k});
      for (int64_t i = 0; i < k; ++i) one.f()[i] = row[k + i];
      for (TestTensor* rows : {&x, &one}) {
        const int64_t r = rows->numel() / k;
        const std::string what = format("int8 %s bytes 0x%02x m=%lld", f.scheme, fill, (long long)r);
        const int ran = expect_tiers_match(what, kLinear, block_linear_args(*rows, q, f, nullptr, "int8"), {r * n},
                                           Tolerance{0, 0});
        KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
      }
    }
  }
}

// The int8 reference is the float product up to the rounding of x to int8: per 32-block of x at
// most dx / 2 per element, so |y_int8 - y| <= sum_b dx_b / 2 * sum_{i in b} |w_i| (plus float
// rounding). The decoded weights come from the embedding kernel, an independent decoding, so a
// wrong split into integer parts (a scale on the wrong half, a min of the wrong sign) fails here.
KILN_TEST(quantized_block_formats_int8_reference_is_the_float_product) {
  for (const BlockFormat& f : kBlockFormats) {
    if (!takes_int8(f)) continue;
    const int64_t n = 7, k = 3 * f.elements, m = 3;
    TestTensor q = random_blocks(f, n, k);
    TestTensor x = TestTensor::random({m, k});
    TestTensor y = TestTensor::output(m * n);
    KernelRun r = run_kernel(kLinear, block_linear_args(x, q, f, nullptr, "int8"), {&y}, kTierPortable, Isa::Baseline);
    KILN_EXPECT(r.found && r.status.is_ok(), "int8 %s: %s", f.scheme, r.status.to_string().c_str());
    TestTensor idx({n}, ScalarType::Int64);
    for (int64_t j = 0; j < n; ++j) idx.t.data_as<int64_t>()[j] = j;
    TestTensor w = TestTensor::output(n * k);
    Args emb;
    emb.tensor(q).none().none().tensor(idx).str(f.scheme).i(f.elements);
    KernelRun e = run_kernel(kEmbedding, emb, {&w}, kTierPortable, Isa::Baseline);
    KILN_EXPECT(e.found && e.status.is_ok(), "embedding %s: %s", f.scheme, e.status.to_string().c_str());
    const float* xf = x.f();
    const float* wf = w.t.data_as<float>();
    const float* yf = y.t.data_as<float>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0.0, bound = 0.0, mag = 0.0;
        for (int64_t b = 0; b < k / 32; ++b) {
          double amax = 0.0, wabs = 0.0;
          for (int64_t t = b * 32; t < b * 32 + 32; ++t) {
            amax = std::max(amax, std::fabs(static_cast<double>(xf[i * k + t])));
            wabs += std::fabs(static_cast<double>(wf[j * k + t]));
            exact += static_cast<double>(xf[i * k + t]) * wf[j * k + t];
            mag += std::fabs(static_cast<double>(xf[i * k + t]) * wf[j * k + t]);
          }
          bound += amax / 127.0 / 2.0 * wabs;
        }
        const double err = std::fabs(yf[i * n + j] - exact);
        KILN_EXPECT(err <= bound * 1.001 + 1e-5 * mag, "int8 %s [%lld, %lld]: %g from the float product, bound %g",
                    f.scheme, (long long)i, (long long)j, err, bound);
      }
    }
  }
}

KILN_TEST(quantized_block_embedding_matches_reference) {
  for (const BlockFormat& f : kBlockFormats) {
    for (int64_t blocks : {int64_t{1}, int64_t{3}}) {
      const int64_t k = blocks * f.elements;
      TestTensor q = random_blocks(f, 50, k);
      TestTensor idx({2, 3}, ScalarType::Int64);
      const int64_t rows[] = {0, 49, 7, 7, 23, 1};
      for (int i = 0; i < 6; ++i) idx.t.data_as<int64_t>()[i] = rows[i];
      Args args;
      args.tensor(q).none().none().tensor(idx).str(f.scheme).i(f.elements);
      const std::string what = format("embedding %s k=%lld", f.scheme, (long long)k);
      KILN_EXPECT(expect_tiers_match(what, kEmbedding, args, {6 * k}, Tolerance{0, 0}) == kLevels,
                  "%s did not run at every level", what.c_str());
    }
  }
}

// ---- bad input: a clear KernelFailure from the reference kernel (the optimized one declines)

// Runs both tiers; the reference must fail naming `expect`, the optimized one must decline or fail.
void expect_refused(const std::string& what, const char* op, const Args& args, const char* expect) {
  TestTensor out = TestTensor::output(1 << 16);
  KernelRun r = run_kernel(op, args, {&out}, kTierPortable, Isa::Baseline);
  KILN_EXPECT(r.found && r.status.code() == Error::KernelFailure &&
                  std::string(r.status.message()).find(expect) != std::string::npos,
              "%s: reference kernel: found %d, %s (expected a KernelFailure about '%s')", what.c_str(), r.found,
              r.status.to_string().c_str(), expect);
  for (Isa isa : supported_isas()) {
    TestTensor o = TestTensor::output(1 << 16);
    KernelRun fast = run_kernel(op, args, {&o}, kTierOptimized, isa);
    KILN_EXPECT(!fast.found || fast.declined || !fast.status.is_ok(), "%s: the optimized kernel accepted it [%s]",
                what.c_str(), isa_name(isa));
  }
}

KILN_TEST(quantized_malformed_weights_are_clear_errors) {
  TestTensor x = TestTensor::random({2, 64});
  {  // truncated 4-bit values: 31 bytes per row for 64 elements
    QWeight w = random_weight("q4_1", 8, 64, 32);
    w.q = TestTensor({8, 31}, ScalarType::UInt8, -1, true);
    expect_refused("truncated qweight", kLinear, linear_args(x, w, nullptr), "does not fit q4_1 rows of 62");
  }
  {  // scales for fewer groups than the rows have
    QWeight w = random_weight("q4_0", 8, 64, 32);
    w.scales = TestTensor({8, 1}, ScalarType::Float16, -1, true);
    expect_refused("short scales", kLinear, linear_args(x, w, nullptr), "scales must be [8, 2]");
  }
  {  // scales stored as float32
    QWeight w = random_weight("q8_0", 8, 64, 32);
    w.scales = TestTensor({8, 2}, ScalarType::Float32, -1, true);
    expect_refused("float32 scales", kLinear, linear_args(x, w, nullptr), "scales");
  }
  {  // group sizes that do not fit
    for (int64_t group : {0, -32, 48, 128, 16}) {
      QWeight w = random_weight("q4_1", 8, 64, 32);
      w.group = group;
      expect_refused(format("group %lld", (long long)group), kLinear, linear_args(x, w, nullptr), "group_size");
    }
  }
  {  // q4_0 given mins, q4_1 without
    QWeight w = random_weight("q4_0", 8, 64, 32);
    Args args;
    args.tensor(x).tensor(w.q).tensor(w.scales).tensor(w.mins).none().str("q4_0").i(32).str("float32");
    expect_refused("q4_0 with mins", kLinear, args, "takes no mins");
    QWeight w1 = random_weight("q4_1", 8, 64, 32);
    Args args1;
    args1.tensor(x).tensor(w1.q).tensor(w1.scales).none().none().str("q4_1").i(32).str("float32");
    expect_refused("q4_1 without mins", kLinear, args1, "needs mins");
  }
  {  // int8 values under a 4-bit scheme, unknown scheme and compute
    QWeight w = random_weight("q8_0", 8, 64, 32);
    w.scheme = "q4_0";
    expect_refused("q4_0 with int8 values", kLinear, linear_args(x, w, nullptr), "qweight");
    w.scheme = "q3_k";
    expect_refused("unknown scheme", kLinear, linear_args(x, w, nullptr), "unknown scheme 'q3_k'");
    w.scheme = "q8_0";
    expect_refused("unknown compute", kLinear, linear_args(x, w, nullptr, "int4"), "unknown compute 'int4'");
  }
  {  // block formats: a row that is not whole blocks, scales given, the wrong group, int8 compute
    const BlockFormat& q4k = kBlockFormats[2];
    TestTensor xk = TestTensor::random({2, 512});
    TestTensor truncated({8, 2 * 144 - 1}, ScalarType::UInt8, -1, true);
    expect_refused("truncated q4_k", kLinear, block_linear_args(xk, truncated, q4k, nullptr),
                   "does not hold whole q4_k blocks (144 bytes per 256 elements)");
    TestTensor q = random_blocks(q4k, 8, 512);
    TestTensor scales({8, 2}, ScalarType::Float16, -1, true);
    Args with_scales;
    with_scales.tensor(xk).tensor(q).tensor(scales).none().none().str("q4_k").i(256).str("float32");
    expect_refused("q4_k with scales", kLinear, with_scales, "scales and mins must be None");
    Args group;
    group.tensor(xk).tensor(q).none().none().none().str("q4_k").i(32).str("float32");
    expect_refused("q4_k group 32", kLinear, group, "group_size 32 does not fit q4_k, whose blocks are 256");
    TestTensor f16 = random_blocks(kBlockFormats[5], 8, 512);
    expect_refused("f16 int8", kLinear, block_linear_args(xk, f16, kBlockFormats[5], nullptr, "int8"),
                   "compute=int8 takes integer weights, not f16");
    TestTensor wrong_k = TestTensor::random({2, 256});
    expect_refused("q4_k in_features", kLinear, block_linear_args(wrong_k, q, q4k, nullptr), "in_features");
    TestTensor signed_q({8, 44}, ScalarType::Int8, -1, true);
    expect_refused("q5_0 int8 values", kLinear, block_linear_args(x, signed_q, kBlockFormats[0], nullptr), "qweight");
    Args no_scales;
    QWeight w = random_weight("q4_0", 8, 64, 32);
    no_scales.tensor(x).tensor(w.q).none().none().none().str("q4_0").i(32).str("float32");
    expect_refused("q4_0 without scales", kLinear, no_scales, "q4_0 needs scales");
  }
  {  // a bias of the wrong length
    QWeight w = random_weight("q8_0", 8, 64, 32);
    TestTensor bias = TestTensor::random({7}, true);
    expect_refused("bias [7]", kLinear, linear_args(x, w, &bias), "bias must be [8]");
  }
  {  // compute=int8_row: q8_0 per output channel only, rows of at most kInt8RowMaxK
    QWeight blocks = random_weight("q8_0", 8, 64, 32);
    expect_refused("int8_row on groups of 32", kLinear, linear_args(x, blocks, nullptr, "int8_row"),
                   "compute=int8_row takes q8_0 with one scale per output channel");
    QWeight four = random_weight("q4_0", 8, 64, 64);
    expect_refused("int8_row on q4_0", kLinear, linear_args(x, four, nullptr, "int8_row"),
                   "compute=int8_row takes q8_0 with one scale per output channel");
    QWeight wide = random_weight("q8_0", 2, 65537, 65537);
    TestTensor long_row = TestTensor::random({1, 65537});
    expect_refused("int8_row k=65537", kLinear, linear_args(long_row, wide, nullptr, "int8_row"),
                   "at most 65536 elements");
  }
  {  // an embedding index out of range, either side
    QWeight w = random_weight("q4_1", 8, 64, 32);
    for (int64_t bad : {8, -1}) {
      TestTensor idx({2}, ScalarType::Int64);
      idx.t.data_as<int64_t>()[1] = bad;
      Args args;
      weight_args(args, w);
      args.tensor(idx).str("q4_1").i(32);
      TestTensor out = TestTensor::output(128);
      for (int32_t tier : {kTierPortable, kTierOptimized}) {
        KernelRun r = run_kernel(kEmbedding, args, {&out}, tier, supported_isas().back());
        KILN_EXPECT(r.status.code() == Error::KernelFailure &&
                        std::string(r.status.message()).find("out of range") != std::string::npos,
                    "embedding index %lld (tier %d): %s", (long long)bad, tier, r.status.to_string().c_str());
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
