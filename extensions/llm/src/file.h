// Opening the files libkiln_llm reads (GGUF, tokenizer.json) with the checks the runtime's loader makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "kiln/error.h"

namespace kiln::llm::internal {

// An open regular file whose size was checked against [min_size, max_size]
// before a byte of it was read. A path with a NUL byte (which the OS would cut
// short and so open another file), a FIFO, a device or a directory is refused
// without waiting (opened O_NONBLOCK, then fstat): kiln never blocks on a
// writer or reads a stream like /dev/zero that has no end.
class InputFile {
 public:
  // `what` names the kind of file in messages ("GGUF file", "tokenizer.json").
  static Result<InputFile> open(const std::string& path, const char* what, uint64_t min_size, uint64_t max_size);

  // Exactly size() bytes read into memory: a file that shrank meanwhile is an
  // IoError, one that grew is read up to the size that was checked.
  Result<std::string> read_all() const;
  // A private read-only mapping of size() bytes; release with ::munmap(ptr, size()).
  Result<const uint8_t*> map() const;

  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

 private:
  InputFile(int fd, size_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace kiln::llm::internal
