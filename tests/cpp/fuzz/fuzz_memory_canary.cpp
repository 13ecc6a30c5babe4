// fuzz_memory_canary: the positive control of fuzz_memory_bound.h. An input starting "big!" makes
// it hold far more than 64x its size in small blocks, which the bound must report as a crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_memory_bound.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_fuzz::MemoryBound bound(size);
  if (size < 4 || std::memcmp(data, "big!", 4) != 0) return 0;
  std::vector<std::unique_ptr<char[]>> blocks;
  for (size_t held = 0; held < 128 * size + (size_t{2} << 20); held += 4096) blocks.emplace_back(new char[4096]);
  return 0;
}
