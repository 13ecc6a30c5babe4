// GEMM micro-benchmark: GFLOP/s of the optimized f32 GEMM kernels beside the portable
// ones, at 1 and 2 threads, as a share of the peak FMA rate this program measures
// itself; the decode GEMVs (one row) also as a share of the measured read bandwidth;
// and the linear under GemmPrecision::Bfloat16 (bfloat16 operands, float32 sums) with
// its speedup over the float32 linear, timed in the same run.
//
//   build/dev/tests/cpp/gemm_bench [--quick] [--cold] [--threads N] [--isa LEVEL] [filter]
//
// Built with KILN_BUILD_TESTS (target gemm_bench). Kernels are called through the
// registry the way a loaded method calls them (tests/cpp/kernels/kernel_call.h):
// prepare (weights packed once, scratch planned), then timed runs. Each figure is the median of several
// timed batches, in CPU seconds (see time_per_call): the machine is shared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench_timing.h"
#include "kernel_call.h"
#include "kiln/cpu.h"

namespace {

using namespace kiln::bench;
using namespace kiln;
using namespace kiln::test;

// ---- machine peaks, measured

#if defined(__x86_64__)
// Independent FMA chains in registers (16 zmm or 12 ymm), in assembly so that
// the compiler cannot add loads or stores; 16 * 16 or 12 * 8 FMAs per iteration.
__attribute__((target("avx512f"))) void fma_loop_avx512(int64_t iters) {
  __asm__ volatile(
      "vpxord %%zmm16, %%zmm16, %%zmm16\n"
      "vpxord %%zmm17, %%zmm17, %%zmm17\n"
      "1:\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm0\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm1\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm2\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm3\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm4\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm5\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm6\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm7\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm8\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm9\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm10\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm11\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm12\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm13\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm14\n"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm15\n"
      "dec %0\n"
      "jnz 1b\n"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc");
}
__attribute__((target("avx2,fma"))) void fma_loop_avx2(int64_t iters) {
  __asm__ volatile(
      "vxorps %%ymm12, %%ymm12, %%ymm12\n"
      "vxorps %%ymm13, %%ymm13, %%ymm13\n"
      "1:\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm1\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm3\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm5\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm7\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm9\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm11\n"
      "dec %0\n"
      "jnz 1b\n"
      : "+r"(iters)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "cc");
}
#endif

// Peak f32 FMA GFLOP/s of `threads` threads running independent FMA chains.
double measure_peak_gflops(int threads) {
#if defined(__x86_64__)
  const bool avx512 = (detected_cpu_features() & KILN_CPU_FEATURE_BIT(Avx512f)) != 0;
  const int64_t iters = 20'000'000;
  const double flops_per_iter = avx512 ? 16 * 16 * 2 : 12 * 8 * 2;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> pool;
    std::vector<double> cpu(threads);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
        if (avx512) {
          fma_loop_avx512(iters);
        } else {
          fma_loop_avx2(iters);
        }
        cpu[t] = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
      });
    }
    for (auto& t : pool) t.join();
    double rate = 0;
    for (double c : cpu) rate += iters * flops_per_iter / c * 1e-9;
    best = std::max(best, rate);
  }
  return best;
#else
  (void)threads;
  return 0;
#endif
}

// Read bandwidth (GB/s) of `threads` threads summing disjoint parts of a 512 MB
// buffer, each from four streams side by side (one core reads faster from
// several streams than from one; the GEMV reads four too).
double measure_read_gbs(int threads) {
  const size_t floats = size_t{128} << 20;
  std::unique_ptr<float[]> buf(new float[floats]);
  for (size_t i = 0; i < floats; ++i) buf[i] = 1.0f;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> pool;
    std::vector<double> cpu(threads);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
        const size_t part = floats / threads, quarter = part / 4;
        const float* p = buf.get() + t * part;
        float s[16] = {};
        for (size_t i = 0; i < quarter; i += 4)
          for (int j = 0; j < 16; ++j) s[j] += p[j / 4 * quarter + i + j % 4];
        volatile float sink = s[0] + s[7] + s[15];
        (void)sink;
        cpu[t] = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
      });
    }
    for (auto& t : pool) t.join();
    double rate = 0;
    for (double c : cpu) rate += floats * 4.0 / threads / c * 1e-9;
    best = std::max(best, rate);
  }
  return best;
}

// ---- kernels through the registry (tests/cpp/kernels/kernel_call.h)

// Values in [-0.5, 0.5); a weight is `constant`, as in a program.
TestTensor filled(std::vector<int64_t> sizes, bool constant) {
  TestTensor t(std::move(sizes), ScalarType::Float32, -1, constant);
  for (int64_t i = 0; i < t.numel(); ++i) t.f()[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  return t;
}

// Prepares `op` on `args` into `out`; null (and says why) when the kernel is missing or declines.
std::unique_ptr<PreparedKernel> prepare(const char* op, const Args& args, TestTensor& out, int32_t tier, Isa isa) {
  auto kernel = std::make_unique<PreparedKernel>(op, args, std::vector<Tensor*>{&out.t}, tier, isa);
  if (kernel->ready()) return kernel;
  std::fprintf(stderr, "%s: prepare: %s\n", op,
               kernel->found() ? kernel->prepare_status().to_string().c_str() : "no kernel at this tier");
  return nullptr;
}

void run(PreparedKernel& kernel) {
  const Status st = kernel.run();
  if (!st.is_ok()) {
    std::fprintf(stderr, "run: %s\n", st.to_string().c_str());
    std::exit(1);
  }
}

struct Shape {
  const char* name;
  int64_t m, n, k;
};

// Seconds per call of y = x @ W^T (linear with a constant weight: packed at prepare),
// or of y = x @ B (mm with a non-constant B: packed per block at run) when `mm`.
// A GEMV or a product of a few rows (up to 16), and with `cold` every product,
// cycles through copies of its weight totalling at least 256 MB, so that, as in
// a model (where each weight is read once per call), the weights come from
// memory, not from L3.
double time_gemm(const Shape& s, bool mm, int32_t tier, Isa isa, int threads, double batch_s, bool cold) {
  const int64_t weight_bytes = 4 * s.n * s.k;
  const int copies =
      s.m <= 16 || cold ? static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / weight_bytes)) : 1;
  TestTensor x = filled({s.m, s.k}, false), y({s.m, s.n});
  struct Copy {
    TestTensor weight;
    Args args;
    std::unique_ptr<PreparedKernel> kernel;
  };
  std::deque<Copy> calls;  // a deque: the kernels keep pointers to their arguments
  for (int c = 0; c < copies; ++c) {
    Copy& call = calls.emplace_back();
    call.weight = filled(mm ? std::vector<int64_t>{s.k, s.n} : std::vector<int64_t>{s.n, s.k}, !mm);
    call.args.tensor(x).tensor(call.weight);
    if (!mm) call.args.none();  // no bias
    call.kernel = prepare(mm ? "aten::mm.default" : "aten::linear.default", call.args, y, tier, isa);
    if (call.kernel == nullptr) return 0;
  }
  size_t next = 0;
  return time_per_call([&] { run(*calls[next++ % calls.size()].kernel); }, threads, batch_s, 5);
}

struct ConvShape {
  const char* name;
  int64_t c, h, w, cout, k, stride, pad, groups;
};

// Seconds per call of a conv2d with constant weights and a bias.
double time_conv(const ConvShape& s, int32_t tier, Isa isa, int threads, double batch_s) {
  const int64_t oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
  TestTensor y({1, s.cout, oh, ow});
  Args args;
  args.tensor(filled({1, s.c, s.h, s.w}, false)).tensor(filled({s.cout, s.c / s.groups, s.k, s.k}, true));
  args.tensor(filled({s.cout}, true)).ints({s.stride, s.stride}).ints({s.pad, s.pad}).ints({1, 1}).i(s.groups);
  std::unique_ptr<PreparedKernel> kernel = prepare("aten::conv2d.default", args, y, tier, isa);
  if (kernel == nullptr) return 0;
  return time_per_call([&] { run(*kernel); }, threads, batch_s, 5);
}

// Convolutions of a ResNet-18 at 224 x 224 and of MobileNetV3-small's depthwise layers.
const ConvShape kConvShapes[] = {
    {"r18 conv1 7x7/2", 3, 224, 224, 64, 7, 2, 3, 1},   {"r18 l1 3x3", 64, 56, 56, 64, 3, 1, 1, 1},
    {"r18 l2 3x3/2", 64, 56, 56, 128, 3, 2, 1, 1},      {"r18 l2 3x3", 128, 28, 28, 128, 3, 1, 1, 1},
    {"r18 l2 down 1x1/2", 64, 56, 56, 128, 1, 2, 0, 1}, {"r18 l3 3x3", 256, 14, 14, 256, 3, 1, 1, 1},
    {"r18 l4 3x3", 512, 7, 7, 512, 3, 1, 1, 1},         {"mnv3 1x1 96->576", 96, 7, 7, 576, 1, 1, 0, 1},
    {"mnv3 1x1 16->72", 16, 56, 56, 72, 1, 1, 0, 1},    {"dw 3x3 16ch 112", 16, 112, 112, 16, 3, 2, 1, 16},
    {"dw 5x5 96ch 14", 96, 14, 14, 96, 5, 1, 2, 96},    {"dw 3x3 72ch 56", 72, 56, 56, 72, 3, 1, 1, 72},
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, cold = false;
  std::vector<int> thread_counts{1, 2};
  Isa isa = detected_isa();
  const char* filter = "";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--cold") == 0) {
      cold = true;
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      thread_counts = {std::atoi(argv[++i])};
    } else if (std::strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      if (!parse_isa(argv[++i], &isa)) return 2;
    } else {
      filter = argv[i];
    }
  }
  const double batch_s = quick ? 0.02 : 0.1;
  std::vector<Shape> shapes;
  static const char* square_names[] = {"square 64",  "square 128",  "square 256",
                                       "square 512", "square 1024", "square 2048"};
  int si = 0;
  for (int64_t n : {64, 128, 256, 512, 1024, 2048}) shapes.push_back({square_names[si++], n, n, n});
  const Shape named[] = {
      {"MiniLM qkv/o", 128, 384, 384},     {"MiniLM ffn up", 128, 1536, 384}, {"MiniLM ffn down", 128, 384, 1536},
      {"SmolLM2 attn", 64, 576, 576},      {"SmolLM2 mlp up", 64, 1536, 576}, {"SmolLM2 mlp down", 64, 576, 1536},
      {"SmolLM2 lm head", 64, 49152, 576}, {"decode up", 1, 1536, 576},       {"decode down", 1, 576, 1536},
      {"decode lm head", 1, 49152, 576},   {"small M 2", 2, 1536, 576},       {"small M 4", 4, 1536, 576},
      {"small M 8", 8, 1536, 576},         {"small M 16", 16, 1536, 576},     {"r18 l3 as C^T", 196, 256, 2304},
      {"r18 l4 as C^T", 49, 512, 4608}};
  shapes.insert(shapes.end(), std::begin(named), std::end(named));

  std::printf("optimized kernels at level %s\n", isa_name(isa));
  for (int threads : thread_counts) {
    set_num_threads(threads);
    const double peak = measure_peak_gflops(threads), bw = measure_read_gbs(threads);
    std::printf("\n%d thread(s): measured peak %.1f GFLOP/s (FMA), read bandwidth %.1f GB/s\n", threads, peak, bw);
    std::printf("%-18s %5s %6s %5s | %10s %6s | %10s %6s | %10s | %9s %6s | %s\n", "shape", "M", "N", "K",
                "linear GF/s", "%peak", "mm GF/s", "%peak", "portable", "bf16 GF/s", "x f32",
                "M <= 16: weights GB/s, %bw");
    for (const Shape& s : shapes) {
      if (std::strstr(s.name, filter) == nullptr) continue;
      const double flops = 2.0 * s.m * s.n * s.k;
      const double lin = time_gemm(s, false, kTierOptimized, isa, threads, batch_s, cold);
      double bf16 = 0;
      {
        ScopedGemmPrecision precision(GemmPrecision::Bfloat16);
        bf16 = time_gemm(s, false, kTierOptimized, isa, threads, batch_s, cold);
      }
      const double mm = s.m > 1 ? time_gemm(s, true, kTierOptimized, isa, threads, batch_s, cold) : 0;
      const double port = time_gemm(s, false, kTierPortable, Isa::Baseline, threads, batch_s, cold);
      const double lin_gf = lin > 0 ? flops / lin * 1e-9 : 0, mm_gf = mm > 0 ? flops / mm * 1e-9 : 0;
      std::printf("%-18s %5lld %6lld %5lld | %10.1f %5.0f%% | %10.1f %5.0f%% | %10.1f | %9.1f %5.2fx |", s.name,
                  (long long)s.m, (long long)s.n, (long long)s.k, lin_gf, 100 * lin_gf / peak, mm_gf,
                  100 * mm_gf / peak, port > 0 ? flops / port * 1e-9 : 0, bf16 > 0 ? flops / bf16 * 1e-9 : 0,
                  bf16 > 0 ? lin / bf16 : 0);
      if (s.m <= 16) {
        const double gbs = 4.0 * s.n * s.k / lin * 1e-9;
        std::printf(" %.1f GB/s %.0f%%", gbs, 100 * gbs / bw);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    std::printf("%-18s %5s %5s %5s %5s | %10s %6s | %10s\n", "conv", "C", "HxW", "Cout", "k/s", "GF/s", "%peak",
                "portable");
    for (const ConvShape& s : kConvShapes) {
      if (std::strstr(s.name, filter) == nullptr) continue;
      const int64_t oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
      const double flops = 2.0 * s.cout * oh * ow * (s.c / s.groups) * s.k * s.k;
      const double opt = time_conv(s, kTierOptimized, isa, threads, batch_s);
      const double port = time_conv(s, kTierPortable, Isa::Baseline, threads, batch_s);
      const double gf = opt > 0 ? flops / opt * 1e-9 : 0;
      std::printf("%-18s %5lld %5lld %5lld %3lld/%lld | %10.1f %5.0f%% | %10.1f\n", s.name, (long long)s.c,
                  (long long)s.h, (long long)s.cout, (long long)s.k, (long long)s.stride, gf, 100 * gf / peak,
                  port > 0 ? flops / port * 1e-9 : 0);
      std::fflush(stdout);
    }
  }
  return 0;
}
