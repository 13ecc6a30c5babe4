// shared_method PROGRAM.kiln [ROUNDS]: one loaded Method shared by several
// threads (program.h, Threads). Each thread takes the Method's turn
// (std::lock_guard<kiln::Method>) around its own call with its own inputs (its
// own sizes when the method has dynamic dimensions) and checks that the outputs
// it reads equal the ones its inputs gave alone. Meanwhile one thread calls
// execute() without the turn (it must run or be refused with Error::Busy,
// nothing else) and one calls reset_state(). Built with ThreadSanitizer by
// tests/test_sanitizers.py.
#include <kiln/kiln.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;

struct Inputs {
  std::vector<std::vector<float>> data;
  std::vector<kiln::Tensor> tensors;
};

// Float inputs for caller `t`: values and, for dynamic dimensions, sizes of its own.
bool make_inputs(const kiln::MethodSpec& spec, int t, Inputs* out) {
  for (const kiln::TensorSpec& s : spec.inputs) {
    if (s.dtype != kiln::ScalarType::Float32) return false;
  }
  out->data.resize(spec.inputs.size());
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const kiln::TensorSpec& s = spec.inputs[i];
    std::vector<int64_t> sizes = s.sizes;
    for (int d : s.dynamic_dims) {
      const int64_t span = s.sizes[d] - s.min_sizes[d] + 1;
      sizes[d] = s.sizes[d] - (t * 7) % span;
    }
    size_t n = 1;
    for (int64_t d : sizes) n *= static_cast<size_t>(d);
    out->data[i].resize(n);
    for (size_t k = 0; k < n; ++k) {
      out->data[i][k] = static_cast<float>(((k + 31 * t) * 7919) % 1000) / 500.0f - 1.0f;
    }
    out->tensors.push_back(kiln::Tensor::view(out->data[i].data(), sizes));
  }
  return true;
}

// Sizes and bytes of every output: what a caller must get back for its inputs.
std::vector<std::vector<unsigned char>> snapshot(const std::vector<kiln::Tensor>& outputs) {
  std::vector<std::vector<unsigned char>> out;
  for (const kiln::Tensor& t : outputs) {
    const auto* sizes = reinterpret_cast<const unsigned char*>(t.sizes().data());
    std::vector<unsigned char> bytes(sizes, sizes + t.sizes().size() * sizeof(int64_t));
    const auto* p = static_cast<const unsigned char*>(t.data());
    bytes.insert(bytes.end(), p, p + t.nbytes());
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: shared_method PROGRAM.kiln [ROUNDS]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 20;
  kiln::Result<kiln::Program> program = kiln::Program::load(argv[1]);
  if (!program.ok()) {
    std::fprintf(stderr, "%s\n", program.status().to_string().c_str());
    return 1;
  }
  const std::string name = program->method_names().at(0);
  kiln::Result<kiln::Method> shared = program->load_method(name);
  kiln::Result<kiln::Method> alone = program->load_method(name);
  if (!shared.ok() || !alone.ok()) {
    std::fprintf(stderr, "cannot load method '%s'\n", name.c_str());
    return 1;
  }
  std::vector<Inputs> inputs(kThreads);
  std::vector<std::vector<std::vector<unsigned char>>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    if (!make_inputs(alone->spec(), t, &inputs[t])) {
      std::fprintf(stderr, "method '%s' has non-float inputs\n", name.c_str());
      return 1;
    }
    auto want = alone->run(inputs[t].tensors);
    if (!want.ok()) {
      std::fprintf(stderr, "%s\n", want.status().to_string().c_str());
      return 1;
    }
    expected[t] = snapshot(want.value());
  }

  kiln::Method& method = shared.value();
  std::atomic<int> mismatches{0}, errors{0}, unlocked_runs{0}, refused{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        std::lock_guard<kiln::Method> turn(method);
        auto got = method.run(inputs[t].tensors);
        if (!got.ok()) {
          std::fprintf(stderr, "thread %d: %s\n", t, got.status().to_string().c_str());
          ++errors;
        } else if (snapshot(got.value()) != expected[t]) {
          ++mismatches;
        }
      }
    });
  }
  // Calls without the turn: run (on whatever inputs are bound) or refused, nothing else.
  std::thread unlocked([&] {
    while (!done.load()) {
      kiln::Status st = method.execute();
      if (st.is_ok()) {
        ++unlocked_runs;
      } else if (st.code() == kiln::Error::Busy && st.message().find("in use by another thread") != std::string::npos) {
        ++refused;
      } else if (st.code() != kiln::Error::InvalidInput) {  // nothing bound yet
        std::fprintf(stderr, "unlocked execute: %s\n", st.to_string().c_str());
        ++errors;
      }
      std::this_thread::yield();
    }
  });
  std::thread resetter([&] {
    while (!done.load()) {
      method.reset_state();
      std::this_thread::yield();
    }
  });
  for (auto& t : threads) t.join();
  done.store(true);
  unlocked.join();
  resetter.join();
  std::printf("%d threads x %d rounds on one method: %d mismatches, %d errors (unlocked execute: %d ran, %d refused)\n",
              kThreads, rounds, mismatches.load(), errors.load(), unlocked_runs.load(), refused.load());
  return mismatches.load() == 0 && errors.load() == 0 ? 0 : 1;
}
