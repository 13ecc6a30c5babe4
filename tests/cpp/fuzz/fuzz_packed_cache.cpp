// fuzz_packed_cache: libFuzzer target for the packed-weight cache file's reader
// (runtime/executor/packed_cache_file.cpp). The input is a cache file; every
// outcome but an error value or a checked cache is a bug.
//
// The key a load would ask for is taken from the input itself, and a second
// pass repairs the header's hash: otherwise nearly every mutation would stop at
// the key or the hash, and the entry table behind them would never be reached.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "executor/packed_cache_file.h"

namespace {
// Where packed_cache_file.cpp keeps the key, the table size and the header hash.
constexpr size_t kHeaderSize = 128, kKeyOffset = 16, kTableSizeOffset = 104, kHashOffset = 120;

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

kiln::internal::PackedCacheKey key_of(const uint8_t* data, size_t size) {
  kiln::internal::PackedCacheKey key;
  if (size < kKeyOffset + 56) return key;
  const uint8_t* k = data + kKeyOffset;
  key.device = load64(k);
  key.inode = load64(k + 8);
  key.size = load64(k + 16);
  key.mtime_ns = load64(k + 24);
  key.ctime_ns = load64(k + 32);
  key.table_hash = load64(k + 40);
  key.cpu_features = load64(k + 48);
  return key;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kiln::internal::PackedCacheFile;
  const kiln::internal::PackedCacheKey key = key_of(data, size);
  (void)PackedCacheFile::check_bytes(data, size, key);  // as it came
  if (size < kHeaderSize) return 0;
  std::vector<uint8_t> fixed(data, data + size);
  const uint64_t table_size = load64(fixed.data() + kTableSizeOffset);
  if (table_size > size - kHeaderSize) return 0;  // refused before the hash is read
  const uint64_t hash = kiln::internal::hash_bytes(fixed.data() + kHeaderSize, table_size,
                                                   kiln::internal::hash_bytes(fixed.data(), kHashOffset));
  std::memcpy(fixed.data() + kHashOffset, &hash, 8);
  (void)PackedCacheFile::check_bytes(fixed.data(), fixed.size(), key);
  return 0;
}
