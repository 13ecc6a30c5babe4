// Optimized conv2d and fused_conv2d against the portable kernels.
#include <limits>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "harness.h"

namespace kiln::test {
namespace {

const int kLevels = static_cast<int>(supported_isas().size());

struct Conv {
  std::vector<int64_t> input;  // [N, C, H, W] or [C, H, W]
  int64_t cout, kh, kw;
  int64_t stride[2], pad[2], dil[2];
  int64_t groups;
  bool bias;
};

std::string describe_conv(const Conv& c) {
  return format("conv %s cout=%lld k=%lldx%lld s=%lld,%lld p=%lld,%lld d=%lld,%lld g=%lld bias=%d",
                describe_sizes({c.input.data(), c.input.size()}).c_str(), (long long)c.cout, (long long)c.kh,
                (long long)c.kw, (long long)c.stride[0], (long long)c.stride[1], (long long)c.pad[0],
                (long long)c.pad[1], (long long)c.dil[0], (long long)c.dil[1], (long long)c.groups, c.bias);
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

int64_t output_numel(const Conv& c) {
  const size_t n = c.input.size();
  const int64_t images = n == 4 ? c.input[0] : 1;
  return images * c.cout * out_size(c.input[n - 2], c.kh, c.stride[0], c.pad[0], c.dil[0]) *
         out_size(c.input[n - 1], c.kw, c.stride[1], c.pad[1], c.dil[1]);
}

// Tensors of one convolution; the weights are constants, as in a program.
struct ConvTensors {
  TestTensor x, w, b;
  explicit ConvTensors(const Conv& c)
      : x(TestTensor::random(c.input)),
        w(TestTensor::random({c.cout, c.input[c.input.size() - 3] / c.groups, c.kh, c.kw}, true)),
        b(TestTensor::random({c.cout}, true)) {}
};

// conv2d's arguments after input, weight, bias (and fused_conv2d's residual).
void geometry_args(Args& args, const Conv& c) {
  args.ints({c.stride[0], c.stride[1]}).ints({c.pad[0], c.pad[1]}).ints({c.dil[0], c.dil[1]}).i(c.groups);
}

const Conv kConvs[] = {
    // pointwise, strided pointwise, batches
    {{1, 16, 7, 9}, 24, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{2, 8, 9, 9}, 16, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},
    {{1, 40, 5, 5}, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
    // pointwise on small images (transposed, X^T packed by 4x4 transposes): runs of rows that
    // cross images, channels not a multiple of 4, MobileNet's 14x14 projection
    {{3, 37, 7, 7}, 45, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{1, 96, 14, 14}, 40, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},
    // k x k with at most 4 input channels run direct (stems), more through the implicit im2col:
    // padding, strides, dilation, odd sizes
    {{1, 3, 11, 13}, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{1, 16, 15, 15}, 32, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false},
    {{2, 4, 17, 10}, 6, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, true},
    {{1, 5, 13, 13}, 7, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, true},
    {{1, 3, 32, 32}, 16, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, false},
    {{2, 3, 30, 31}, 16, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},  // MobileNet's stem
    {{1, 3, 23, 40}, 70, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true},  // several blocks of output channels
    {{1, 1, 9, 9}, 5, 2, 4, {1, 1}, {0, 3}, {2, 1}, 1, true},
    {{1, 4, 40, 75}, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},  // stride 2 along rows of several vectors
    {{1, 2, 9, 31}, 5, 3, 2, {1, 3}, {0, 1}, {1, 2}, 1, true},
    {{4, 9, 13}, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},  // unbatched
    {{1, 64, 20, 20}, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{1, 300, 6, 6}, 10, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, true},  // K = 2700: several slices of K
    // Winograd F(2x2, 3x3): 3x3 stride 1, >= 16 channels; odd sizes (partial tiles), padding 0..2,
    // several images, rows of several vectors of tiles, K over a slice
    {{1, 17, 21, 23}, 19, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{2, 16, 13, 40}, 24, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, false},
    {{1, 20, 16, 70}, 16, 3, 3, {1, 1}, {2, 2}, {1, 1}, 1, true},
    {{1, 600, 12, 12}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{1, 8, 40, 40}, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},  // 1600 pixels: several column blocks
    // Winograd over vectors of channels (too few tiles for vectors of tiles at every level below;
    // ResNet-18's 7x7 layer at avx512): partial tiles, channels not a multiple of any width, images
    {{1, 20, 2, 3}, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{1, 33, 3, 3}, 35, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
    {{2, 24, 5, 4}, 16, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{1, 64, 7, 7}, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    // grouped
    {{1, 8, 9, 9}, 12, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, true},
    {{2, 12, 8, 7}, 6, 1, 1, {1, 1}, {0, 0}, {1, 1}, 3, false},
    // grouped, transposed (small images, at least half a panel of channels per group)
    {{2, 24, 7, 7}, 48, 1, 1, {1, 1}, {0, 0}, {1, 1}, 2, true},
    {{1, 32, 6, 5}, 70, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true},
    // depthwise (rows of 4 vectors or more in the row kernel, narrower ones in channel blocks):
    // 3x3, 5x5, strides, dilation, multiplier, generic windows, bands
    {{2, 16, 14, 14}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 16, true},
    {{1, 24, 15, 17}, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, 24, true},
    {{1, 8, 19, 11}, 8, 5, 5, {2, 2}, {2, 2}, {1, 1}, 8, false},
    {{1, 8, 19, 23}, 8, 5, 5, {1, 1}, {4, 4}, {2, 2}, 8, true},
    {{1, 8, 12, 12}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 8, true},
    {{1, 4, 13, 37}, 4, 7, 7, {1, 1}, {3, 3}, {1, 1}, 4, true},
    {{1, 4, 9, 9}, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 4, true},
    {{1, 6, 10, 21}, 6, 3, 3, {1, 2}, {0, 1}, {1, 1}, 6, true},
    {{1, 3, 200, 203}, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 3, true},
    {{1, 2, 7, 100}, 2, 3, 5, {3, 1}, {2, 0}, {1, 3}, 2, false},
    {{1, 3, 20, 71}, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 3, true},  // stride 2, rows of several vectors
    {{1, 2, 9, 64}, 2, 3, 3, {2, 3}, {1, 0}, {1, 1}, 2, true},
    {{1, 2, 9, 9}, 2, 20, 3, {1, 1}, {6, 1}, {1, 1}, 2, true},  // taller than the direct kernel takes: GEMM
    // depthwise in channel blocks (rows under 4 vectors): channels not a multiple of any width,
    // MobileNet's 7x7 and 14x14 planes, several bands, a window wider than the input, a 1x1 plane
    {{1, 35, 7, 7}, 35, 5, 5, {1, 1}, {2, 2}, {1, 1}, 35, true},
    {{2, 19, 14, 14}, 19, 3, 3, {2, 2}, {1, 1}, {1, 1}, 19, false},
    {{1, 21, 60, 45}, 21, 3, 3, {1, 1}, {1, 1}, {1, 1}, 21, true},
    {{1, 5, 23, 29}, 5, 5, 3, {2, 1}, {1, 2}, {2, 3}, 5, true},
    {{1, 6, 3, 4}, 6, 5, 7, {1, 1}, {2, 3}, {1, 1}, 6, true},
    {{1, 17, 1, 1}, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 17, true},
};

KILN_TEST(conv2d_matches_reference) {
  for (const Conv& c : kConvs) {
    ConvTensors t(c);
    Args args;
    args.tensor(t.x).tensor(t.w);
    if (c.bias)
      args.tensor(t.b);
    else
      args.none();
    geometry_args(args, c);
    const int64_t k = c.input[c.input.size() - 3] / c.groups * c.kh * c.kw;
    const std::string what = describe_conv(c);
    const int ran = expect_tiers_match(what, "aten::conv2d.default", args, {output_numel(c)}, gemm_tolerance(k));
    KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
  }
}

// Every path of kConvs (each runs at every level) with NaN, +inf, -inf and a finite value near
// FLT_MAX in its input. The reference sums single products w * x, so an output reads +-inf where
// one infinity reaches it, NaN where a NaN or infinities of both signs do, and stays finite next
// to 3e38 (|w| < 1). Paths that transform the input first (Winograd: inf - inf, 3e38 * 9/4
// overflowing) must give the same.
KILN_TEST(conv2d_nonfinite_inputs_match_reference) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const Conv& c : kConvs) {
    ConvTensors t(c);
    const int64_t n = t.x.numel();
    t.x.f()[n / 3] = std::numeric_limits<float>::quiet_NaN();
    t.x.f()[n / 2] = kInf;
    t.x.f()[(2 * n) / 3 + 1 < n ? (2 * n) / 3 + 1 : n - 1] = -kInf;
    t.x.f()[n / 5 + 2 < n ? n / 5 + 2 : 0] = 3e38f;
    Args args;
    args.tensor(t.x).tensor(t.w);
    if (c.bias)
      args.tensor(t.b);
    else
      args.none();
    geometry_args(args, c);
    const int64_t k = c.input[c.input.size() - 3] / c.groups * c.kh * c.kw;
    const std::string what = describe_conv(c) + " with NaN, inf, -inf, 3e38";
    const int ran = expect_tiers_match(what, "aten::conv2d.default", args, {output_numel(c)}, gemm_tolerance(k));
    KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
  }
}

KILN_TEST(conv2d_fewer_images_than_prepared) {
  // Winograd (16 channels), depthwise (8 groups of 1), the implicit im2col (8 channels), direct (3).
  for (int64_t channels_groups : {16 * 100 + 1, 8 * 100 + 8, 8 * 100 + 1, 3 * 100 + 1}) {
    const int64_t channels = channels_groups / 100, groups = channels_groups % 100;
    const Conv c{{3, channels, 10, 10}, channels, 3, 3, {1, 1}, {1, 1}, {1, 1}, groups, true};
    ConvTensors t(c);
    Args args;
    args.tensor(t.x).tensor(t.w).tensor(t.b);
    geometry_args(args, c);
    const std::string what = describe_conv(c) + " run with 1 image";
    const int ran = expect_tiers_match(what, "aten::conv2d.default", args, {output_numel(c)},
                                       gemm_tolerance(channels / groups * 9), false, {{&t.x, {1, channels, 10, 10}}});
    KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
  }
}

KILN_TEST(fused_conv2d_matches_unfused_reference) {
  // act(conv2d(x) + residual) against the portable conv2d, add and activation.
  const Conv convs[] = {{{1, 6, 9, 11}, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                        {{1, 16, 15, 19}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},  // Winograd
                        {{2, 12, 8, 8}, 12, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
                        {{2, 21, 7, 7}, 19, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   // transposed
                        {{1, 3, 20, 22}, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},  // direct
                        {{2, 20, 7, 7}, 40, 1, 1, {1, 1}, {0, 0}, {1, 1}, 2, true},   // grouped, transposed
                        {{1, 16, 5, 5}, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   // Winograd, channels
                        {{1, 12, 13, 9}, 12, 5, 5, {2, 2}, {2, 2}, {1, 1}, 12, true}};
  for (const Conv& c : convs) {
    for (const char* act : kActivations) {
      for (int variant = 0; variant < 4; ++variant) {
        Conv cv = c;
        cv.bias = variant & 1;
        const bool residual = variant & 2;
        ConvTensors t(cv);
        const int64_t n = output_numel(cv);
        Args conv;
        conv.tensor(t.x).tensor(t.w);
        if (cv.bias)
          conv.tensor(t.b);
        else
          conv.none();
        geometry_args(conv, cv);
        TestTensor y = portable_output("aten::conv2d.default", conv, n);
        TestTensor r = TestTensor::random(y.shape());
        const double lo = -0.25, hi = 0.5;
        TestTensor want = reference_epilogue(y, residual ? &r : nullptr, act, lo, hi);
        Args fused;
        fused.tensor(t.x).tensor(t.w);
        if (cv.bias)
          fused.tensor(t.b);
        else
          fused.none();
        if (residual)
          fused.tensor(r);
        else
          fused.none();
        geometry_args(fused, cv);
        fused.str(act).d(lo).d(hi);
        const std::string what = describe_conv(cv) + format(" %s residual=%d", act, residual);
        const int64_t k = cv.input[1] / cv.groups * cv.kh * cv.kw;
        const int ran = expect_optimized_matches(what, "kiln::fused_conv2d.default", fused, want, gemm_tolerance(k));
        KILN_EXPECT(ran == kLevels, "%s: ran at %d levels", what.c_str(), ran);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
