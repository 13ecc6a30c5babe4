// Prints every kernel registered in the process: "kernel <op> <dtypes>".
#include <kiln/kiln.h>

#include <cstdio>

int main() {
  std::vector<kiln::KernelInfo> kernels = kiln::registered_kernels();
  for (const kiln::KernelInfo& k : kernels) std::printf("kernel %s %s\n", k.op_name.c_str(), k.dtypes.c_str());
  std::printf("kernels %zu, runtime %s\n", kernels.size(), kiln::runtime_library_path().c_str());
  return kernels.empty() ? 1 : 0;
}
