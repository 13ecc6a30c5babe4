// Prints the registry owner and every kernel that is not the runtime's own.
#include <kiln/kiln.h>

#include <cstdio>

int main() {
  std::string runtime = kiln::runtime_library_path();
  std::printf("runtime %s\n", runtime.c_str());
  std::printf("copies %zu\n", kiln::runtime_copies().size());
  for (const kiln::KernelInfo& k : kiln::registered_kernels()) {
    if (k.library != runtime)
      std::printf("kernel %s [%s] %s\n", k.op_name.c_str(), k.dtypes.c_str(), k.library.c_str());
  }
  return 0;
}
