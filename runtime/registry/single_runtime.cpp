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
#include <cstring>
#include <string>
#include <vector>

#include "kiln/log.h"
#include "kiln/registry.h"

namespace kiln {
namespace {

constexpr uint32_t kNoteType = 0x4b4c4e31;  // "KLN1"

struct RuntimeNote {
  uint32_t name_size;
  uint32_t desc_size;
  uint32_t type;
  char name[8];   // "kiln\0" padded to 4-byte multiple
  uint32_t abi_version;
};

__attribute__((used, section(".note.kiln.runtime"), aligned(4)))
const RuntimeNote kRuntimeNote = {5, 4, kNoteType, "kiln", KILN_ABI_VERSION};

bool has_runtime_note(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, p, sizeof(nh));
      const char* name = p + sizeof(nh);
      size_t name_padded = (nh.n_namesz + 3u) & ~size_t{3};
      size_t desc_padded = (nh.n_descsz + 3u) & ~size_t{3};
      if (name + name_padded + desc_padded > end) break;
      if (nh.n_type == kNoteType && nh.n_namesz == 5 && std::memcmp(name, "kiln", 5) == 0) return true;
      p = name + name_padded + desc_padded;
    }
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
