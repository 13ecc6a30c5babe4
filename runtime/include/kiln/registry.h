// Introspection of the process-wide registries, and loading plugin libraries.
#pragma once

#include <string>
#include <vector>

#include "kiln/api.h"
#include "kiln/error.h"

namespace kiln {

struct KernelInfo {
  std::string op_name;  // "aten::linear.default"
  std::string dtypes;   // "f32,f32,f32" or "*"
  std::string library;  // file that registered it (dladdr of its run function)
  int32_t tier = 0;     // kTierPortable, kTierOptimized, or a plugin's own (kernel.h)
};

struct BackendInfo {
  std::string name;
  std::string library;
};

// A registration that was refused (collision, ABI mismatch, malformed).
struct RegistrationFailure {
  std::string what;     // "kernel aten::relu.default [f32]" or "backend foo"
  std::string library;  // the refused registrant's file
  Status status;
};

KILN_API std::vector<KernelInfo> registered_kernels();
KILN_API std::vector<BackendInfo> registered_backends();
KILN_API std::vector<RegistrationFailure> registration_failures();

// What one library added to the registries when it was loaded.
struct LibraryInfo {
  std::string path;
  std::vector<KernelInfo> kernels;
  std::vector<BackendInfo> backends;
};

// dlopens a library whose static initializers register kernels or backends.
// Fails with NotFound if it cannot be opened, with the first refused
// registration's error (e.g. RegistrationConflict naming both libraries) if any
// was refused, and with InvalidArgument if it registered nothing. Loading the
// same file twice returns what it registered the first time.
KILN_API Result<LibraryInfo> load_library(const std::string& path);

// Path of the file that holds the registries (libkiln.so.0, or the module that
// embeds the runtime in a static build).
KILN_API std::string runtime_library_path();

// Every loaded file that carries a copy of the runtime (each copy has an ELF
// note that identifies it, visible whatever its symbol visibility).
KILN_API std::vector<std::string> runtime_copies();
// DuplicateRuntime, naming every copy, if more than one is loaded (also logged).
// Program loading and load_library check this, so a process that somehow got a
// second copy fails loudly instead of registering into a registry nobody reads.
KILN_API Status check_single_runtime();

// Loads each file named in the colon-separated KILN_PLUGIN_PATH once per
// process (the runtime does this before it loads its first program). Returns
// what was loaded; a file that fails is logged and its error returned after
// the others were tried.
KILN_API Result<std::vector<LibraryInfo>> load_plugins_from_env();

}  // namespace kiln
