// InputFile: the one way libkiln_llm opens a file (file.h), with runtime/loader's checks.
#include "file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kiln::llm::internal {

Result<InputFile> InputFile::open(const std::string& path, const char* what, uint64_t min_size, uint64_t max_size) {
  KILN_CHECK_OR_RETURN(path.find('\0') == std::string::npos, InvalidArgument,
                       "the path '%s...' of a %s contains a NUL byte", path.c_str(), what);
  // O_NONBLOCK: opening a FIFO must not wait for a writer before the type check
  // below refuses it. It changes nothing for the regular files read here.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    return Status(err == ENOENT ? Error::NotFound : Error::IoError,
                  format("cannot open '%s': %s", path.c_str(), std::strerror(err)));
  }
  InputFile file(fd, 0, path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return Status(Error::IoError, format("cannot stat '%s': %s", path.c_str(), std::strerror(errno)));
  }
  KILN_CHECK_OR_RETURN(S_ISREG(st.st_mode), InvalidArgument, "'%s' is not a regular file (a %s must be one)",
                       path.c_str(), what);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  KILN_CHECK_OR_RETURN(size >= min_size, InvalidProgram, "'%s' is %llu bytes, too small for a %s header (truncated?)",
                       path.c_str(), static_cast<unsigned long long>(size), what);
  KILN_CHECK_OR_RETURN(size <= max_size, InvalidArgument, "'%s' is %llu bytes; a %s may have at most %llu",
                       path.c_str(), static_cast<unsigned long long>(size), what,
                       static_cast<unsigned long long>(max_size));
  file.size_ = static_cast<size_t>(size);
  return file;
}

Result<std::string> InputFile::read_all() const {
  std::string out(size_, '\0');
  size_t done = 0;
  while (done < size_) {
    ssize_t r = ::pread(fd_, &out[done], size_ - done, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status(Error::IoError, format("cannot read '%s': %s", path_.c_str(), std::strerror(errno)));
    if (r == 0) {
      return Status(Error::IoError,
                    format("'%s' shrank from %zu to %zu bytes while being read", path_.c_str(), size_, done));
    }
    done += static_cast<size_t>(r);
  }
  return out;
}

Result<const uint8_t*> InputFile::map() const {
  KILN_CHECK_OR_RETURN(size_ > 0, Internal, "mapping the empty file '%s'", path_.c_str());
  void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (addr == MAP_FAILED) {
    return Status(Error::IoError, format("cannot map '%s': %s", path_.c_str(), std::strerror(errno)));
  }
  return static_cast<const uint8_t*>(addr);
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kiln::llm::internal
