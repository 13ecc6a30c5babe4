// The positive control of tests/test_sanitizers.py: commits, on request, one error
// that only an instrumented build reports, so that the clean runs of the other
// programs prove something.
//   sanitizer_canary heap-overflow     reads one byte past a heap block (ASan)
//   sanitizer_canary signed-overflow   overflows an int (UBSan)
//   sanitizer_canary data-race         two threads write one int without a lock (TSan)
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sanitizer_canary heap-overflow|signed-overflow|data-race\n");
    return 2;
  }
  // Sizes and values come from argc (2) and a volatile, so the compiler can neither
  // prove the error nor drop it.
  if (std::strcmp(argv[1], "heap-overflow") == 0) {
    char* block = new char[argc * 4];
    std::memset(block, 1, argc * 4);
    // Read through a pointer the compiler cannot follow: UBSan's object-size check (on in clang's
    // builds) would otherwise report the read first, and the test wants ASan's report.
    char* volatile escaped = block;
    const int past_the_end = escaped[argc * 4];
    delete[] block;
    return past_the_end;
  }
  if (std::strcmp(argv[1], "signed-overflow") == 0) {
    volatile int largest = INT_MAX;
    const int overflowed = largest + argc;
    return overflowed > 0 ? 0 : 1;
  }
  if (std::strcmp(argv[1], "data-race") == 0) {
    int shared = 0;
    std::thread other([&] {
      for (int i = 0; i < 1000; ++i) shared += argc;
    });
    for (int i = 0; i < 1000; ++i) shared += argc;
    other.join();
    return shared > 0 ? 0 : 1;
  }
  std::fprintf(stderr, "unknown mode '%s'\n", argv[1]);
  return 2;
}
