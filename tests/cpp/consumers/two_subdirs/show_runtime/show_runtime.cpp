// Prints the SDK version it was compiled against and the runtime it loaded.
#include <kiln/kiln.h>

#include <cstdio>

int main() {
  std::printf("version %s, runtime %s\n", KILN_VERSION_STRING, kiln::runtime_library_path().c_str());
  return 0;
}
