/* One process, two ways into the runtime: the C API counts the registered kernels and loads a
   plugin, then the Python interpreter this program embeds imports kiln, which must see the same
   registry (the plugin's kernel included) and one runtime (kiln.runtime_copies()).
   Usage: embed_python PLUGIN KERNEL_NAME (tests/test_c_api.py builds and runs it). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

#include <kiln/c_api.h>

static int failed(const kiln_api_base* base, kiln_status* status, const char* what) {
  fprintf(stderr, "%s: %s\n", what, base->status_message(status));
  base->status_free(status);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: embed_python PLUGIN KERNEL_NAME\n");
    return 2;
  }
  const kiln_api_base* base = kiln_get_api_base();
  kiln_status* status = NULL;
  const kiln_api* api = base->get_api(KILN_C_API_VERSION, &status);
  if (api == NULL) return failed(base, status, "get_api");
  size_t before = 0, after = 0, kernels = 0, backends = 0;
  if ((status = api->registered_kernel_count(&before)) != NULL) return failed(base, status, "registered_kernel_count");
  if ((status = api->load_library(argv[1], &kernels, &backends)) != NULL) return failed(base, status, "load_library");
  if ((status = api->registered_kernel_count(&after)) != NULL) return failed(base, status, "registered_kernel_count");
  printf("C: %zu kernels, %zu after the plugin (%zu kernels, %zu backends)\n", before, after, kernels, backends);
  fflush(stdout); /* before the interpreter writes to the same stream */

  /* Importing kiln loads the Python extension and the extension libraries it links, which register
     their own kernels: the counts are compared once those are in, from both sides. */
  Py_Initialize();
  char code[1024];
  snprintf(code, sizeof code,
           "import kiln\n"
           "n = len(kiln.registered_kernels())\n"
           "assert '%s' in {k.op_name for k in kiln.registered_kernels()}, 'the plugin loaded through C is not "
           "registered for Python'\n"
           "assert n >= %zu, ('Python counts', n, 'the C API counted', %zu, 'before the import')\n"
           "assert len(kiln.runtime_copies()) == 1, kiln.runtime_copies()\n"
           "print('Python:', n, 'kernels, one runtime:', kiln.runtime_copies()[0])\n",
           argv[2], after, after);
  int rc = PyRun_SimpleString(code);
  size_t python_count = 0, now = 0;
  if (rc == 0) {
    PyObject* n = PyObject_GetAttrString(PyImport_AddModule("__main__"), "n");
    python_count = n != NULL ? PyLong_AsSize_t(n) : 0;
    Py_XDECREF(n);
  }
  if (Py_FinalizeEx() < 0) rc = 1;
  if ((status = api->registered_kernel_count(&now)) != NULL) return failed(base, status, "registered_kernel_count");
  printf("C after the import: %zu kernels\n", now);
  if (rc == 0 && now != python_count) {
    fprintf(stderr, "the C API counts %zu kernels, Python %zu\n", now, python_count);
    rc = 1;
  }
  return rc == 0 && after == before + kernels ? 0 : 1;
}
