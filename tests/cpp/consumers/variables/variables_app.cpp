// Checks that the headers found through KILN_INCLUDE_DIRS are the version CMake reported.
#include <kiln/kiln.h>

#include <cstdio>
#include <cstring>

int main() {
  if (std::strcmp(KILN_VERSION_STRING, CMAKE_KILN_VERSION) != 0) {
    std::fprintf(stderr, "headers say %s, CMake said %s\n", KILN_VERSION_STRING, CMAKE_KILN_VERSION);
    return 1;
  }
  std::printf("version %s, runtime %s\n", KILN_VERSION_STRING, kiln::runtime_library_path().c_str());
  return 0;
}
