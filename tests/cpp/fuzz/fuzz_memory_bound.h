// What the LLM fuzz targets share: a bound on the memory one input may make kiln hold.
#pragma once

#include <sanitizer/allocator_interface.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace kiln_fuzz {

// The readers of libkiln_llm promise that what they keep follows what the file
// holds (docs/llm.md): while an input is being read, the bytes live on the heap
// may exceed those live before it by at most kFactor times the input plus
// kFloor (the tokenizer's fixed tables), else the target aborts and libFuzzer
// records the input. libFuzzer's own -malloc_limit_mb only catches one huge
// allocation; this catches many small ones adding up too.
constexpr size_t kFactor = 64;
constexpr size_t kFloor = size_t{1} << 20;

inline std::atomic<int64_t> live_bytes{0};
inline std::atomic<int64_t> limit_bytes{INT64_MAX};

inline void on_malloc(const volatile void*, size_t size) {
  if (live_bytes.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed) + static_cast<int64_t>(size) >
      limit_bytes.load(std::memory_order_relaxed)) {
    // Disarmed first: libFuzzer's crash handler allocates to save the input.
    limit_bytes.store(INT64_MAX);
    static const char msg[] = "kiln_fuzz: the input made kiln hold more than 64x its size (+1 MiB) on the heap\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    std::abort();
  }
}

inline void on_free(const volatile void* ptr) {
  if (ptr != nullptr) {
    live_bytes.fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<const void*>(ptr))),
                         std::memory_order_relaxed);
  }
}

// Arms the bound for one input of `size` bytes for the lifetime of the object.
class MemoryBound {
 public:
  explicit MemoryBound(size_t size) {
    static const bool installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
    (void)installed;
    limit_bytes.store(live_bytes.load() + static_cast<int64_t>(kFactor * size + kFloor));
  }
  ~MemoryBound() { limit_bytes.store(INT64_MAX); }
  MemoryBound(const MemoryBound&) = delete;
  MemoryBound& operator=(const MemoryBound&) = delete;
};

}  // namespace kiln_fuzz
