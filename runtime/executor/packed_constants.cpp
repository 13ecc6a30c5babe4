// Packed constants: built once per loaded program, in memory of their own.
#include "executor/packed_constants.h"

#include <cstring>

#include "core/pages.h"
#include "kiln/log.h"
#include "loader/program_file.h"

namespace kiln {
namespace internal {

// Packed weights get pages of their own, returned to the system when freed.
PackedConstantCache::~PackedConstantCache() {
  for (Entry& e : entries_) {
    if (!e.mapped) free_pages(e.data, e.bytes);
  }
}

uint64_t PackedConstantCache::total_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

uint64_t PackedConstantCache::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapped_bytes_;
}

namespace {
// The offset of `source` in the program file, or false when it does not lie in it.
bool offset_in(const ProgramBytes* program, const void* source, size_t n, uint64_t* offset) {
  const uint8_t* p = static_cast<const uint8_t*>(source);
  if (program == nullptr || p < program->data() || n > program->size() ||
      static_cast<size_t>(p - program->data()) > program->size() - n) {
    return false;
  }
  *offset = static_cast<uint64_t>(p - program->data());
  return true;
}
}  // namespace

void PackedConstantCache::use_cache_file(const ProgramBytes* file, std::string directory, const PackedCacheKey& key,
                                         std::unique_ptr<PackedCacheFile> opened, std::string report) {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_file_ = std::make_unique<CacheFileState>();
  cache_file_->program = file;
  cache_file_->directory = std::move(directory);
  cache_file_->key = key;
  cache_file_->file = std::move(opened);
  cache_report_ = std::move(report);
}

void PackedConstantCache::set_cache_report(std::string report) {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_report_ = std::move(report);
}

std::string PackedConstantCache::cache_report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_report_;
}

void PackedConstantCache::write_cache_file() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cache_file_ == nullptr || !cache_file_->stale) return;
  CacheFileState& c = *cache_file_;
  c.stale = false;  // one attempt per method load that packed something new
  std::vector<PackedCacheEntry> out;
  for (const Entry& e : entries_) {
    PackedCacheEntry w;
    if (e.packer.empty() || !packed_cache_can_name(e.layout, e.packer) ||
        !offset_in(c.program, e.source, e.source_bytes, &w.source_offset)) {
      continue;
    }
    w.source_bytes = e.source_bytes;
    w.layout = e.layout;
    w.packer = e.packer;
    w.bytes = e.bytes;
    w.data = static_cast<const uint8_t*>(e.data);
    out.push_back(std::move(w));
  }
  // Keep what the old file holds for methods this process did not load, when its packing code is here.
  const size_t ours = out.size();
  for (size_t i = 0; c.file != nullptr && i < c.file->num_entries(); ++i) {
    const PackedCacheEntry& old = c.file->entry(i);
    bool have = false;
    for (size_t j = 0; j < ours && !have; ++j) {
      have = out[j].source_offset == old.source_offset && out[j].source_bytes == old.source_bytes &&
             out[j].layout == old.layout && out[j].packer == old.packer;
    }
    if (!have && build_id_is_loaded(old.packer) && PackedCacheFile::verify(old)) out.push_back(old);
  }
  const std::string path = c.directory + "/" + c.key.file_name();
  uint64_t total = 0;
  for (const PackedCacheEntry& e : out) total += e.bytes;
  const Status st = write_packed_cache(c.directory, c.key, out.data(), out.size());
  if (st.is_ok()) {
    cache_report_ += format("; wrote %s (%zu packed constants, %llu bytes)", path.c_str(), out.size(),
                            static_cast<unsigned long long>(total));
  } else {
    cache_report_ += format("; could not write %s: %s", path.c_str(), st.message().c_str());
    log(LogLevel::Warning, "kiln: the packed-weight cache %s was not written: %s", path.c_str(), st.message().c_str());
  }
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
  // The cache file's copy, when it has one for this constant, layout and packing code, and its bytes
  // are what were written.
  std::string packer;
  if (cache_file_ != nullptr) {
    CacheFileState& c = *cache_file_;
    packer = build_id_of(reinterpret_cast<const void*>(pack));
    uint64_t offset = 0;
    if (!packer.empty() && offset_in(c.program, source.data(), source.nbytes(), &offset)) {
      const PackedCacheEntry* hit =
          c.file != nullptr ? c.file->find(offset, source.nbytes(), layout, packer, bytes) : nullptr;
      if (hit != nullptr && !PackedCacheFile::verify(*hit)) {
        log(LogLevel::Warning, "kiln: the packed-weight cache's copy of %s (%s) is corrupted; packing it again",
            describe(source).c_str(), layout);
        cache_report_ += format("; the copy of %s (%s) was corrupted", describe(source).c_str(), layout);
        hit = nullptr;
      }
      if (hit != nullptr) {
        entries_.push_back({source.data(), source.nbytes(), layout, const_cast<uint8_t*>(hit->data), bytes, packer,
                            /*mapped=*/true});
        total_bytes_ += bytes;
        mapped_bytes_ += bytes;
        *created = bytes;
        return static_cast<const void*>(hit->data);
      }
      c.stale = true;
    }
  }
  void* data = allocate_pages(bytes);
  KILN_CHECK_OR_RETURN(data != nullptr, OutOfMemory, "cannot allocate %zu bytes for packed %s", bytes,
                       describe(source).c_str());
  pack(arg, data);
  entries_.push_back({source.data(), source.nbytes(), layout, data, bytes, std::move(packer), /*mapped=*/false});
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
