// concurrent_methods PROGRAM.kiln [ROUNDS]: runs every method of a program on
// several threads at once, each thread with its own loaded Method of a shared
// Program (so they share the packed-weight cache and the thread pool), while
// another thread resizes the pool; every result must equal the one computed
// alone first. Built with ThreadSanitizer by tests/test_sanitizers.py.
#include <kiln/kiln.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Inputs {
  std::vector<std::vector<float>> data;
  std::vector<kiln::Tensor> tensors;
};

// Deterministic float inputs at each input's largest shape (float inputs only).
bool make_inputs(const kiln::MethodSpec& spec, Inputs* out) {
  for (const kiln::TensorSpec& s : spec.inputs) {
    if (s.dtype != kiln::ScalarType::Float32) return false;
    size_t n = 1;
    for (int64_t d : s.sizes) n *= static_cast<size_t>(d);
    out->data.emplace_back(n);
    for (size_t i = 0; i < n; ++i) out->data.back()[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    out->tensors.push_back(kiln::Tensor::view(out->data[i].data(), spec.inputs[i].sizes));
  }
  return true;
}

std::vector<std::vector<unsigned char>> snapshot(const std::vector<kiln::Tensor>& outputs) {
  std::vector<std::vector<unsigned char>> bytes;
  for (const kiln::Tensor& t : outputs) {
    const auto* p = static_cast<const unsigned char*>(t.data());
    bytes.emplace_back(p, p + t.nbytes());
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: concurrent_methods PROGRAM.kiln [ROUNDS]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 20;
  constexpr int kThreads = 3;
  kiln::Result<kiln::Program> program = kiln::Program::load(argv[1]);
  if (!program.ok()) {
    std::fprintf(stderr, "%s\n", program.status().to_string().c_str());
    return 1;
  }
  const std::string name = program->method_names().at(0);
  kiln::Result<kiln::Method> first = program->load_method(name);
  Inputs inputs;
  if (!first.ok() || !make_inputs(first->spec(), &inputs)) {
    std::fprintf(stderr, "cannot prepare method '%s'\n", name.c_str());
    return 1;
  }
  auto want = first->run(inputs.tensors);
  if (!want.ok()) {
    std::fprintf(stderr, "%s\n", want.status().to_string().c_str());
    return 1;
  }
  const auto expected = snapshot(want.value());

  std::atomic<int> mismatches{0}, errors{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      kiln::Result<kiln::Method> method = program->load_method(name);
      if (!method.ok()) {
        ++errors;
        return;
      }
      for (int r = 0; r < rounds; ++r) {
        auto got = method->run(inputs.tensors);
        if (!got.ok()) {
          ++errors;
          continue;
        }
        if (snapshot(got.value()) != expected) ++mismatches;
      }
    });
  }
  std::thread resizer([&] {
    for (int i = 0; !done.load(); ++i) {
      kiln::set_num_threads(1 + i % 3);
      std::this_thread::yield();
    }
  });
  for (auto& t : threads) t.join();
  done.store(true);
  resizer.join();
  std::printf("%d threads x %d rounds: %d mismatches, %d errors\n", kThreads, rounds, mismatches.load(), errors.load());
  return mismatches.load() == 0 && errors.load() == 0 ? 0 : 1;
}
