// Links kiln::quantized (its kernels register before main), lists them from C++, then embeds
// Python: `import kiln` (whose extension links libkiln_quantized.so.0 as well) and
// kiln.load_library(<that library>) must find the same registrations, once each.
//
//   quantized_registry SITE_DIR PYTHON
//
// Output lines: "CPP kernel <op> <dtypes> <tier> <library>", "PY kernel ...", "PY failures <n>".
#include <Python.h>

#include <kiln/kiln.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

const char* kPython = R"PY(
import sys
if sys.argv[1] not in sys.path:
    sys.path.append(sys.argv[1])
import kiln
libraries = {k.library for k in kiln.registered_kernels() if k.op_name.startswith("kiln_quantized::")}
for path in sorted(libraries):
    kiln.load_library(path)  # once more: nothing new may register
for k in kiln.registered_kernels():
    if k.op_name.startswith("kiln_quantized::"):
        print("PY kernel", k.op_name, k.dtypes, k.tier, k.library)
print("PY failures", len(kiln.registration_failures()))
print("PY copies", len(kiln.runtime_copies()))
sys.stdout.flush()
)PY";

void list_cpp(const char* when) {
  for (const kiln::KernelInfo& k : kiln::registered_kernels()) {
    if (k.op_name.rfind("kiln_quantized::", 0) == 0)
      std::printf("CPP%s kernel %s %s %d %s\n", when, k.op_name.c_str(), k.dtypes.c_str(), k.tier, k.library.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SITE_DIR PYTHON\n", argv[0]);
    return 2;
  }
  list_cpp("");
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.parse_argv = 0;
  const char* py_argv[] = {argv[0], argv[1]};
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, argv[2]);
  if (!PyStatus_Exception(status)) status = PyConfig_SetBytesArgv(&config, 2, const_cast<char**>(py_argv));
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    std::fprintf(stderr, "cannot start Python: %s\n", status.err_msg ? status.err_msg : "?");
    return 1;
  }
  const int rc = PyRun_SimpleString(kPython);
  Py_FinalizeEx();
  if (rc != 0) return 1;
  list_cpp(" after");
  std::printf("CPP copies %zu\n", kiln::runtime_copies().size());
  return 0;
}
