// The bytes of a .kiln file (mapped, borrowed or copied) and its fixed header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/error.h"

namespace kiln::internal {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'R', 'G', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 64;
constexpr size_t kSegmentAlignment = 64;

// The header fields after validation: every region lies inside the file.
struct FileHeader {
  uint32_t format_version = 0;
  uint64_t flatbuffer_offset = 0;
  uint64_t flatbuffer_size = 0;
  uint64_t segments_offset = 0;
  uint64_t segments_size = 0;
  uint64_t file_size = 0;
};

// Checks magic, version and that the regions the header names fit the actual
// `size` before anything else reads the file.
Result<FileHeader> parse_header(const uint8_t* data, size_t size);

// Owns (or borrows) the program bytes; the address is 64-byte aligned.
//
// A mapped file can change under the mapping after load (another process
// writes or truncates it). So that what the verifier checked cannot change, the
// structure of a mapped file (the header and the program table: everything
// before the segments) is read with pread() into private memory, and only the
// constant segments are used in place from the mapping.
class ProgramBytes {
 public:
  // What fstat said of a mapped file at open (the packed-weight cache's key).
  struct FileIdentity {
    uint64_t device = 0, inode = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
  };
  // Opens `path` (a regular file; refused before any read otherwise) and maps
  // it, or with map_file = false reads all of it into memory it owns.
  static Result<std::unique_ptr<ProgramBytes>> open_file(const std::string& path, bool map_file);
  // Borrows `data` when 64-byte aligned, else copies it into aligned memory.
  static Result<std::unique_ptr<ProgramBytes>> from_buffer(const void* data, size_t size);
  // Always copies into memory it owns.
  static Result<std::unique_ptr<ProgramBytes>> copy_of(const void* data, size_t size);
  ~ProgramBytes();
  ProgramBytes(const ProgramBytes&) = delete;
  ProgramBytes& operator=(const ProgramBytes&) = delete;

  // Every byte of the program (the segments are read from here).
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // The bytes [0, structure_size()) to parse and verify the header and program
  // table from: a private copy for a mapped file, else data().
  const uint8_t* structure() const { return structure_ != nullptr ? structure_ : data_; }
  size_t structure_size() const { return structure_ != nullptr ? structure_size_ : size_; }
  // Drops the resident pages that lie wholly inside [begin, begin + n) when the
  // bytes are a mapping of the file (they are read back from the file if
  // touched again); does nothing for owned or borrowed memory.
  void release_pages(const void* begin, size_t n) const;
  // The mapped file's identity; null for owned or borrowed bytes.
  const FileIdentity* file_identity() const { return kind_ == Kind::Mapped ? &identity_ : nullptr; }

 private:
  enum class Kind { Mapped, Owned, Borrowed };
  ProgramBytes(Kind kind, const uint8_t* data, size_t size) : kind_(kind), data_(data), size_(size) {}
  Kind kind_;
  const uint8_t* data_;
  size_t size_;
  uint8_t* structure_ = nullptr;  // owned, mapped files only
  size_t structure_size_ = 0;
  FileIdentity identity_;  // mapped files only
};

}  // namespace kiln::internal
