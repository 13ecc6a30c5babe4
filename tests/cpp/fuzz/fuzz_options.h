// What the fuzz targets share: load options that keep one input's memory small.
#pragma once

#include <kiln/kiln.h>

namespace kiln_fuzz {

// A fuzzed file may plan up to LoadOptions::max_memory_bytes; the default
// (4 GiB) would let libFuzzer's RSS limit, not kiln, refuse it. 64 MiB still
// holds every test model, and a file asking more must fail with OutOfMemory.
inline kiln::LoadOptions options() {
  kiln::LoadOptions options;
  options.max_memory_bytes = uint64_t{64} << 20;
  return options;
}

}  // namespace kiln_fuzz
