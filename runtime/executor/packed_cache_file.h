// The packed-weight cache file: the packed constants of one program, written
// once and then mapped read-only by every process that loads the program, so
// that N processes hold one physical copy and skip the packing (docs/memory.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/error.h"

namespace kiln::internal {

// 64-bit hash of a byte range (four independent multiply-rotate lanes over
// 32-byte stripes, then a mix): fast enough to check a 100 MB cache at load.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0) noexcept;

// The GNU build id (hex) of the loaded object that holds `address`, or "" when
// it has none. A packed layout's bytes come from the code of its pack function:
// the build id of the library holding that code keys them.
std::string build_id_of(const void* address);
// True when an object of this process has build id `id` (a cache entry packed by code that is not
// loaded, e.g. an older build of a library, is not carried into a new cache file).
bool build_id_is_loaded(const std::string& id);

// Where the cache files of a load go: LoadOptions::packed_cache, else the
// KILN_PACKED_CACHE environment variable: "", "0" or "off" for none, "1" or
// "auto" for $XDG_CACHE_HOME/kiln/packed (or ~/.cache/kiln/packed), anything
// else a directory. Returns "" when caching is off; an error for a value that
// names no usable directory.
Result<std::string> packed_cache_directory(const std::string& option);

// What identifies a program file and the machine for the cache: the file's
// identity (a file's ctime changes whenever its bytes can have; a rename over
// it changes the inode), a hash of its program table, the kiln version and the
// CPU features the kernels were allowed.
struct PackedCacheKey {
  uint64_t device = 0, inode = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
  uint64_t table_hash = 0;
  uint64_t cpu_features = 0;
  std::string file_name() const;  // "<hex of the whole key>.kpack"
};

// One packed constant as the file records it.
struct PackedCacheEntry {
  uint64_t source_offset = 0;  // from the start of the program file
  uint64_t source_bytes = 0;
  std::string layout;
  std::string packer;  // build_id_of(the pack function)
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // in the mapping (read) or the program's memory (write)
  uint64_t data_hash = 0;
};

// A cache file opened and mapped read-only. Every check that does not need the
// packed bytes themselves is made at open (magic, version, key, owner and
// permissions, every region inside the file and 64-byte aligned); the bytes
// of an entry are hashed when it is first used (verify()).
class PackedCacheFile {
 public:
  // Opens `path` if it exists. NotFound when it does not; InvalidProgram (with
  // the reason) when it is not a cache this load can trust.
  static Result<std::unique_ptr<PackedCacheFile>> open(const std::string& path, const PackedCacheKey& key);
  // Parses and checks a cache held in memory (the fuzz target's entry point).
  static Status check_bytes(const uint8_t* data, size_t size, const PackedCacheKey& key);
  ~PackedCacheFile();
  PackedCacheFile(const PackedCacheFile&) = delete;
  PackedCacheFile& operator=(const PackedCacheFile&) = delete;

  size_t size() const { return size_; }
  size_t num_entries() const;
  const PackedCacheEntry& entry(size_t i) const;
  const PackedCacheEntry* find(uint64_t source_offset, uint64_t source_bytes, const std::string& layout,
                               const std::string& packer, uint64_t bytes) const;
  // True when the entry's bytes hash to what the file says.
  static bool verify(const PackedCacheEntry& e);

 private:
  PackedCacheFile() = default;
  struct Parsed;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<Parsed> parsed_;
};

// True when a layout and a packer name fit the file's fixed fields (a longer one is not cached).
bool packed_cache_can_name(const std::string& layout, const std::string& packer);

// Writes a cache of `entries` to `directory`/key.file_name() atomically: a new
// temporary file renamed over the name, so a reader maps either the old file or
// the new one, never a half-written one, and racing writers each leave a
// complete file.
Status write_packed_cache(const std::string& directory, const PackedCacheKey& key, const PackedCacheEntry* entries,
                          size_t n);

}  // namespace kiln::internal
