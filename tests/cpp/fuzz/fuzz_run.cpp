// fuzz_run: libFuzzer target for running methods on fuzzed inputs.
//
// An input is  [program file][input bytes][u32 size of the program file]
// (little-endian); without a valid trailing size the whole input is the
// program and the inputs are zeros. The input bytes give, in order: the method
// (one byte, modulo the method count), flags (one byte: bit 0 runs twice so
// state carries over, bit 1 makes one dimension one too large), then for each
// input its dynamic dimensions (two bytes each, a size within the bounds) and
// its elements (float: 4 raw bytes, so NaN and infinities occur; integers: 2
// bytes as a signed int16, so indices land both inside and outside their range;
// bool: 1 byte & 1), zeros once the bytes run out.
//
// The custom mutator mutates the input bytes 31 times in 32 and the program
// otherwise (fuzz_load and fuzz_method search the loader); loaded programs and
// their methods are kept (the last 256, by content) and state is reset before
// each run, so most executions are runs, not loads.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fuzz_options.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr size_t kMaxInputBytes = size_t{16} << 20;

struct Parts {
  const uint8_t* program;
  size_t program_size;
  const uint8_t* inputs;
  size_t inputs_size;
};

Parts split(const uint8_t* data, size_t size) {
  if (size >= 4) {
    uint32_t n;
    std::memcpy(&n, data + size - 4, 4);
    if (n <= size - 4) return {data, n, data + n, size - 4 - n};
  }
  return {data, size, data + size, 0};
}

void put_u32(uint8_t* p, size_t v) {
  const uint32_t n = static_cast<uint32_t>(v);
  std::memcpy(p, &n, 4);
}

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint8_t byte() { return at_ < n_ ? p_[at_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(byte() | (byte() << 8)); }
  void fill(void* dst, size_t n) {
    const size_t have = at_ < n_ ? std::min(n, n_ - at_) : 0;
    if (have > 0) std::memcpy(dst, p_ + at_, have);
    std::memset(static_cast<uint8_t*>(dst) + have, 0, n - have);
    at_ += have;
  }

 private:
  const uint8_t* p_;
  size_t n_, at_ = 0;
};

// A loaded program and the methods that loaded.
struct Loaded {
  std::vector<uint8_t> bytes;
  std::unique_ptr<kiln::Program> program;
  std::vector<kiln::Method> methods;
};

// The programs loaded last, by content: the corpus holds inputs of many
// programs (each program mutation that finds coverage adds one), and
// reloading one for every run would dominate the time.
Loaded& load(const uint8_t* program, size_t size) {
  constexpr size_t kCached = 256;
  static auto* cache = new std::unordered_map<size_t, std::unique_ptr<Loaded>>();
  static auto* order = new std::deque<size_t>();
  const size_t key = std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(program), size));
  auto found = cache->find(key);
  if (found != cache->end() && found->second->bytes.size() == size &&
      std::memcmp(found->second->bytes.data(), program, size) == 0) {
    return *found->second;
  }
  if (found == cache->end()) {
    if (cache->size() == kCached) {
      cache->erase(order->front());
      order->pop_front();
    }
    order->push_back(key);
  }
  auto loaded = std::make_unique<Loaded>();
  loaded->bytes.assign(program, program + size);
  kiln::Result<kiln::Program> p = kiln::Program::load_from_copy(program, size, kiln_fuzz::options());
  if (p.ok()) {
    loaded->program = std::make_unique<kiln::Program>(std::move(p).value());
    for (const std::string& name : loaded->program->method_names()) {
      kiln::Result<kiln::Method> m = loaded->program->load_method(name);
      if (m.ok()) loaded->methods.push_back(std::move(m).value());
    }
  }
  std::unique_ptr<Loaded>& slot = (*cache)[key];
  slot = std::move(loaded);
  return *slot;
}

// Elements of one input from the reader (see the format above).
void fill(Reader& r, kiln::ScalarType dtype, int64_t numel, uint8_t* dst) {
  const size_t item = kiln::element_size(dtype);
  for (int64_t i = 0; i < numel; ++i, dst += item) {
    switch (dtype) {
      case kiln::ScalarType::Int64: {
        int64_t v = static_cast<int16_t>(r.u16());
        std::memcpy(dst, &v, 8);
        break;
      }
      case kiln::ScalarType::Int32: {
        int32_t v = static_cast<int16_t>(r.u16());
        std::memcpy(dst, &v, 4);
        break;
      }
      case kiln::ScalarType::Bool: *dst = r.byte() & 1; break;
      default: r.fill(dst, item); break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Parts parts = split(data, size);
  Loaded& loaded = load(parts.program, parts.program_size);
  if (loaded.methods.empty()) return 0;
  Reader r(parts.inputs, parts.inputs_size);
  kiln::Method& method = loaded.methods[r.byte() % loaded.methods.size()];
  const uint8_t flags = r.byte();
  method.reset_state();  // every execution starts from the program's state

  const std::vector<kiln::TensorSpec>& specs = method.spec().inputs;
  std::vector<std::vector<uint8_t>> buffers(specs.size());
  std::vector<kiln::Tensor> inputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const kiln::TensorSpec& spec = specs[i];
    std::vector<int64_t> sizes = spec.sizes;
    for (int d : spec.dynamic_dims) {
      const uint64_t span = static_cast<uint64_t>(spec.sizes[d] - spec.min_sizes[d]) + 1;
      sizes[d] = spec.min_sizes[d] + static_cast<int64_t>(r.u16() % span);
    }
    if (i == 0 && (flags & 2) && !sizes.empty()) sizes[flags % sizes.size()] += 1;  // must be refused
    uint64_t numel = 1;
    for (int64_t s : sizes) {
      if (s < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel)) return 0;
    }
    if (numel > kMaxInputBytes / kiln::element_size(spec.dtype)) return 0;
    buffers[i].resize(static_cast<size_t>(numel) * kiln::element_size(spec.dtype));
    fill(r, spec.dtype, static_cast<int64_t>(numel), buffers[i].data());
    inputs.push_back(kiln::Tensor::view(buffers[i].data(), sizes, spec.dtype));
  }
  for (int run = 0; run < 1 + (flags & 1); ++run) {
    kiln::Result<std::vector<kiln::Tensor>> outputs = method.run(inputs);
    if (!outputs.ok()) break;
    // Read every output byte, so that a view reaching outside planned memory shows.
    uint8_t sum = 0;
    for (const kiln::Tensor& t : outputs.value()) {
      const auto* p = static_cast<const uint8_t*>(t.data());
      for (size_t k = 0; k < t.nbytes(); ++k) sum ^= p[k];
    }
    volatile uint8_t sink = sum;
    (void)sink;
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  const Parts parts = split(data, size);
  const size_t psize = parts.program_size, isize = parts.inputs_size;
  if (psize == size || max_size < psize + 4 + 1) return LLVMFuzzerMutate(data, size, max_size);
  if (seed % 32 != 0) {
    uint8_t* in = data + psize;
    size_t n = isize;
    if (n == 0) in[n++] = static_cast<uint8_t>(seed >> 8);
    n = LLVMFuzzerMutate(in, n, max_size - psize - 4);
    put_u32(in + n, psize);
    return psize + n + 4;
  }
  std::vector<uint8_t> tail(parts.inputs, parts.inputs + isize);
  const size_t n = LLVMFuzzerMutate(data, psize, max_size - isize - 4);
  if (isize > 0) std::memcpy(data + n, tail.data(), isize);
  put_u32(data + n + isize, n);
  return n + isize + 4;
}
