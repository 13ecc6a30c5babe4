// Packed constants: built once per loaded program, in memory of their own.
#include "executor/packed_constants.h"

#include <cstring>

#include "core/pages.h"
#include "loader/program_file.h"

namespace kiln {
namespace internal {

// Packed weights get pages of their own, returned to the system when freed.
PackedConstantCache::~PackedConstantCache() {
  for (Entry& e : entries_) free_pages(e.data, e.bytes);
}

uint64_t PackedConstantCache::total_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

Result<const void*> PackedConstantCache::get_or_pack(const Tensor& source, const char* layout, size_t bytes,
                                                     PackFn pack, const void* arg, uint64_t limit, uint64_t other_bytes,
                                                     const ProgramBytes* file, uint64_t* created) {
  *created = 0;
  KILN_CHECK_OR_RETURN(source.is_constant() && source.data() != nullptr, InvalidArgument,
                       "packed_constant: the source %s is not a constant of the program", describe(source).c_str());
  KILN_CHECK_OR_RETURN(layout != nullptr && layout[0] != '\0' && pack != nullptr && bytes > 0, InvalidArgument,
                       "packed_constant needs a layout name, a pack function and a size");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.source == source.data() && e.source_bytes == source.nbytes() && e.layout == layout) {
      KILN_CHECK_OR_RETURN(e.bytes == bytes, Internal,
                           "packed_constant: layout '%s' of one constant asked for %zu and %zu bytes", layout, e.bytes,
                           bytes);
      return static_cast<const void*>(e.data);
    }
  }
  KILN_CHECK_OR_RETURN(bytes <= limit && total_bytes_ + other_bytes <= limit - bytes, OutOfMemory,
                       "packing %s (%s) needs %zu bytes: the program's packed weights (%llu bytes) and the method's "
                       "memory (%llu bytes) would exceed the limit of %llu bytes (LoadOptions::max_memory_bytes)",
                       describe(source).c_str(), layout, bytes, (unsigned long long)total_bytes_,
                       (unsigned long long)other_bytes, (unsigned long long)limit);
  void* data = allocate_pages(bytes);
  KILN_CHECK_OR_RETURN(data != nullptr, OutOfMemory, "cannot allocate %zu bytes for packed %s", bytes,
                       describe(source).c_str());
  pack(arg, data);
  entries_.push_back({source.data(), source.nbytes(), layout, data, bytes});
  total_bytes_ += bytes;
  *created = bytes;
  // The packed copy replaces the mapped one in memory: packing read every page
  // of the source into the page cache and this process; let them go.
  if (file != nullptr) file->release_pages(source.data(), source.nbytes());
  return static_cast<const void*>(data);
}

}  // namespace internal

Result<const void*> packed_constant(KernelContext& ctx, const Tensor& source, const char* layout, size_t bytes,
                                    PackFn pack, const void* arg) noexcept {
  internal::KernelServices* services = ctx.services;
  KILN_CHECK_OR_RETURN(services != nullptr && services->cache != nullptr, InvalidArgument,
                       "packed_constant is only available to a kernel's prepare function during method load");
  uint64_t created = 0;
  Result<const void*> r = services->cache->get_or_pack(source, layout, bytes, pack, arg, services->memory_limit,
                                                       services->method_bytes, services->file, &created);
  services->packed_bytes += created;
  return r;
}

}  // namespace kiln
