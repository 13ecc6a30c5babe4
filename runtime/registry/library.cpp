// Loading plugin libraries that register kernels and backends, and locating the runtime.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "kiln/log.h"
#include "kiln/registry.h"
#include "registry/registry_internal.h"

namespace kiln {

namespace {
std::mutex g_library_mutex;
struct LoadedLibrary {
  LibraryInfo info;
  Status status;  // the answer the first load gave
};
// dlopen handle -> what that library registered, so a second load is answered the same.
std::map<void*, LoadedLibrary>& loaded_libraries() {
  static auto* libs = new std::map<void*, LoadedLibrary>();
  return *libs;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

const std::string& record_library(const internal::RegistrationRecord& rec) {
  return !rec.accepted ? rec.failure.library : rec.is_kernel ? rec.kernel.library : rec.backend.library;
}

}  // namespace

Result<LibraryInfo> load_library(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_library_mutex);
  KILN_CHECK_OR_RETURN(path.find('\0') == std::string::npos, InvalidArgument,
                       "the library path '%s...' contains a NUL byte", path.c_str());
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    return Status(Error::NotFound, format("library '%s' does not exist", path.c_str()));
  }
  // Reading a FIFO or a device could block or never end.
  KILN_CHECK_OR_RETURN(S_ISREG(st.st_mode), InvalidArgument, "library '%s' is not a regular file", path.c_str());
  // A library that embeds its own copy of the runtime would register into that
  // copy's registries, which nobody reads: refuse it before any of its code runs.
  std::string runtime = runtime_library_path();
  if (!same_file(path, runtime) && internal::file_carries_runtime(path)) {
    return Status(Error::DuplicateRuntime,
                  format("'%s' embeds its own copy of the kiln runtime; this process already runs '%s'. "
                         "Link the library against libkiln.so.0 instead of embedding the runtime",
                         path.c_str(), runtime.c_str()));
  }
  // A library the process loaded already (linked by the app, dlopened, ctypes)
  // ran its static initializers then: its registrations are in the log
  // already, attributed to its file.
  void* already = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  size_t first = already ? 0 : internal::registration_count();
  void* handle = already ? already : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status(Error::InvalidArgument,
                  format("cannot load library '%s': %s", path.c_str(), err ? err : "unknown error"));
  }
  // One of its dependencies may embed the runtime: that shows only once loaded.
  Status single = check_single_runtime();
  if (!single.is_ok()) {
    return Status(single.code(), format("loading '%s': %s", path.c_str(), single.message().c_str()));
  }
  auto known = loaded_libraries().find(handle);
  if (known != loaded_libraries().end()) {
    dlclose(handle);  // drop the extra reference; the library stays loaded
    if (!known->second.status.is_ok()) return Status(known->second.status);
    return known->second.info;
  }

  LibraryInfo info;
  info.path = path;
  Status first_failure;
  for (const auto& rec : internal::registrations_since(first)) {
    if (already && !same_file(record_library(rec), path)) continue;
    if (!rec.accepted) {
      log(LogLevel::Error, "%s", rec.failure.status.message().c_str());
      if (first_failure.is_ok()) first_failure = rec.failure.status;
    } else if (rec.is_kernel) {
      info.kernels.push_back(rec.kernel);
    } else {
      info.backends.push_back(rec.backend);
    }
  }
  // Static initializers already ran: the library cannot be unloaded safely
  // (its accepted registrations point into it), so it stays loaded either way.
  Status status;
  if (!first_failure.is_ok()) {
    status = Status(first_failure.code(), format("loading '%s': %s", path.c_str(), first_failure.message().c_str()));
  } else if (info.kernels.empty() && info.backends.empty()) {
    status = Status(Error::InvalidArgument, format("library '%s' registered no kernel and no backend", path.c_str()));
  }
  loaded_libraries().emplace(handle, LoadedLibrary{info, status});
  if (!status.is_ok()) return status;
  return info;
}

Result<std::vector<LibraryInfo>> load_plugins_from_env() {
  static std::mutex once_mutex;
  static bool done = false;
  static std::vector<LibraryInfo> loaded;
  static Status first_error;
  std::lock_guard<std::mutex> lock(once_mutex);
  if (!done) {
    done = true;
    const char* env = std::getenv("KILN_PLUGIN_PATH");
    std::string list = env ? env : "";
    size_t start = 0;
    while (start < list.size()) {
      size_t colon = list.find(':', start);
      std::string path = list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      start = colon == std::string::npos ? list.size() : colon + 1;
      if (path.empty()) continue;
      Result<LibraryInfo> lib = load_library(path);
      if (lib.ok()) {
        loaded.push_back(lib.value());
      } else {
        log(LogLevel::Error, "KILN_PLUGIN_PATH: %s", lib.status().message().c_str());
        if (first_error.is_ok()) first_error = Status(lib.status()).with_context("KILN_PLUGIN_PATH");
      }
    }
  }
  if (!first_error.is_ok()) return Status(first_error);
  return loaded;
}

std::string runtime_library_path() {
  return internal::library_of(reinterpret_cast<const void*>(&runtime_library_path));
}

}  // namespace kiln
