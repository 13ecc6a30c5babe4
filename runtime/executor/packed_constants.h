// The packed-constant cache of a loaded program, and what kernels' prepare functions reach through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/packed_cache_file.h"
#include "kiln/kernel.h"

namespace kiln::internal {

class ProgramBytes;

// Packed forms of a program's constants, keyed by (source bytes, layout), shared
// by every method of the program and freed with it. With a packed-weight cache
// file (use_cache_file), packed bytes the file holds are used from its read-only
// shared mapping instead of being packed again.
class PackedConstantCache {
 public:
  PackedConstantCache() = default;
  ~PackedConstantCache();
  PackedConstantCache(const PackedConstantCache&) = delete;
  PackedConstantCache& operator=(const PackedConstantCache&) = delete;

  uint64_t total_bytes() const;
  // The part of total_bytes() used from a cache file's mapping.
  uint64_t mapped_bytes() const;

  // Serves packed constants of the program `file` from the cache file `directory`/key.file_name()
  // (`opened`: null when it is missing or was refused, as `report` says) and writes that file anew
  // when a method packed something it lacked (write_cache_file).
  void use_cache_file(const ProgramBytes* file, std::string directory, const PackedCacheKey& key,
                      std::unique_ptr<PackedCacheFile> opened, std::string report);
  // Records why no cache file serves this program although one was asked for.
  void set_cache_report(std::string report);
  // After a method loaded: when it packed constants the cache file lacks, writes the file with every
  // packed constant of the program (and the file's other entries). A failure is logged and reported,
  // never returned: the cache only saves time and memory.
  void write_cache_file();
  // What happened to the cache file: "" (no cache), "mapped PATH", "refused PATH: why; rewritten", ...
  std::string cache_report() const;

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
    std::string packer;  // build_id_of(pack), for the cache file
    bool mapped;         // data lies in the cache file's mapping (not ours to free)
  };
  // The cache file of a mapped program, when the load asked for one.
  struct CacheFileState {
    const ProgramBytes* program = nullptr;
    std::string directory;
    PackedCacheKey key;
    std::unique_ptr<PackedCacheFile> file;
    bool stale = false;  // something was packed that the file lacks
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  uint64_t total_bytes_ = 0;
  uint64_t mapped_bytes_ = 0;
  std::unique_ptr<CacheFileState> cache_file_;
  std::string cache_report_;
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
