// allocate_pages: anonymous mappings, or the heap under AddressSanitizer.
#include "core/pages.h"

#include <sys/mman.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ASAN 1
#endif
#endif

namespace kiln::internal {

void* allocate_pages(size_t size) {
#if defined(KILN_ASAN)
  return std::calloc(1, size);
#else
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
#endif
}

void free_pages(void* p, size_t size) {
#if defined(KILN_ASAN)
  (void)size;
  std::free(p);
#else
  ::munmap(p, size);
#endif
}

void zero_pages(void* p, size_t size) {
  auto* begin = static_cast<uint8_t*>(p);
#if defined(__linux__) && !defined(KILN_ASAN)
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + size) / page * page;
  if (page > 0 && first < last) {
    auto* middle = reinterpret_cast<uint8_t*>(first);
    if (::madvise(middle, last - first, MADV_DONTNEED) == 0) {
      std::memset(begin, 0, static_cast<size_t>(middle - begin));
      std::memset(reinterpret_cast<uint8_t*>(last), 0,
                  static_cast<size_t>(begin + size - reinterpret_cast<uint8_t*>(last)));
      return;
    }
  }
#endif
  std::memset(begin, 0, size);
}

}  // namespace kiln::internal
