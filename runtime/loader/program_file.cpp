// Reading the .kiln header, and mapping or copying the file's bytes.
#include "loader/program_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kiln::internal {
namespace {

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));  // the format is little-endian, like every supported host
  return v;
}
uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// [offset, offset + length) lies inside [0, size) without overflow.
bool region_fits(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

}  // namespace

Result<FileHeader> parse_header(const uint8_t* data, size_t size) {
  KILN_CHECK_OR_RETURN(size >= kHeaderSize, InvalidProgram, "file is %zu bytes, smaller than the %zu-byte header", size,
                       kHeaderSize);
  KILN_CHECK_OR_RETURN(std::memcmp(data, kMagic, sizeof(kMagic)) == 0, InvalidProgram,
                       "not a kiln program (bad magic at offset 0)");
  FileHeader h;
  h.format_version = read_u32(data + 8);
  uint32_t header_size = read_u32(data + 12);
  h.flatbuffer_offset = read_u64(data + 16);
  h.flatbuffer_size = read_u64(data + 24);
  h.segments_offset = read_u64(data + 32);
  h.segments_size = read_u64(data + 40);
  h.file_size = read_u64(data + 48);
  KILN_CHECK_OR_RETURN(h.format_version == kFormatVersion, InvalidProgram,
                       "format version %u is not supported (this runtime reads version %u)", h.format_version,
                       kFormatVersion);
  KILN_CHECK_OR_RETURN(header_size == kHeaderSize, InvalidProgram, "header size %u, expected %zu", header_size,
                       kHeaderSize);
  KILN_CHECK_OR_RETURN(h.file_size == size, InvalidProgram,
                       "header says the file is %llu bytes but it is %zu (truncated or padded?)",
                       static_cast<unsigned long long>(h.file_size), size);
  KILN_CHECK_OR_RETURN(h.flatbuffer_offset >= kHeaderSize && h.flatbuffer_offset % 8 == 0 &&
                           region_fits(h.flatbuffer_offset, h.flatbuffer_size, size),
                       InvalidProgram, "program table [%llu, +%llu) lies outside the %zu-byte file",
                       static_cast<unsigned long long>(h.flatbuffer_offset),
                       static_cast<unsigned long long>(h.flatbuffer_size), size);
  // FlatBuffers addresses at most 2 GiB; larger claims are corrupt.
  KILN_CHECK_OR_RETURN(h.flatbuffer_size >= 8 && h.flatbuffer_size < (uint64_t{1} << 31), InvalidProgram,
                       "program table size %llu is out of range", static_cast<unsigned long long>(h.flatbuffer_size));
  KILN_CHECK_OR_RETURN(
      h.segments_offset % kSegmentAlignment == 0 && h.segments_offset >= h.flatbuffer_offset + h.flatbuffer_size &&
          region_fits(h.segments_offset, h.segments_size, size),
      InvalidProgram, "segment area [%llu, +%llu) is misplaced in the %zu-byte file",
      static_cast<unsigned long long>(h.segments_offset), static_cast<unsigned long long>(h.segments_size), size);
  return h;
}

namespace {

// Reads up to `n` bytes at `offset`; returns how many it read (less at the end of the file).
Result<size_t> read_at(int fd, uint8_t* dst, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status(Error::IoError, format("cannot read '%s': %s", path.c_str(), std::strerror(errno)));
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

uint8_t* allocate_aligned(size_t size) {
  size_t rounded = (size + kSegmentAlignment - 1) / kSegmentAlignment * kSegmentAlignment;
  return static_cast<uint8_t*>(std::aligned_alloc(kSegmentAlignment, rounded == 0 ? kSegmentAlignment : rounded));
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::unique_ptr<ProgramBytes>> ProgramBytes::open_file(const std::string& path, bool map_file) {
  KILN_CHECK_OR_RETURN(path.find('\0') == std::string::npos, InvalidArgument, "the path '%s...' contains a NUL byte",
                       path.c_str());
  // O_NONBLOCK: opening a FIFO must not wait for a writer before the type check
  // below refuses it. It changes nothing for the regular files read here.
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) {
    int err = errno;
    return Status(err == ENOENT ? Error::NotFound : Error::IoError,
                  format("cannot open '%s': %s", path.c_str(), std::strerror(err)));
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) {
    return Status(Error::IoError, format("cannot stat '%s': %s", path.c_str(), std::strerror(errno)));
  }
  KILN_CHECK_OR_RETURN(S_ISREG(st.st_mode), InvalidArgument, "'%s' is not a regular file", path.c_str());
  const size_t size = static_cast<size_t>(st.st_size);
  KILN_CHECK_OR_RETURN(size > 0, InvalidProgram, "'%s' is empty", path.c_str());

  if (!map_file) {
    uint8_t* copy = allocate_aligned(size);
    KILN_CHECK_OR_RETURN(copy != nullptr, OutOfMemory, "cannot allocate %zu bytes to read '%s'", size, path.c_str());
    std::unique_ptr<ProgramBytes> bytes(new ProgramBytes(Kind::Owned, copy, size));
    Result<size_t> got = read_at(f.fd, copy, size, 0, path);
    if (!got.ok()) return got.status();
    bytes->size_ = got.value();  // a file that shrank meanwhile fails the header's size check
    return bytes;
  }

  // The structure, read (not mapped): the header first, to learn how far the
  // program table goes.
  uint8_t head[kHeaderSize];
  Result<size_t> got = read_at(f.fd, head, kHeaderSize, 0, path);
  if (!got.ok()) return got.status();
  Result<FileHeader> header = parse_header(head, got.value() < kHeaderSize ? got.value() : size);
  if (!header.ok()) return Status(header.status()).with_context("'" + path + "'");
  const size_t structure = static_cast<size_t>(header->flatbuffer_offset + header->flatbuffer_size);

  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (addr == MAP_FAILED) {
    return Status(Error::IoError, format("cannot map '%s': %s", path.c_str(), std::strerror(errno)));
  }
  std::unique_ptr<ProgramBytes> bytes(new ProgramBytes(Kind::Mapped, static_cast<const uint8_t*>(addr), size));
  bytes->structure_ = allocate_aligned(structure);
  KILN_CHECK_OR_RETURN(bytes->structure_ != nullptr, OutOfMemory, "cannot allocate %zu bytes for the program table",
                       structure);
  got = read_at(f.fd, bytes->structure_, structure, 0, path);
  if (!got.ok()) return got.status();
  KILN_CHECK_OR_RETURN(got.value() == structure, InvalidProgram,
                       "'%s' is %zu bytes, shorter than its program table claims (it changed while loading?)",
                       path.c_str(), got.value());
  bytes->structure_size_ = structure;
  const auto ns = [](const struct timespec& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
  };
  bytes->identity_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
  return bytes;
}

Result<std::unique_ptr<ProgramBytes>> ProgramBytes::from_buffer(const void* data, size_t size) {
  KILN_CHECK_OR_RETURN(data != nullptr || size == 0, InvalidArgument, "null buffer of %zu bytes", size);
  if (reinterpret_cast<uintptr_t>(data) % kSegmentAlignment == 0 && data != nullptr) {
    return std::unique_ptr<ProgramBytes>(new ProgramBytes(Kind::Borrowed, static_cast<const uint8_t*>(data), size));
  }
  return copy_of(data, size);
}

Result<std::unique_ptr<ProgramBytes>> ProgramBytes::copy_of(const void* data, size_t size) {
  KILN_CHECK_OR_RETURN(data != nullptr || size == 0, InvalidArgument, "null buffer of %zu bytes", size);
  uint8_t* copy = allocate_aligned(size);
  KILN_CHECK_OR_RETURN(copy != nullptr, OutOfMemory, "cannot copy a %zu-byte program", size);
  if (size > 0) std::memcpy(copy, data, size);
  return std::unique_ptr<ProgramBytes>(new ProgramBytes(Kind::Owned, static_cast<const uint8_t*>(copy), size));
}

void ProgramBytes::release_pages(const void* begin, size_t n) const {
  if (kind_ != Kind::Mapped || n == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + n) / page * page;
  // A clean private file mapping: dropped pages fault back in from the file.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

ProgramBytes::~ProgramBytes() {
  std::free(structure_);
  if (kind_ == Kind::Mapped) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
  } else if (kind_ == Kind::Owned) {
    std::free(const_cast<uint8_t*>(data_));
  }
}

}  // namespace kiln::internal
