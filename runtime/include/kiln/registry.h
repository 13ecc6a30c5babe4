// Introspection of the process-wide registries, and loading plugin libraries.
#pragma once

#include <string>
#include <vector>

#include "kiln/api.h"
#include "kiln/error.h"

namespace kiln {

struct KernelInfo {
  std::string op_name;   // "aten::linear.default"
  std::string dtypes;    // "f32,f32,f32" or "*"
  std::string library;   // file that registered it (dladdr of its run function)
};

struct BackendInfo {
  std::string name;
  std::string library;
};

// A registration that was refused (collision, ABI mismatch, malformed).
struct RegistrationFailure {
  std::string what;      // "kernel aten::relu.default [f32]" or "backend foo"
  std::string library;   // the refused registrant's file
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

}  // namespace kiln
