// Detecting a second copy of the runtime in the process.
//
// Every copy of the runtime, shared or embedded statically in another module,
// carries the ELF note below. Notes live in PT_NOTE segments, which are mapped
// and listed by dl_iterate_phdr whatever the symbol visibility, so a copy that
// hides all its symbols is found as surely as a second libkiln.so.0.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/log.h"
#include "kiln/registry.h"
#include "registry/registry_internal.h"

namespace kiln {
namespace {

constexpr uint32_t kNoteType = 0x4b4c4e31;  // "KLN1"

struct RuntimeNote {
  uint32_t name_size;
  uint32_t desc_size;
  uint32_t type;
  char name[8];  // "kiln\0" padded to 4-byte multiple
  uint32_t abi_version;
};

__attribute__((used, section(".note.kiln.runtime"), aligned(4)))
const RuntimeNote kRuntimeNote = {5, 4, kNoteType, "kiln", KILN_ABI_VERSION};

// Walks the notes of one PT_NOTE segment's bytes.
bool notes_have_runtime(const char* p, const char* end) {
  while (static_cast<size_t>(end - p) >= sizeof(ElfW(Nhdr))) {
    ElfW(Nhdr) nh;
    std::memcpy(&nh, p, sizeof(nh));
    const char* name = p + sizeof(nh);
    size_t name_padded = (nh.n_namesz + 3u) & ~size_t{3};
    size_t desc_padded = (nh.n_descsz + 3u) & ~size_t{3};
    if (name_padded + desc_padded > static_cast<size_t>(end - name)) break;
    if (nh.n_type == kNoteType && nh.n_namesz == 5 && std::memcmp(name, "kiln", 5) == 0) return true;
    p = name + name_padded + desc_padded;
  }
  return false;
}

bool has_runtime_note(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) & ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    if (notes_have_runtime(p, p + ph.p_memsz)) return true;
  }
  return false;
}

std::string object_path(const dl_phdr_info* info) {
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') return info->dlpi_name;
  char buffer[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string("<main program>");
}

}  // namespace

namespace internal {

bool file_carries_runtime(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  bool found = false;
  ElfW(Ehdr) eh;
  if (std::fread(&eh, sizeof(eh), 1, f) == 1 && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32) && eh.e_phentsize == sizeof(ElfW(Phdr))) {
    for (unsigned i = 0; i < eh.e_phnum && !found; ++i) {
      ElfW(Phdr) ph;
      if (std::fseek(f, static_cast<long>(eh.e_phoff + i * sizeof(ph)), SEEK_SET) != 0 ||
          std::fread(&ph, sizeof(ph), 1, f) != 1) {
        break;
      }
      // Notes are small; a huge PT_NOTE is not ours and is not read.
      if (ph.p_type != PT_NOTE || ph.p_filesz == 0 || ph.p_filesz > (1u << 16)) continue;
      std::vector<char> bytes(ph.p_filesz);
      if (std::fseek(f, static_cast<long>(ph.p_offset), SEEK_SET) == 0 &&
          std::fread(bytes.data(), 1, bytes.size(), f) == bytes.size()) {
        found = notes_have_runtime(bytes.data(), bytes.data() + bytes.size());
      }
    }
  }
  std::fclose(f);
  return found;
}

}  // namespace internal

std::vector<std::string> runtime_copies() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (has_runtime_note(info)) static_cast<std::vector<std::string>*>(data)->push_back(object_path(info));
        return 0;
      },
      &paths);
  return paths;
}

namespace {
// When this copy of the runtime initializes, say so at once if another copy is
// already in the process (logged; program loading then fails with the error).
[[maybe_unused]] const bool kCheckedAtLoad = check_single_runtime().is_ok();
}  // namespace

Status check_single_runtime() {
  std::vector<std::string> copies = runtime_copies();
  if (copies.size() <= 1) return Status::ok();
  std::string list;
  for (const std::string& p : copies) list += (list.empty() ? "" : ", ") + p;
  Status status(Error::DuplicateRuntime,
                format("%zu copies of the kiln runtime are loaded (%s); each would keep its own kernel and "
                       "backend registries. Link every library against libkiln.so.0 instead of embedding the runtime",
                       copies.size(), list.c_str()));
  log(LogLevel::Error, "%s", status.message().c_str());
  return status;
}

}  // namespace kiln
