// kiln_quantized::linear micro-benchmark: decode steps (1 row) in GB/s of quantized weights read, and
// prefill chunks (64 rows) in GFLOP/s, beside the f32 linear on the same shapes, at 1 and 2 threads;
// the split formats (q4_0, q4_1, q8_0) and GGUF's block formats (q5_0, q5_1, and q4_k, q5_k, q6_k
// where K is a multiple of 256). Weights are zeros: the timing does not depend on their values.
// With --small-m: the decode step of a batch of M = 1, 2, 4, 8, 16 sequences (M rows), its time and
// time(M) / time(1), for SmolLM2-135M's shapes in q4_0, q8_0 and f32, and compute="int8" in q4_0, q5_0,
// q4_k and q6_k (the K-quants where K is a multiple of 256).
// Every integer format also runs with compute="int8" (the last two columns: decode, prefill64).
//
// With --int8: compute="int8" (q8_0 per channel and q4_0, 128 rows) and compute="int8_row" (q8_0 per
// channel: "q8_0 r") beside the f32 linear at every level from avx2 up, for MiniLM-L6's and SmolLM2-135M's shapes.
//
//   build/dev/tests/cpp/quantized_bench [--threads N] [--isa LEVEL] [--small-m | --int8] [filter]
//
// Built with KILN_BUILD_TESTS (target quantized_bench). Kernels are called through the registry the
// way a loaded method calls them (prepare: weights repacked once; then timed runs). Figures are
// medians of timed batches in CPU seconds per thread, since the machine is shared; decode steps cycle
// through copies of the weight totalling at least 256 MB so that the weights come from memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "executor/packed_constants.h"
#include "kiln/cpu.h"
#include "kiln/kernel.h"
#include "registry/registry_internal.h"

namespace {

using namespace kiln;
using namespace kiln::bench;

struct Buffer {
  std::shared_ptr<uint8_t> bytes;
  Tensor t;
  Buffer(std::vector<int64_t> sizes, ScalarType dtype, bool constant) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    const size_t size = (static_cast<size_t>(std::max<int64_t>(n, 1)) * element_size(dtype) + 63) / 64 * 64;
    bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, size)), [](uint8_t* p) { std::free(p); });
    for (size_t i = 0; i < size; ++i) bytes.get()[i] = static_cast<uint8_t>(i * 7919 % 251);
    if (dtype == ScalarType::Float32) {
      auto* f = reinterpret_cast<float*>(bytes.get());
      for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
    } else if (dtype == ScalarType::Float16) {
      auto* h = reinterpret_cast<uint16_t*>(bytes.get());
      for (int64_t i = 0; i < n; ++i) h[i] = static_cast<uint16_t>(0x2000 + i % 512);  // small normal values
    }
    t.reset(bytes.get(), Span<const int64_t>(sizes.data(), sizes.size()), dtype, size);
    t.set_constant(constant);
  }
};

Value tensor(Buffer& b) {
  Value v;
  v.kind = ValueKind::Tensor;
  v.tensor = &b.t;
  return v;
}
Value none() { return Value(); }
Value integer(int64_t i) {
  Value v;
  v.kind = ValueKind::Int;
  v.i = i;
  return v;
}
Value string(const char* s) {
  Value v;
  v.kind = ValueKind::String;
  v.str = {s, std::strlen(s)};
  return v;
}

// A kernel prepared once at one tier and level, run many times.
class Prepared {
 public:
  Prepared(const char* op, std::vector<Value> args, Tensor* out, int32_t tier, Isa isa) : args_(std::move(args)) {
    std::vector<ScalarType> dtypes;
    for (const Value& v : args_) {
      ptrs_.push_back(&v);
      if (v.is_tensor()) dtypes.push_back(v.tensor->dtype());
    }
    outs_.push_back(out);
    for (const internal::KernelEntry* k : internal::find_kernels(op, dtypes))
      if (k->tier == tier && kernel_ == nullptr) kernel_ = k;
    if (kernel_ == nullptr) return;
    services_.cache = &cache_;
    services_.memory_limit = uint64_t{1} << 40;
    ctx_.op_name = op;
    ctx_.isa = isa;
    ctx_.services = &services_;
    if (kernel_->prepare != nullptr) {
      Status st = kernel_->prepare(ctx_, {ptrs_.data(), ptrs_.size()}, {outs_.data(), outs_.size()}, &state_);
      if (!st.is_ok()) {
        std::fprintf(stderr, "%s: prepare: %s\n", op, st.to_string().c_str());
        kernel_ = nullptr;
        return;
      }
    }
    ctx_.services = nullptr;
    ctx_.state = state_;
    const size_t call = (ctx_.scratch_bytes + 63) / 64 * 64, worker = (ctx_.worker_scratch_bytes + 63) / 64 * 64;
    scratch_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, call + worker * 8 + 64)),
                   [](uint8_t* p) { std::free(p); });
    ctx_.scratch = scratch_.get();
    ctx_.worker_scratch_base = scratch_.get() + call;
    ctx_.worker_scratch_stride = worker;
  }
  ~Prepared() {
    if (kernel_ != nullptr && kernel_->release != nullptr && state_ != nullptr) kernel_->release(state_);
  }
  bool ok() const { return kernel_ != nullptr; }
  void run() {
    Status st = kernel_->run(ctx_, {ptrs_.data(), ptrs_.size()}, {outs_.data(), outs_.size()});
    if (!st.is_ok()) {
      std::fprintf(stderr, "run: %s\n", st.to_string().c_str());
      std::exit(1);
    }
  }

 private:
  std::vector<Value> args_;
  std::vector<const Value*> ptrs_;
  std::vector<Tensor*> outs_;
  const internal::KernelEntry* kernel_ = nullptr;
  internal::PackedConstantCache cache_;
  internal::KernelServices services_;
  KernelContext ctx_;
  void* state_ = nullptr;
  std::shared_ptr<uint8_t> scratch_;
};

struct Weight {
  std::unique_ptr<Buffer> q, scales, mins;
  size_t bytes = 0;
};

// A quantized (or, for "f32", a float) weight [n, k] and the kernel of y = x @ W^T on it.
std::unique_ptr<Prepared> make(const std::string& scheme, int64_t group, int64_t n, int64_t k, Buffer& x, Buffer& y,
                               Weight& w, int32_t tier, Isa isa, const char* compute) {
  if (scheme == "f32") {
    w.q = std::make_unique<Buffer>(std::vector<int64_t>{n, k}, ScalarType::Float32, true);
    w.bytes = static_cast<size_t>(n * k * 4);
    return std::make_unique<Prepared>("aten::linear.default", std::vector<Value>{tensor(x), tensor(*w.q), none()}, &y.t,
                                      tier, isa);
  }
  // The block formats (GGUF's blocks kept whole): (elements, bytes) per block, scales inside.
  const struct {
    const char* name;
    int64_t elements, bytes;
  } blocks[] = {{"q5_0", 32, 22}, {"q5_1", 32, 24}, {"q4_k", 256, 144}, {"q5_k", 256, 176}, {"q6_k", 256, 210}};
  for (const auto& b : blocks) {
    if (scheme != b.name) continue;
    w.q = std::make_unique<Buffer>(std::vector<int64_t>{n, k / b.elements * b.bytes}, ScalarType::UInt8, true);
    w.bytes = static_cast<size_t>(n * (k / b.elements) * b.bytes);
    return std::make_unique<Prepared>("kiln_quantized::linear.default",
                                      std::vector<Value>{tensor(x), tensor(*w.q), none(), none(), none(),
                                                         string(b.name), integer(b.elements), string(compute)},
                                      &y.t, tier, isa);
  }
  const bool four = scheme != "q8_0";
  w.q = std::make_unique<Buffer>(std::vector<int64_t>{n, four ? k / 2 : k}, four ? ScalarType::UInt8 : ScalarType::Int8,
                                 true);
  w.scales = std::make_unique<Buffer>(std::vector<int64_t>{n, k / group}, ScalarType::Float16, true);
  w.bytes = static_cast<size_t>(n * (four ? k / 2 : k) + n * (k / group) * 2);
  Value mins = none();
  if (scheme == "q4_1") {
    w.mins = std::make_unique<Buffer>(std::vector<int64_t>{n, k / group}, ScalarType::Float16, true);
    w.bytes += static_cast<size_t>(n * (k / group) * 2);
    mins = tensor(*w.mins);
  }
  return std::make_unique<Prepared>("kiln_quantized::linear.default",
                                    std::vector<Value>{tensor(x), tensor(*w.q), tensor(*w.scales), mins, none(),
                                                       string(scheme.c_str()), integer(group), string(compute)},
                                    &y.t, tier, isa);
}

// (seconds per call, weight bytes) of m rows against an [n, k] weight.
std::pair<double, size_t> time_linear(const std::string& scheme, int64_t group, int64_t m, int64_t n, int64_t k,
                                      int32_t tier, Isa isa, int threads, double batch_s = 0.3,
                                      const char* compute = "float32") {
  Buffer x({m, k}, ScalarType::Float32, false), y({m, n}, ScalarType::Float32, false);
  Weight probe;
  std::vector<std::unique_ptr<Weight>> weights;
  std::vector<std::unique_ptr<Prepared>> kernels;
  size_t bytes = 0;
  do {  // decode steps: copies totalling >= 256 MB, so that the weights come from memory
    weights.push_back(std::make_unique<Weight>());
    kernels.push_back(make(scheme, group, n, k, x, y, *weights.back(), tier, isa, compute));
    if (!kernels.back()->ok()) return {0, 0};
    bytes += weights.back()->bytes;
  } while (m <= 16 && bytes < (size_t{256} << 20));
  size_t next = 0;
  return {time_per_call([&] { kernels[next++ % kernels.size()]->run(); }, threads, batch_s), weights[0]->bytes};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  Isa isa = detected_isa();
  std::string filter;
  bool small_m = false, int8 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--small-m") {
      small_m = true;
    } else if (a == "--int8") {
      int8 = true;
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--isa" && i + 1 < argc) {
      if (!parse_isa(argv[++i], &isa) || !isa_supported(isa)) {
        std::fprintf(stderr, "--isa %s: not a level this CPU runs\n", argv[i]);
        return 2;
      }
    } else {
      filter = a;
    }
  }
  set_num_threads(threads);
  std::printf("kiln_quantized::linear, isa %s, %d thread(s); CPU time per thread, median of 5 batches\n", isa_name(isa),
              threads);
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  // SmolLM2-135M's linear layers and its tied output projection.
  const Shape shapes[] = {{"q/o 576x576", 576, 576},
                          {"k/v 192x576", 192, 576},
                          {"gate/up 1536x576", 1536, 576},
                          {"down 576x1536", 576, 1536},
                          {"lm head 49152x576", 49152, 576}};
  if (int8) {
    // compute="int8" against the f32 linear, at every level from avx2 up that this CPU runs (--isa
    // is ignored): prefill chunks of MiniLM-L6's and SmolLM2-135M's linears, 128 rows.
    const Shape int8_shapes[] = {{"minilm qkvo 384x384", 384, 384},
                                 {"minilm up 1536x384", 1536, 384},
                                 {"minilm down 384x1536", 384, 1536},
                                 {"smol gate/up 1536x576", 1536, 576},
                                 {"smol down 576x1536", 576, 1536}};
    std::printf("%-22s %-6s %-12s %12s %12s %12s\n", "shape (M=128)", "scheme", "level", "int8 us", "f32 us",
                "int8 / f32");
    // {scheme, label, compute}: q8_0 per channel with x per 32-block and per row (int8_dynamic's), q4_0.
    struct Int8Row {
      const char *scheme, *label, *compute;
    };
    const Int8Row int8_rows[] = {{"q8_0", "q8_0", "int8"}, {"q8_0", "q8_0 r", "int8_row"}, {"q4_0", "q4_0", "int8"}};
    for (const Shape& s : int8_shapes) {
      for (const Int8Row& row : int8_rows) {
        const std::string label = std::string(s.name) + " " + row.label;
        if (!filter.empty() && label.find(filter) == std::string::npos) continue;
        for (Isa level : supported_isas()) {
          if (level == Isa::Baseline) continue;
          const int64_t group = std::string(row.scheme) == "q8_0" ? s.k : 32;  // q8_0 per channel
          const double q =
              time_linear(row.scheme, group, 128, s.n, s.k, kTierOptimized, level, threads, 0.2, row.compute).first;
          const double f = time_linear("f32", 0, 128, s.n, s.k, kTierOptimized, level, threads, 0.2).first;
          std::printf("%-22s %-6s %-12s %12.1f %12.1f %12.2f\n", s.name, row.label, isa_name(level), q * 1e6, f * 1e6,
                      q / f);
          std::fflush(stdout);
        }
      }
    }
    return 0;
  }
  if (small_m) {
    // A batched decode step: M rows against weights from memory (copies of at least 256 MB).
    const int64_t ms[] = {1, 2, 4, 8, 16};
    std::printf("%-20s %-8s", "shape", "scheme");
    for (int64_t m : ms) std::printf("   M=%-2lld us (x1)", static_cast<long long>(m));
    std::printf("\n");
    for (const Shape& s : shapes) {
      if (s.n == 192) continue;
      // {scheme, label, group, compute}: the int8 rows show how each level's int8 tile scales with M.
      const struct {
        const char *scheme, *label;
        int64_t group;
        const char* compute;
      } rows[] = {{"q4_0", "q4_0", 32, "float32"}, {"q8_0", "q8_0", 32, "float32"},  {"f32", "f32", 32, "float32"},
                  {"q8_0", "q8_0 i8", 32, "int8"}, {"q4_0", "q4_0 i8", 32, "int8"},  {"q4_1", "q4_1 i8", 32, "int8"},
                  {"q5_0", "q5_0 i8", 32, "int8"}, {"q4_k", "q4_k i8", 256, "int8"}, {"q5_k", "q5_k i8", 256, "int8"},
                  {"q6_k", "q6_k i8", 256, "int8"}};
      for (const auto& row : rows) {
        if (s.k % row.group != 0) continue;
        const std::string label = std::string(s.name) + " " + row.label;
        if (!filter.empty() && label.find(filter) == std::string::npos) continue;
        std::printf("%-20s %-8s", s.name, row.label);
        double one = 0;
        for (int64_t m : ms) {
          const double t =
              time_linear(row.scheme, row.group, m, s.n, s.k, kTierOptimized, isa, threads, 0.1, row.compute).first;
          if (m == 1) one = t;
          std::printf(" %9.1f (%4.2f)", t * 1e6, t / one);
          std::fflush(stdout);
        }
        std::printf("\n");
      }
    }
    return 0;
  }
  const char* schemes[][2] = {{"q4_1", "32"}, {"q4_0", "32"},  {"q8_0", "32"},  {"q4_1", "128"}, {"q5_0", "32"},
                              {"q5_1", "32"}, {"q4_k", "256"}, {"q5_k", "256"}, {"q6_k", "256"}, {"f32", "0"}};
  std::printf("%-20s %-8s %12s %10s %14s %14s %12s %14s\n", "shape", "scheme", "decode us", "GB/s", "prefill64 us",
              "GFLOP/s", "i8 decode us", "i8 prefill64 us");
  for (const Shape& s : shapes) {
    for (auto& sc : schemes) {
      const std::string label = std::string(s.name) + " " + sc[0] + "/" + sc[1];
      if (!filter.empty() && label.find(filter) == std::string::npos) continue;
      const int64_t group = std::atoi(sc[1]);
      if (group > 0 && s.k % group != 0) continue;  // the K-quants' rows are multiples of 256
      const auto [decode, bytes] = time_linear(sc[0], group, 1, s.n, s.k, kTierOptimized, isa, threads);
      const auto [prefill, unused] = time_linear(sc[0], group, 64, s.n, s.k, kTierOptimized, isa, threads);
      (void)unused;
      // compute="int8" (x quantized per 32-block): every integer format.
      double i8_decode = 0, i8_prefill = 0;
      if (std::string(sc[0]) != "f32") {
        i8_decode = time_linear(sc[0], group, 1, s.n, s.k, kTierOptimized, isa, threads, 0.3, "int8").first;
        i8_prefill = time_linear(sc[0], group, 64, s.n, s.k, kTierOptimized, isa, threads, 0.3, "int8").first;
      }
      std::printf("%-20s %-8s %12.1f %10.1f %14.1f %14.1f %12.1f %14.1f\n", s.name,
                  (std::string(sc[0]) + "/" + sc[1]).c_str(), decode * 1e6, static_cast<double>(bytes) / decode * 1e-9,
                  prefill * 1e6, 2.0 * 64 * static_cast<double>(s.n * s.k) / prefill * 1e-9, i8_decode * 1e6,
                  i8_prefill * 1e6);
      std::fflush(stdout);
    }
  }
  return 0;
}
