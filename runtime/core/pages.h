// Page-granular memory for the runtime's large blocks (arenas, scratch, packed weights).
#pragma once

#include <cstddef>

namespace kiln::internal {

// Zero-filled memory that the OS commits page by page as it is first written,
// or nullptr. Under AddressSanitizer (gcc's __SANITIZE_ADDRESS__ or clang's
// __has_feature) it comes from the heap instead, so that the sanitizer's
// redzones catch a kernel reading or writing past a block.
void* allocate_pages(size_t size);
void free_pages(void* p, size_t size);

// Zeroes [p, p + size), a range inside a block from allocate_pages, and hands the
// whole pages within it back to the OS (Linux's MADV_DONTNEED on a private anonymous
// mapping: they read as zero and are committed again when next written), so a
// cleared KV cache costs only the pages a later call writes. Elsewhere, or under
// AddressSanitizer, a memset.
void zero_pages(void* p, size_t size);

}  // namespace kiln::internal
