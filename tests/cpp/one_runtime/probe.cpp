// extern "C" questions to the C++ side of the registry, for Python's ctypes:
// what does kiln::registered_kernels()/registered_backends() see, and which file
// holds the registry? Strings returned stay valid until the next call.
#include <kiln/kiln.h>

#include <string>

namespace {
thread_local std::string g_answer;
const char* answer(std::string s) {
  g_answer = std::move(s);
  return g_answer.c_str();
}
}  // namespace

extern "C" {

// The library that registered kernel `op_name` ("" if it is not registered).
__attribute__((visibility("default"))) const char* probe_kernel_library(const char* op_name) {
  for (const kiln::KernelInfo& k : kiln::registered_kernels()) {
    if (k.op_name == op_name) return answer(k.library);
  }
  return answer("");
}

// The library that registered backend `name` ("" if it is not registered).
__attribute__((visibility("default"))) const char* probe_backend_library(const char* name) {
  for (const kiln::BackendInfo& b : kiln::registered_backends()) {
    if (b.name == name) return answer(b.library);
  }
  return answer("");
}

__attribute__((visibility("default"))) int probe_num_kernels() {
  return static_cast<int>(kiln::registered_kernels().size());
}

__attribute__((visibility("default"))) const char* probe_runtime_library_path() {
  return answer(kiln::runtime_library_path());
}

// Every copy of the runtime in the process, one per line.
__attribute__((visibility("default"))) const char* probe_runtime_copies() {
  std::string s;
  for (const std::string& p : kiln::runtime_copies()) s += p + "\n";
  return answer(s);
}

}  // extern "C"
