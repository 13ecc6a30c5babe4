// allocate_pages: anonymous mappings, or the heap under AddressSanitizer.
#include "core/pages.h"

#include <sys/mman.h>

#include <cstdlib>

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

}  // namespace kiln::internal
