// Optimized scaled_dot_product_attention against the portable kernel: prefill and decode shapes,
// GQA, causal, bool and float masks broadcast in every position, fully masked rows, NaN queries,
// row counts and key counts around the tile sizes (64), odd head dims. kiln::sdpa_rows against sdpa on
// the gathered rows (bit for bit, each tier and level; float16 and bfloat16 caches against sdpa on
// their rows widened) and its row indices out of range.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/half.h"
#include "harness.h"

namespace kiln::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Scores and sums in float (the portable kernel: float64): outputs, weighted means of values in
// [-1, 1], differ by a few units of 1e-7.
constexpr Tolerance kSdpaTol{1e-5f, 2e-6f};

struct Case {
  int64_t b = 1, h = 1, hkv = 1, l = 1, s = 1, e = 16, ev = 16;
  bool batched = true, causal = false, gqa = false;
  std::vector<int64_t> mask_shape;  // empty: no mask
  bool bool_mask = true;
  double scale = -1;  // < 0: default
  bool nan_query = false;
};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void check(const Case& c, const char* what) {
  std::vector<int64_t> qs = {c.b, c.h, c.l, c.e}, ks = {c.b, c.hkv, c.s, c.e}, vs = {c.b, c.hkv, c.s, c.ev};
  if (!c.batched) qs.erase(qs.begin()), ks.erase(ks.begin()), vs.erase(vs.begin());
  TestTensor q = TestTensor::random(qs), k = TestTensor::random(ks), v = TestTensor::random(vs);
  if (c.nan_query) q.f()[c.e + 1] = kNaN;  // the second query row is NaN
  TestTensor mask;
  if (!c.mask_shape.empty()) {
    const int64_t n = numel(c.mask_shape);
    const int64_t row = c.mask_shape.back();
    if (c.bool_mask) {
      mask = TestTensor(c.mask_shape, ScalarType::Bool);
      auto* m = mask.t.data_as<uint8_t>();
      // Mostly "key j <= row r + a shift", some random holes, and the first row fully masked.
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = i / row, j = i % row;
        m[i] = (j <= r + 3 && next_random() % 5 != 0) ? 1 : 0;
      }
      for (int64_t j = 0; j < row; ++j) m[j] = 0;
    } else {
      mask = TestTensor::random(c.mask_shape, false, -2.0f, 2.0f);
      for (int64_t i = 0; i < n; ++i)
        if (next_random() % 4 == 0) mask.f()[i] = -kInf;
      for (int64_t j = 0; j < row; ++j) mask.f()[j] = -kInf;  // the first row fully masked
      // A padding-like key (BERT's -10000); a shift that large on a whole row would cost the float
      // scores their precision (the portable kernel adds in float64).
      if (row > 2 && n > row + 2) mask.f()[row + 1] = -10000.0f;
    }
  }
  Args args;
  args.tensor(q).tensor(k).tensor(v);
  if (c.mask_shape.empty())
    args.none();
  else
    args.tensor(mask);
  args.d(0.0).b(c.causal);
  if (c.scale < 0)
    args.none();
  else
    args.d(c.scale);
  args.b(c.gqa);
  std::string name =
      format("sdpa %s: B=%lld H=%lld Hkv=%lld L=%lld S=%lld E=%lld Ev=%lld", what, (long long)c.b, (long long)c.h,
             (long long)c.hkv, (long long)c.l, (long long)c.s, (long long)c.e, (long long)c.ev);
  if (!c.mask_shape.empty()) {
    name += " mask [";
    for (int64_t d : c.mask_shape) name += format(" %lld", (long long)d);
    name += " ]";
  }
  const int ran =
      expect_tiers_match(name, "aten::scaled_dot_product_attention.default", args, {c.b * c.h * c.l * c.ev}, kSdpaTol);
  KILN_EXPECT(ran == static_cast<int>(supported_isas().size()), "%s: the optimized kernel ran at %d levels",
              name.c_str(), ran);
}

KILN_TEST(sdpa_model_shapes_match_reference) {
  Case prefill;  // SmolLM2: 9 heads of 64, a bool mask [T, capacity]
  prefill.h = prefill.hkv = 9, prefill.l = 37, prefill.s = 128, prefill.e = prefill.ev = 64;
  prefill.mask_shape = {37, 128};
  check(prefill, "smollm2 prefill");
  Case decode = prefill;
  decode.l = 1, decode.mask_shape = {1, 128};
  check(decode, "smollm2 decode");
  Case gqa = prefill;  // the same with the KV heads not expanded
  gqa.hkv = 3, gqa.gqa = true, gqa.s = 256, gqa.mask_shape = {37, 256};
  check(gqa, "gqa prefill");
  gqa.l = 1, gqa.mask_shape = {1, 256};
  check(gqa, "gqa decode");
  Case minilm;  // 12 heads of 32, a float padding mask [B, 1, 1, S]
  minilm.h = minilm.hkv = 12, minilm.l = minilm.s = 128, minilm.e = minilm.ev = 32;
  minilm.mask_shape = {1, 1, 1, 128}, minilm.bool_mask = false;
  check(minilm, "minilm");
}

KILN_TEST(sdpa_tile_edges_match_reference) {
  for (int64_t l : {1, 2, 3, 63, 64, 65, 130})
    for (int64_t s : {1, 5, 63, 64, 65, 200}) {
      Case c;
      c.h = c.hkv = 2, c.l = l, c.s = s, c.e = 17, c.ev = 9;
      check(c, "no mask");
      c.causal = true;
      check(c, "causal");
    }
  for (int64_t e : {1, 3, 4, 5, 16, 33, 80}) {
    Case c;
    c.h = c.hkv = 3, c.l = 7, c.s = 70, c.e = e, c.ev = e + 3;
    check(c, "head dims");
  }
}

KILN_TEST(sdpa_masks_match_reference) {
  const std::vector<std::vector<int64_t>> shapes = {{9, 70},    {1, 70},      {2, 1, 9, 70}, {1, 4, 9, 70},
                                                    {4, 1, 70}, {2, 4, 1, 1}, {70},          {2, 4, 9, 70}};
  for (const auto& shape : shapes)
    for (bool boolean : {true, false}) {
      Case c;
      c.b = 2, c.h = 4, c.hkv = 2, c.gqa = true, c.l = 9, c.s = 70, c.e = 24, c.ev = 20;
      c.mask_shape = shape, c.bool_mask = boolean;
      check(c, boolean ? "bool mask" : "float mask");
    }
  Case c;
  c.h = c.hkv = 3, c.l = 5, c.s = 40, c.batched = false, c.causal = true, c.scale = 0.3;
  check(c, "3-D causal with scale");
  c.causal = false, c.nan_query = true, c.mask_shape = {5, 40};
  check(c, "NaN query row");
  c.bool_mask = false;
  check(c, "NaN query row, float mask");
}

// A 16-bit copy of a float32 cache (`dtype` float16 or bfloat16), whose values `cache` then takes
// (rounded), so that sdpa on cache's rows is the reference of sdpa_rows on the copy.
TestTensor to_16bit(TestTensor& cache, ScalarType dtype) {
  TestTensor out(cache.shape(), dtype);
  auto* bits = out.t.data_as<uint16_t>();
  for (int64_t i = 0; i < cache.numel(); ++i) {
    const float x = cache.f()[i];
    bits[i] = dtype == ScalarType::Float16 ? kernels::float_to_half(x) : kernels::float_to_bfloat16(x);
    cache.f()[i] = dtype == ScalarType::Float16 ? kernels::half_to_float(bits[i]) : kernels::bfloat16_to_float(bits[i]);
  }
  return out;
}

// kiln::sdpa_rows(q, k_cache, v_cache, rows, mask, Hkv, causal, scale) against sdpa on
// index_select(cache, rows).view(B, Hkv, S, *): the same bits at each tier and level. `runs`: rows in
// runs of consecutive cache rows (a sequence's positions: read in place) or shuffled (gathered).
// `cache`: float32 caches, or float16 / bfloat16 ones (against sdpa on their widened rows).
void check_rows(int64_t b, int64_t h, int64_t hkv, int64_t l, int64_t s, int64_t e, int64_t ev, bool runs,
                bool with_mask, const char* what, ScalarType cache = ScalarType::Float32) {
  const int64_t capacity = s + 7, cache_rows = 3 * hkv * capacity, n = b * hkv * s;
  TestTensor q = TestTensor::random({b, h, l, e}), kc = TestTensor::random({cache_rows, e}),
             vc = TestTensor::random({cache_rows, ev});
  TestTensor kc16, vc16;
  if (cache != ScalarType::Float32) kc16 = to_16bit(kc, cache), vc16 = to_16bit(vc, cache);
  TestTensor rows({n}, ScalarType::Int64), k({b, hkv, s, e}), v({b, hkv, s, ev});
  for (int64_t i = 0; i < b * hkv; ++i) {
    const int64_t slot = (i / hkv + 1) % 3, head = i % hkv, base = (slot * hkv + head) * capacity;
    for (int64_t j = 0; j < s; ++j) rows.i64()[i * s + j] = runs ? base + j : uniform_int(0, cache_rows - 1);
  }
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(k.f() + i * e, kc.f() + rows.i64()[i] * e, sizeof(float) * e);
    std::memcpy(v.f() + i * ev, vc.f() + rows.i64()[i] * ev, sizeof(float) * ev);
  }
  TestTensor mask({b, 1, l, s}, ScalarType::Bool);
  for (int64_t i = 0; i < mask.numel(); ++i) mask.t.data_as<uint8_t>()[i] = (i % s) <= (i / s) % l + s - l ? 1 : 0;
  const auto fill = [&](Args& a) {
    if (with_mask)
      a.tensor(mask);
    else
      a.none();
  };
  Args gathered, fused;
  gathered.tensor(q).tensor(k).tensor(v);
  fill(gathered);
  gathered.d(0.0).b(false).none().b(true);
  if (cache != ScalarType::Float32)
    fused.tensor(q).tensor(kc16).tensor(vc16).tensor(rows);
  else
    fused.tensor(q).tensor(kc).tensor(vc).tensor(rows);
  fill(fused);
  fused.i(hkv).b(false).none();
  const std::string name = format("sdpa_rows %s, %s caches: B=%lld H=%lld Hkv=%lld L=%lld S=%lld E=%lld Ev=%lld", what,
                                  scalar_type_name(cache), (long long)b, (long long)h, (long long)hkv, (long long)l,
                                  (long long)s, (long long)e, (long long)ev);
  const int64_t out = b * h * l * ev;
  const auto same = [&](const char* tier, int32_t t, Isa isa) {
    TestTensor want = TestTensor::output(out), got = TestTensor::output(out);
    const KernelRun r1 = run_kernel("aten::scaled_dot_product_attention.default", gathered, {&want}, t, isa);
    const KernelRun r2 = run_kernel("kiln::sdpa_rows.default", fused, {&got}, t, isa);
    KILN_EXPECT(r1.status.is_ok() && r2.status.is_ok() && !r2.declined && r2.found, "%s (%s %s): %s / %s", name.c_str(),
                tier, isa_name(isa), r1.status.to_string().c_str(), r2.status.to_string().c_str());
    KILN_EXPECT(got.shape() == want.shape() && std::memcmp(got.f(), want.f(), sizeof(float) * out) == 0,
                "%s (%s %s): not the bits of sdpa on the gathered rows", name.c_str(), tier, isa_name(isa));
  };
  same("portable", kTierPortable, supported_isas().back());
  for (Isa isa : supported_isas()) same("optimized", kTierOptimized, isa);
}

KILN_TEST(sdpa_rows_equals_sdpa_on_gathered_rows) {
  for (bool runs : {true, false})
    for (bool with_mask : {true, false}) {
      const char* what = runs ? (with_mask ? "runs, mask" : "runs") : (with_mask ? "shuffled, mask" : "shuffled");
      check_rows(1, 9, 3, 1, 101, 64, 64, runs, with_mask, what);  // SmolLM2 decode
      check_rows(8, 9, 3, 1, 37, 64, 64, runs, with_mask, what);   // a batch of 8
      check_rows(2, 4, 2, 5, 130, 17, 9, runs, with_mask, what);   // prefill, blocks of 64 and a tail
      check_rows(2, 2, 2, 3, 1, 8, 8, runs, with_mask, what);
      for (ScalarType cache : {ScalarType::Float16, ScalarType::BFloat16}) {
        check_rows(1, 9, 3, 1, 101, 64, 64, runs, with_mask, what, cache);
        check_rows(2, 4, 2, 5, 130, 17, 9, runs, with_mask, what, cache);
      }
    }
}

KILN_TEST(sdpa_rows_rejects_bad_rows) {
  const int64_t b = 2, h = 4, hkv = 2, l = 1, s = 5, e = 8, r = 40;
  TestTensor q = TestTensor::random({b, h, l, e}), kc = TestTensor::random({r, e}), vc = TestTensor::random({r, e});
  TestTensor y = TestTensor::output(b * h * l * e);
  const auto args = [&](TestTensor& rows, int64_t kv_heads) {
    Args a;
    a.tensor(q).tensor(kc).tensor(vc).tensor(rows).none().i(kv_heads).b(false).none();
    return a;
  };
  for (int64_t bad : {r, int64_t{-1}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    TestTensor rows({b * hkv * s}, ScalarType::Int64);
    for (int64_t i = 0; i < rows.numel(); ++i) rows.i64()[i] = i;
    rows.i64()[rows.numel() - 1] = bad;
    expect_rejected(format("sdpa_rows row %lld", (long long)bad), "kiln::sdpa_rows.default", args(rows, hkv), {&y},
                    "out of bounds");
  }
  TestTensor odd({b * hkv * s - 1}, ScalarType::Int64);
  expect_rejected("sdpa_rows rows not B * Hkv * S", "kiln::sdpa_rows.default", args(odd, hkv), {&y}, "whole number");
  TestTensor rows({b * hkv * s}, ScalarType::Int64);
  expect_rejected("sdpa_rows kv_heads 3", "kiln::sdpa_rows.default", args(rows, 3), {&y}, "must divide");
  expect_rejected("sdpa_rows kv_heads 0", "kiln::sdpa_rows.default", args(rows, 0), {&y}, "must divide");
  TestTensor k3 = TestTensor::random({1, r, e});
  Args bad3;
  bad3.tensor(q).tensor(k3).tensor(vc).tensor(rows).none().i(hkv).b(false).none();
  expect_rejected("sdpa_rows 3-D k_cache", "kiln::sdpa_rows.default", bad3, {&y}, "incompatible");
  // 16-bit caches: both of one dtype, under a float32 query only.
  TestTensor k16({r, e}, ScalarType::Float16), v16({r, e}, ScalarType::Float16), vb16({r, e}, ScalarType::BFloat16);
  for (int64_t i = 0; i < rows.numel(); ++i) rows.i64()[i] = i;
  Args mixed;
  mixed.tensor(q).tensor(k16).tensor(vb16).tensor(rows).none().i(hkv).b(false).none();
  expect_rejected("sdpa_rows f16 keys, bf16 values", "kiln::sdpa_rows.default", mixed, {&y}, "v_cache");
  Args half_and_float;
  half_and_float.tensor(q).tensor(k16).tensor(vc).tensor(rows).none().i(hkv).b(false).none();
  expect_rejected("sdpa_rows f16 keys, f32 values", "kiln::sdpa_rows.default", half_and_float, {&y}, "v_cache");
  TestTensor q64({b, h, l, e}, ScalarType::Float64), y64 = TestTensor::output(b * h * l * e, ScalarType::Float64);
  Args double_query;
  double_query.tensor(q64).tensor(k16).tensor(v16).tensor(rows).none().i(hkv).b(false).none();
  expect_rejected("sdpa_rows f64 query, f16 caches", "kiln::sdpa_rows.default", double_query, {&y64}, "k_cache");
}

}  // namespace
}  // namespace kiln::test
