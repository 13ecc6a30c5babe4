// Private view of the kernel and backend registries, for the executor and the plugin loader.
#pragma once

#include <string>
#include <vector>

#include "kiln/backend.h"
#include "kiln/kernel.h"
#include "kiln/registry.h"

namespace kiln::internal {

struct KernelEntry {
  std::string op_name;
  std::string dtypes;  // canonical signature ("f32,f32") or "*"
  KernelRunFn run;
  KernelPrepareFn prepare;
  KernelReleaseFn release;
  std::string library;
  int32_t tier;
};

struct BackendEntry {
  BackendDef def;
  std::string name;
  std::string library;
};

// Every kernel that may serve an operator with these input dtypes, highest
// tier first, the exact signature before "*" within a tier; empty if none.
// Entries are never removed, so the pointers stay valid for the process.
std::vector<const KernelEntry*> find_kernels(const std::string& op_name, const std::vector<ScalarType>& dtypes);
const BackendEntry* find_backend(const std::string& name);

// "f32,i64" for the given dtypes ("" for none).
std::string signature_string(const std::vector<ScalarType>& dtypes);

// Registrations happen in a global order; the plugin loader uses it to tell
// which ones a library made while it was being opened.
struct RegistrationRecord {
  bool is_kernel;
  KernelInfo kernel;    // when is_kernel
  BackendInfo backend;  // otherwise
  bool accepted;
  RegistrationFailure failure;  // when !accepted
};
size_t registration_count();
std::vector<RegistrationRecord> registrations_since(size_t first);

// The file that defines `address` (dladdr), or "<unknown>".
std::string library_of(const void* address);

// True if the ELF file at `path` carries the runtime's note (it embeds a copy
// of the runtime). Reads program headers only; runs none of the file's code.
bool file_carries_runtime(const std::string& path);

}  // namespace kiln::internal
