// Micro-benchmark of the optimized non-GEMM kernels beside the portable ones, on the shapes the zoo
// models run (MiniLM at 128 tokens, SmolLM2 prefill and decode, the mobile CNNs):
//
//   build/dev/tests/cpp/elementwise_bench [--threads N] [filter]
//
// Built with KILN_BUILD_TESTS (target elementwise_bench). Kernels are called through the registry
// as a loaded method calls them (tests/cpp/kernels/kernel_call.h: prepare with planned scratch,
// then run). Figures are the median of several timed batches in CPU microseconds per call (process
// CPU time divided by the pool's threads): the machine is shared, and time spent waiting for a CPU
// does not count.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <vector>

#include "bench_timing.h"
#include "kernel_call.h"
#include "kiln/cpu.h"

namespace {

using namespace kiln;
using namespace kiln::test;
using namespace kiln::bench;

// A float tensor of values in [-2, 2].
TestTensor f32(std::vector<int64_t> sizes) {
  TestTensor t(std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) t.f()[i] = static_cast<float>((i * 7919) % 4001) / 1000.0f - 2.0f;
  return t;
}

// A [rows, cols] bool mask that lets row r see columns up to r + offset.
TestTensor causal_bool(int64_t rows, int64_t cols, int64_t offset) {
  TestTensor t({rows, cols}, ScalarType::Bool);
  uint8_t* p = t.t.data_as<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) p[r * cols + c] = c <= r + offset;
  return t;
}

TestTensor i64s(std::vector<int64_t> values, std::vector<int64_t> sizes) {
  TestTensor t(std::move(sizes), ScalarType::Int64);
  std::copy(values.begin(), values.end(), t.i64());
  return t;
}

// The arguments and outputs of one call.
struct Call {
  Args args;
  std::deque<TestTensor> outputs;
  void out(int64_t capacity) { outputs.push_back(TestTensor::output(capacity)); }
};

struct Case {
  const char* name;
  const char* op;
  std::function<void(Call&)> build;
};

const Case kCases[] = {
    // MiniLM, 128 tokens: [1, 128, 384] activations, [1, 12, 128, 128] attention scores.
    {"minilm add [128,384]+[384]", "aten::add.Tensor",
     [](Call& c) { c.args.tensor(f32({1, 128, 384})).tensor(f32({384})).d(1), c.out(128 * 384); }},
    {"minilm div scores / scalar", "aten::div.Tensor",
     [](Call& c) { c.args.tensor(f32({1, 12, 128, 128})).tensor(f32({})), c.out(12 * 128 * 128); }},
    {"minilm add scores + mask", "aten::add.Tensor",
     [](Call& c) { c.args.tensor(f32({1, 12, 128, 128})).tensor(f32({1, 1, 1, 128})).d(1), c.out(12 * 128 * 128); }},
    {"minilm softmax [12,128,128]", "aten::_softmax.default",
     [](Call& c) { c.args.tensor(f32({1, 12, 128, 128})).i(-1).b(false), c.out(12 * 128 * 128); }},
    {"minilm gelu [128,1536]", "aten::gelu.default",
     [](Call& c) { c.args.tensor(f32({1, 128, 1536})).str("none"), c.out(128 * 1536); }},
    {"minilm layer_norm [128,384]", "aten::layer_norm.default",
     [](Call& c) {
       c.args.tensor(f32({1, 128, 384})).ints({384}).tensor(f32({384})).tensor(f32({384})).d(1e-12).b(true);
       c.out(128 * 384);
     }},
    {"minilm log_softmax [12,128,128]", "aten::_log_softmax.default",
     [](Call& c) { c.args.tensor(f32({1, 12, 128, 128})).i(-1).b(false), c.out(12 * 128 * 128); }},
    {"vocab log_softmax [4,49152]", "aten::_log_softmax.default",
     [](Call& c) { c.args.tensor(f32({4, 49152})).i(-1).b(false), c.out(4 * 49152); }},
    {"layer_norm [37,576] no affine", "aten::layer_norm.default",
     [](Call& c) { c.args.tensor(f32({1, 37, 576})).ints({576}).none().none().d(1e-5).b(true), c.out(37 * 576); }},
    // SmolLM2 prefill (37 tokens) and decode (1 token); KV capacity 128, 9 heads of 64.
    {"smollm2 silu [37,1536]", "aten::silu.default",
     [](Call& c) { c.args.tensor(f32({1, 37, 1536})), c.out(37 * 1536); }},
    {"smollm2 mul [37,1536]", "aten::mul.Tensor",
     [](Call& c) { c.args.tensor(f32({1, 37, 1536})).tensor(f32({1, 37, 1536})), c.out(37 * 1536); }},
    {"smollm2 pow [37,576]^2", "aten::pow.Tensor_Scalar",
     [](Call& c) { c.args.tensor(f32({1, 37, 576})).d(2), c.out(37 * 576); }},
    {"smollm2 mean [37,576] dim -1", "aten::mean.dim",
     [](Call& c) { c.args.tensor(f32({1, 37, 576})).ints({-1}).b(true).none(), c.out(37); }},
    {"smollm2 rsqrt [37,1]", "aten::rsqrt.default", [](Call& c) { c.args.tensor(f32({1, 37, 1})), c.out(37); }},
    {"smollm2 mul x * r [37,576]", "aten::mul.Tensor",
     [](Call& c) { c.args.tensor(f32({1, 37, 576})).tensor(f32({1, 37, 1})), c.out(37 * 576); }},
    {"smollm2 rope mul [9,37,64]", "aten::mul.Tensor",
     [](Call& c) { c.args.tensor(f32({1, 9, 37, 64})).tensor(f32({37, 64})), c.out(9 * 37 * 64); }},
    {"smollm2 sdpa prefill 37x128", "aten::scaled_dot_product_attention.default",
     [](Call& c) {
       c.args.tensor(f32({1, 9, 37, 64})).tensor(f32({1, 9, 128, 64})).tensor(f32({1, 9, 128, 64}));
       c.args.tensor(causal_bool(37, 128, 0)).d(0).b(false).none().b(false);
       c.out(9 * 37 * 64);
     }},
    {"smollm2 sdpa decode 1x128", "aten::scaled_dot_product_attention.default",
     [](Call& c) {
       c.args.tensor(f32({1, 9, 1, 64})).tensor(f32({1, 9, 128, 64})).tensor(f32({1, 9, 128, 64}));
       c.args.tensor(causal_bool(1, 128, 37)).d(0).b(false).none().b(false);
       c.out(9 * 64);
     }},
    {"smollm2 sdpa decode GQA 1x128", "aten::scaled_dot_product_attention.default",
     [](Call& c) {
       c.args.tensor(f32({1, 9, 1, 64})).tensor(f32({1, 3, 128, 64})).tensor(f32({1, 3, 128, 64}));
       c.args.tensor(causal_bool(1, 128, 37)).d(0).b(false).none().b(true);
       c.out(9 * 64);
     }},
    {"smollm2 sdpa prefill GQA 37x128", "aten::scaled_dot_product_attention.default",
     [](Call& c) {
       c.args.tensor(f32({1, 9, 37, 64})).tensor(f32({1, 3, 128, 64})).tensor(f32({1, 3, 128, 64}));
       c.args.tensor(causal_bool(37, 128, 0)).d(0).b(false).none().b(true);
       c.out(9 * 37 * 64);
     }},
    {"smollm2 sdpa decode GQA 1x256", "aten::scaled_dot_product_attention.default",
     [](Call& c) {
       c.args.tensor(f32({1, 9, 1, 64})).tensor(f32({1, 3, 256, 64})).tensor(f32({1, 3, 256, 64}));
       c.args.tensor(causal_bool(1, 256, 200)).d(0).b(false).none().b(true);
       c.out(9 * 64);
     }},
    {"minilm sdpa 128x128 12x32", "aten::scaled_dot_product_attention.default",
     [](Call& c) {
       c.args.tensor(f32({1, 12, 128, 32})).tensor(f32({1, 12, 128, 32})).tensor(f32({1, 12, 128, 32})).none();
       c.args.d(0).b(false).none().b(false);
       c.out(12 * 128 * 32);
     }},
    {"smollm2 embedding 37 rows", "aten::embedding.default",
     [](Call& c) {
       c.args.tensor(f32({49152, 576}));
       c.args.tensor(i64s({1,  2,  3,  500, 4000, 49000, 7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                           20, 21, 22, 23,  24,   25,    26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37},
                          {1, 37}));
       c.args.i(-1).b(false).b(false);
       c.out(37 * 576);
     }},
    // CNNs at 128x128 input.
    {"cnn hardswish [16,64,64]", "aten::hardswish.default",
     [](Call& c) { c.args.tensor(f32({1, 16, 64, 64})), c.out(16 * 64 * 64); }},
    {"cnn silu [48,64,64]", "aten::silu.default",
     [](Call& c) { c.args.tensor(f32({1, 48, 64, 64})), c.out(48 * 64 * 64); }},
    {"cnn sigmoid [1,96,1,1]", "aten::sigmoid.default", [](Call& c) { c.args.tensor(f32({1, 96, 1, 1})), c.out(96); }},
    {"cnn se mul [96,16,16]*[96,1,1]", "aten::mul.Tensor",
     [](Call& c) { c.args.tensor(f32({1, 96, 16, 16})).tensor(f32({1, 96, 1, 1})), c.out(96 * 16 * 16); }},
    {"cnn global avg pool [96,16,16]", "aten::adaptive_avg_pool2d.default",
     [](Call& c) { c.args.tensor(f32({1, 96, 16, 16})).ints({1, 1}), c.out(96); }},
    {"cnn global avg pool [576,4,4]", "aten::adaptive_avg_pool2d.default",
     [](Call& c) { c.args.tensor(f32({1, 576, 4, 4})).ints({1, 1}), c.out(576); }},
    {"cnn batch_norm [48,64,64]", "aten::_native_batch_norm_legit_no_training.default",
     [](Call& c) {
       c.args.tensor(f32({1, 48, 64, 64})).tensor(f32({48})).tensor(f32({48})).tensor(f32({48})).tensor(f32({48}));
       c.args.d(0.1).d(1e-5);
       c.out(48 * 64 * 64), c.out(0), c.out(0);
     }},
    {"max_pool2d 3x3/2 [64,64,64]", "aten::max_pool2d.default",
     [](Call& c) {
       c.args.tensor(f32({1, 64, 64, 64})).ints({3, 3}).ints({2, 2}).ints({1, 1}).ints({1, 1}).b(false);
       c.out(64 * 32 * 32);
     }},
    {"avg_pool2d 2x2/2 [64,64,64]", "aten::avg_pool2d.default",
     [](Call& c) {
       c.args.tensor(f32({1, 64, 64, 64})).ints({2, 2}).ints({2, 2}).ints({0, 0}).b(false).b(true).none();
       c.out(64 * 32 * 32);
     }},
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  const char* filter = "";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else
      filter = argv[i];
  }
  set_num_threads(threads);
  const std::vector<Isa> isas = supported_isas();
  std::printf("threads=%d; CPU microseconds per call (median), portable / optimized at each level\n", threads);
  std::printf("%-34s %10s", "case", "portable");
  for (Isa isa : isas) std::printf(" %10s", isa_name(isa));
  std::printf(" %8s\n", "speedup");
  for (const Case& c : kCases) {
    if (std::strstr(c.name, filter) == nullptr) continue;
    Call call;
    c.build(call);
    std::vector<Tensor*> outputs;
    for (TestTensor& o : call.outputs) outputs.push_back(&o.t);
    std::vector<double> us;
    for (int level = -1; level < static_cast<int>(isas.size()); ++level) {
      PreparedKernel kernel(c.op, call.args, outputs, level < 0 ? kTierPortable : kTierOptimized,
                            level < 0 ? Isa::Baseline : isas[level]);
      if (!kernel.ready()) {  // none at this tier, or it declined
        us.push_back(-1);
        continue;
      }
      Status last;
      us.push_back(1e6 * time_per_call([&] { last = kernel.run(); }, threads, 0.05));
      if (!last.is_ok()) std::printf("  %s: %s\n", c.name, last.message().c_str());
    }
    std::printf("%-34s", c.name);
    for (double u : us) u < 0 ? std::printf(" %10s", "-") : std::printf(" %10.2f", u);
    const double best = us.back();
    best > 0 && us[0] > 0 ? std::printf(" %7.1fx\n", us[0] / best) : std::printf(" %8s\n", "-");
  }
  return 0;
}
