// The packed-weight cache file (packed_cache_file.h). Layout, little-endian:
//
//   header (128 bytes): magic "KILNPCK1", u32 format version, u32 entry count,
//     the key (7 x u64), the kiln version (24 bytes, NUL-padded), u64 table
//     offset (128), u64 table size, u64 file size, u64 hash of everything
//     before it and of the table;
//   table: one 192-byte record per entry: u64 source offset, source bytes, data
//     offset, data bytes, data hash; the layout (88 bytes) and the packer's build
//     id (64 bytes), NUL-terminated;
//   data: each entry's packed bytes at a 64-byte aligned offset.
#include "executor/packed_cache_file.h"

#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/version.h"

namespace kiln::internal {
namespace {

constexpr char kCacheMagic[8] = {'K', 'I', 'L', 'N', 'P', 'C', 'K', '1'};
constexpr uint32_t kCacheVersion = 1;
constexpr size_t kCacheHeaderSize = 128;
constexpr size_t kEntrySize = 192;
constexpr size_t kLayoutField = 88;
constexpr size_t kPackerField = 64;
constexpr size_t kVersionField = 24;
constexpr size_t kDataAlignment = 64;

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint64_t lane(uint64_t acc, uint64_t w) { return rotl(acc + w * kP2, 31) * kP1; }
inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  return h ^ (h >> 32);
}

void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void put_string(uint8_t* p, size_t field, const std::string& s) {
  std::memset(p, 0, field);
  std::memcpy(p, s.data(), s.size() < field - 1 ? s.size() : field - 1);
}
// The NUL-terminated string of a fixed field, or false when it has no NUL or is empty.
bool get_string(const uint8_t* p, size_t field, std::string* out) {
  const void* nul = std::memchr(p, 0, field);
  if (nul == nullptr || nul == p) return false;
  out->assign(reinterpret_cast<const char*>(p), static_cast<const uint8_t*>(nul) - p);
  return true;
}

void put_key(uint8_t* p, const PackedCacheKey& k) {
  const uint64_t fields[7] = {k.device, k.inode, k.size, k.mtime_ns, k.ctime_ns, k.table_hash, k.cpu_features};
  for (int i = 0; i < 7; ++i) put64(p + 8 * i, fields[i]);
}

uint64_t header_hash(const uint8_t* header, const uint8_t* table, size_t table_size) {
  return hash_bytes(table, table_size, hash_bytes(header, 120));
}

}  // namespace

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) noexcept {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const uint8_t* end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t a = seed + kP1 + kP2, b = seed + kP2, c = seed, d = seed - kP1;
    for (; p + 32 <= end; p += 32) {
      a = lane(a, load64(p));
      b = lane(b, load64(p + 8));
      c = lane(c, load64(p + 16));
      d = lane(d, load64(p + 24));
    }
    h = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18);
    for (uint64_t v : {a, b, c, d}) h = (h ^ lane(0, v)) * kP1 + kP3;
  } else {
    h = seed + kP3;
  }
  h += static_cast<uint64_t>(n);
  for (; p + 8 <= end; p += 8) h = rotl(h ^ lane(0, load64(p)), 27) * kP1 + kP3;
  for (; p < end; ++p) h = rotl(h ^ (*p * kP3), 11) * kP1;
  return mix(h);
}

namespace {
// The GNU build id note of a loaded object, in hex ("" when it has none).
std::string note_build_id(const struct dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) & ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const uint8_t* note = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = note + ph.p_memsz;
    while (note + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, note, sizeof nh);
      const uint8_t* name = note + sizeof nh;
      const uint8_t* desc = name + ((nh.n_namesz + 3) & ~3u);
      if (desc + nh.n_descsz > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char hex[] = "0123456789abcdef";
        std::string id;
        for (uint32_t j = 0; j < nh.n_descsz && j < 31; ++j) {
          id += hex[desc[j] >> 4];
          id += hex[desc[j] & 15];
        }
        return id;
      }
      note = desc + ((nh.n_descsz + 3) & ~3u);
    }
  }
  return "";
}
}  // namespace

std::string build_id_of(const void* address) {
  // Cached per object (the pack functions of a program live in two or three libraries).
  static std::mutex mutex;
  static std::unordered_map<uintptr_t, std::string> by_base;
  struct Search {
    uintptr_t address;
    const struct dl_phdr_info* info = nullptr;
    uintptr_t base = 0;
  } search{reinterpret_cast<uintptr_t>(address)};
  std::string id;
  const bool found = dl_iterate_phdr(
                         [](struct dl_phdr_info* info, size_t, void* arg) -> int {
                           Search* s = static_cast<Search*>(arg);
                           for (int i = 0; i < info->dlpi_phnum; ++i) {
                             const ElfW(Phdr) & ph = info->dlpi_phdr[i];
                             const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
                             if (ph.p_type == PT_LOAD && s->address >= begin && s->address < begin + ph.p_memsz) {
                               s->base = info->dlpi_addr;
                               {
                                 std::lock_guard<std::mutex> lock(mutex);
                                 auto it = by_base.find(s->base);
                                 if (it == by_base.end()) by_base.emplace(s->base, note_build_id(info));
                               }
                               return 1;
                             }
                           }
                           return 0;
                         },
                         &search) != 0;
  if (!found) return "";
  std::lock_guard<std::mutex> lock(mutex);
  return by_base[search.base];
}

bool build_id_is_loaded(const std::string& id) {
  struct Search {
    const std::string* id;
    bool found = false;
  } search{&id};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* arg) -> int {
        Search* s = static_cast<Search*>(arg);
        s->found = note_build_id(info) == *s->id;
        return s->found ? 1 : 0;
      },
      &search);
  return search.found;
}

namespace {
Status make_directories(const std::string& path) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status(Error::IoError, format("cannot create '%s': %s", partial.c_str(), std::strerror(errno)));
    }
  }
  struct stat st;
  KILN_CHECK_OR_RETURN(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), InvalidArgument,
                       "the packed-weight cache '%s' is not a directory", path.c_str());
  return Status::ok();
}
}  // namespace

Result<std::string> packed_cache_directory(const std::string& option) {
  std::string value = option;
  if (value.empty()) {
    const char* env = std::getenv("KILN_PACKED_CACHE");
    value = env != nullptr ? env : "";
  }
  if (value.empty() || value == "0" || value == "off") return std::string();
  if (value == "1" || value == "auto") {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg != nullptr && xdg[0] == '/') {
      value = std::string(xdg) + "/kiln/packed";
    } else if (home != nullptr && home[0] == '/') {
      value = std::string(home) + "/.cache/kiln/packed";
    } else {
      return Status(Error::InvalidArgument,
                    "packed_cache 'auto' needs XDG_CACHE_HOME or HOME to be an absolute path; name a directory");
    }
  }
  KILN_CHECK_OR_RETURN(value.find('\0') == std::string::npos, InvalidArgument,
                       "the packed-weight cache directory contains a NUL byte");
  KILN_RETURN_IF_ERROR(make_directories(value));
  return value;
}

std::string PackedCacheKey::file_name() const {
  uint8_t raw[56];
  put_key(raw, *this);
  const uint64_t a = hash_bytes(raw, sizeof raw, 1), b = hash_bytes(raw, sizeof raw, 2);
  return format("%016llx%016llx.kpack", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
}

struct PackedCacheFile::Parsed {
  std::vector<PackedCacheEntry> entries;
};

namespace {
// Every check of a cache's bytes that does not read the packed data; fills `out`.
Status parse_cache(const uint8_t* data, size_t size, const PackedCacheKey& key, std::vector<PackedCacheEntry>* out) {
  KILN_CHECK_OR_RETURN(size >= kCacheHeaderSize, InvalidProgram, "it is %zu bytes, shorter than its header", size);
  KILN_CHECK_OR_RETURN(std::memcmp(data, kCacheMagic, 8) == 0, InvalidProgram, "it is not a kiln packed-weight cache");
  KILN_CHECK_OR_RETURN(get32(data + 8) == kCacheVersion, InvalidProgram, "it has cache format %u (this kiln reads %u)",
                       get32(data + 8), kCacheVersion);
  std::string version;
  KILN_CHECK_OR_RETURN(get_string(data + 72, kVersionField, &version), InvalidProgram, "its kiln version is malformed");
  KILN_CHECK_OR_RETURN(version == KILN_VERSION_STRING, InvalidProgram, "it was written by kiln %s (this is kiln %s)",
                       version.c_str(), KILN_VERSION_STRING);
  uint8_t want[56];
  put_key(want, key);
  KILN_CHECK_OR_RETURN(std::memcmp(data + 16, want + 0, 40) == 0, InvalidProgram,
                       "it was written for another program file (device, inode, size or times differ)");
  KILN_CHECK_OR_RETURN(std::memcmp(data + 56, want + 40, 8) == 0, InvalidProgram,
                       "it was written for another program table");
  KILN_CHECK_OR_RETURN(std::memcmp(data + 64, want + 48, 8) == 0, InvalidProgram,
                       "it was written for other CPU features (%#llx, here %#llx)",
                       static_cast<unsigned long long>(load64(data + 64)),
                       static_cast<unsigned long long>(key.cpu_features));
  const uint64_t count = get32(data + 12), table_offset = load64(data + 96), table_size = load64(data + 104),
                 file_size = load64(data + 112);
  KILN_CHECK_OR_RETURN(file_size == size, InvalidProgram, "it says it is %llu bytes but is %zu (truncated?)",
                       static_cast<unsigned long long>(file_size), size);
  KILN_CHECK_OR_RETURN(table_offset == kCacheHeaderSize && count <= (size - kCacheHeaderSize) / kEntrySize &&
                           table_size == count * kEntrySize,
                       InvalidProgram, "its entry table (%llu entries, %llu bytes at %llu) does not fit",
                       static_cast<unsigned long long>(count), static_cast<unsigned long long>(table_size),
                       static_cast<unsigned long long>(table_offset));
  const uint8_t* table = data + kCacheHeaderSize;
  KILN_CHECK_OR_RETURN(header_hash(data, table, table_size) == load64(data + 120), InvalidProgram,
                       "its header or entry table is corrupted (hash mismatch)");
  const uint64_t data_begin = kCacheHeaderSize + table_size;
  out->clear();
  out->reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t* r = table + i * kEntrySize;
    PackedCacheEntry e;
    e.source_offset = load64(r);
    e.source_bytes = load64(r + 8);
    const uint64_t offset = load64(r + 16);
    e.bytes = load64(r + 24);
    e.data_hash = load64(r + 32);
    KILN_CHECK_OR_RETURN(
        get_string(r + 40, kLayoutField, &e.layout) && get_string(r + 40 + kLayoutField, kPackerField, &e.packer),
        InvalidProgram, "entry %llu has a malformed layout or packer name", static_cast<unsigned long long>(i));
    KILN_CHECK_OR_RETURN(offset % kDataAlignment == 0 && offset >= data_begin && e.bytes > 0 && offset <= size &&
                             e.bytes <= size - offset,
                         InvalidProgram, "entry %llu (%s): %llu bytes at %llu lie outside the file or are misaligned",
                         static_cast<unsigned long long>(i), e.layout.c_str(), static_cast<unsigned long long>(e.bytes),
                         static_cast<unsigned long long>(offset));
    e.data = data + offset;
    out->push_back(std::move(e));
  }
  return Status::ok();
}
}  // namespace

Status PackedCacheFile::check_bytes(const uint8_t* data, size_t size, const PackedCacheKey& key) {
  std::vector<PackedCacheEntry> entries;
  KILN_RETURN_IF_ERROR(parse_cache(data, size, key, &entries));
  for (const PackedCacheEntry& e : entries) {
    KILN_CHECK_OR_RETURN(verify(e), InvalidProgram, "the bytes of %s are corrupted", e.layout.c_str());
  }
  return Status::ok();
}

Result<std::unique_ptr<PackedCacheFile>> PackedCacheFile::open(const std::string& path, const PackedCacheKey& key) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return Status(err == ENOENT ? Error::NotFound : Error::IoError, format("cannot open: %s", std::strerror(err)));
  }
  struct stat st;
  const bool stat_ok = ::fstat(fd, &st) == 0;
  // Only a file this user wrote and nobody else can change is used: its bytes
  // are executed by kernels as panels, checked by hash, not by meaning.
  Status trust = !stat_ok                   ? Status(Error::IoError, "cannot stat it")
                 : !S_ISREG(st.st_mode)     ? Status(Error::InvalidProgram, "it is not a regular file")
                 : st.st_uid != ::geteuid() ? Status(Error::InvalidProgram, "another user owns it")
                 : (st.st_mode & 022) != 0  ? Status(Error::InvalidProgram, "others may write to it")
                                            : Status::ok();
  if (!trust.is_ok()) {
    ::close(fd);
    return trust;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kCacheHeaderSize) {
    ::close(fd);
    return Status(Error::InvalidProgram, format("it is %zu bytes, shorter than its header", size));
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) return Status(Error::IoError, format("cannot map it: %s", std::strerror(errno)));
  std::unique_ptr<PackedCacheFile> file(new PackedCacheFile());
  file->data_ = static_cast<const uint8_t*>(addr);
  file->size_ = size;
  file->parsed_ = std::make_unique<Parsed>();
  KILN_RETURN_IF_ERROR(parse_cache(file->data_, size, key, &file->parsed_->entries));
  return file;
}

PackedCacheFile::~PackedCacheFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

size_t PackedCacheFile::num_entries() const { return parsed_->entries.size(); }
const PackedCacheEntry& PackedCacheFile::entry(size_t i) const { return parsed_->entries[i]; }

bool packed_cache_can_name(const std::string& layout, const std::string& packer) {
  return !layout.empty() && !packer.empty() && layout.size() < kLayoutField && packer.size() < kPackerField;
}

const PackedCacheEntry* PackedCacheFile::find(uint64_t source_offset, uint64_t source_bytes, const std::string& layout,
                                              const std::string& packer, uint64_t bytes) const {
  for (const PackedCacheEntry& e : parsed_->entries) {
    if (e.source_offset == source_offset && e.source_bytes == source_bytes && e.bytes == bytes && e.layout == layout &&
        e.packer == packer) {
      return &e;
    }
  }
  return nullptr;
}

bool PackedCacheFile::verify(const PackedCacheEntry& e) { return hash_bytes(e.data, e.bytes) == e.data_hash; }

namespace {
Status write_all(int fd, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t got = ::write(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Status(Error::IoError, format("write failed: %s", std::strerror(errno)));
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status::ok();
}
}  // namespace

Status write_packed_cache(const std::string& directory, const PackedCacheKey& key, const PackedCacheEntry* entries,
                          size_t n) {
  std::vector<uint8_t> head(kCacheHeaderSize + n * kEntrySize, 0);
  uint8_t* h = head.data();
  std::memcpy(h, kCacheMagic, 8);
  put32(h + 8, kCacheVersion);
  put32(h + 12, static_cast<uint32_t>(n));
  put_key(h + 16, key);
  put_string(h + 72, kVersionField, KILN_VERSION_STRING);
  put64(h + 96, kCacheHeaderSize);
  put64(h + 104, n * kEntrySize);
  uint64_t offset = (head.size() + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  for (size_t i = 0; i < n; ++i) {
    const PackedCacheEntry& e = entries[i];
    KILN_CHECK_OR_RETURN(packed_cache_can_name(e.layout, e.packer), InvalidArgument,
                         "layout '%s' or packer '%s' does not fit the cache's fields", e.layout.c_str(),
                         e.packer.c_str());
    uint8_t* r = h + kCacheHeaderSize + i * kEntrySize;
    put64(r, e.source_offset);
    put64(r + 8, e.source_bytes);
    put64(r + 16, offset);
    put64(r + 24, e.bytes);
    put64(r + 32, hash_bytes(e.data, e.bytes));
    put_string(r + 40, kLayoutField, e.layout);
    put_string(r + 40 + kLayoutField, kPackerField, e.packer);
    offset = (offset + e.bytes + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  }
  // The last entry ends the file (no padding after it).
  const uint64_t file_size =
      n == 0 ? head.size() : load64(h + kCacheHeaderSize + (n - 1) * kEntrySize + 16) + entries[n - 1].bytes;
  put64(h + 112, file_size);
  put64(h + 120, header_hash(h, h + kCacheHeaderSize, n * kEntrySize));

  static std::atomic<unsigned> counter{0};
  const std::string name = key.file_name();
  const std::string tmp =
      format("%s/.%s.%d.%u.tmp", directory.c_str(), name.c_str(), static_cast<int>(::getpid()), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status(Error::IoError, format("cannot create '%s': %s", tmp.c_str(), std::strerror(errno)));
  Status st = write_all(fd, head.data(), head.size());
  uint64_t at = head.size();
  static const uint8_t zeros[kDataAlignment] = {};
  for (size_t i = 0; i < n && st.is_ok(); ++i) {
    const uint64_t want = load64(h + kCacheHeaderSize + i * kEntrySize + 16);
    st = write_all(fd, zeros, want - at);
    if (st.is_ok()) st = write_all(fd, entries[i].data, entries[i].bytes);
    at = want + entries[i].bytes;
  }
  if (::close(fd) != 0 && st.is_ok()) st = Status(Error::IoError, format("close failed: %s", std::strerror(errno)));
  if (st.is_ok() && ::rename(tmp.c_str(), (directory + "/" + name).c_str()) != 0) {
    st = Status(Error::IoError, format("cannot rename '%s': %s", tmp.c_str(), std::strerror(errno)));
  }
  if (!st.is_ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace kiln::internal
