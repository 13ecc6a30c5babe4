// The packed-constant cache of a loaded program, and what kernels' prepare functions reach through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/kernel.h"

namespace kiln::internal {

class ProgramBytes;

// Packed forms of a program's constants, keyed by (source bytes, layout), shared
// by every method of the program and freed with it.
class PackedConstantCache {
 public:
  PackedConstantCache() = default;
  ~PackedConstantCache();
  PackedConstantCache(const PackedConstantCache&) = delete;
  PackedConstantCache& operator=(const PackedConstantCache&) = delete;

  uint64_t total_bytes() const;

  // Finds or builds the packed bytes. *created is the number of bytes this call
  // allocated (0 when they existed). `limit` bounds total_bytes() plus
  // `other_bytes` (the calling method's own planned memory). When `file` is
  // given, the source's pages of that mapped file are released after packing.
  Result<const void*> get_or_pack(const Tensor& source, const char* layout, size_t bytes, PackFn pack, const void* arg,
                                  uint64_t limit, uint64_t other_bytes, const ProgramBytes* file, uint64_t* created);

 private:
  struct Entry {
    const void* source;
    size_t source_bytes;
    std::string layout;
    void* data;
    size_t bytes;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  uint64_t total_bytes_ = 0;
};

// What KernelContext::services points at while a method's kernels are prepared.
struct KernelServices {
  PackedConstantCache* cache = nullptr;
  uint64_t memory_limit = 0;           // LoadOptions::max_memory_bytes
  const ProgramBytes* file = nullptr;  // the program's bytes (pages released after packing), or null
  // The method's arenas and scratch so far (for the memory limit).
  uint64_t method_bytes = 0;
  // Packed bytes created by the instruction being prepared.
  uint64_t packed_bytes = 0;
};

}  // namespace kiln::internal
