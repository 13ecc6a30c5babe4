// A C++ program that links only kiln::runtime (and libpython), starts an
// embedded interpreter, lets Python load a plugin into kiln, then asks the C++
// registry what it sees. Both sides print the file that owns the registry.
//
//   embed_app PLUGIN SITE_DIR PYTHON [--dlopen-first]
//
// PYTHON is the interpreter of the environment kiln is installed in: the
// embedded interpreter takes it as its program name, so it finds that
// environment's site-packages (a virtual environment's pyvenv.cfg included)
// as an application embedding a venv's Python would.
// With --dlopen-first the plugin is dlopen'ed by C++ (RTLD_GLOBAL) before the
// interpreter starts, and Python only imports kiln and looks.
// Output lines: "PY ..." from Python, "CPP ..." from C++.
#include <Python.h>
#include <dlfcn.h>

#include <kiln/kiln.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

const char* kPython = R"PY(
import sys
plugin, site_dir, dlopen_first = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
print("PY site", "present" if site_dir in sys.path else "appended")
if site_dir not in sys.path:
    sys.path.append(site_dir)
import kiln
print("PY kiln", kiln.__file__)
if not dlopen_first:
    lib = kiln.load_library(plugin)
    print("PY loaded", sorted(k.op_name for k in lib.kernels), sorted(b.name for b in lib.backends))
print("PY runtime", kiln.runtime_library_path())
print("PY copies", len(kiln.runtime_copies()))
for k in kiln.registered_kernels():
    if k.op_name.startswith("one_runtime::"):
        print("PY kernel", k.op_name, k.library)
for b in kiln.registered_backends():
    print("PY backend", b.name, b.library)
sys.stdout.flush()
)PY";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s PLUGIN SITE_DIR PYTHON [--dlopen-first]\n", argv[0]);
    return 2;
  }
  bool dlopen_first = argc > 4 && std::strcmp(argv[4], "--dlopen-first") == 0;
  if (dlopen_first && dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 1;
  }

  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.parse_argv = 0;  // sys.argv as given, not Python's own options
  const char* py_argv[] = {argv[0], argv[1], argv[2], dlopen_first ? "1" : "0"};
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, argv[3]);
  if (!PyStatus_Exception(status)) status = PyConfig_SetBytesArgv(&config, 4, const_cast<char**>(py_argv));
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    std::fprintf(stderr, "cannot start Python: %s\n", status.err_msg ? status.err_msg : "?");
    return 1;
  }
  int rc = PyRun_SimpleString(kPython);
  if (rc != 0) {
    std::fprintf(stderr, "the Python part failed\n");
    Py_FinalizeEx();
    return 1;
  }

  // The C++ side of the same registry.
  std::printf("CPP runtime %s\n", kiln::runtime_library_path().c_str());
  std::printf("CPP copies %zu\n", kiln::runtime_copies().size());
  size_t portable = 0;
  for (const kiln::KernelInfo& k : kiln::registered_kernels()) {
    if (k.op_name.rfind("one_runtime::", 0) == 0)
      std::printf("CPP kernel %s %s\n", k.op_name.c_str(), k.library.c_str());
    if (k.op_name == "aten::linear.default") ++portable;
  }
  for (const kiln::BackendInfo& b : kiln::registered_backends()) {
    std::printf("CPP backend %s %s\n", b.name.c_str(), b.library.c_str());
  }
  std::printf("CPP portable_linear %zu\n", portable);
  std::fflush(stdout);
  return Py_FinalizeEx() == 0 ? 0 : 1;
}
