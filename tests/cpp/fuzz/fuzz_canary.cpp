// fuzz_canary: a deliberate heap overflow behind a four-byte comparison. A
// bounded fuzz run must find it: the positive control of tests/test_fuzz.py
// (without it, a harness that never reports crashes would pass).
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 4 && std::memcmp(data, "KILN", 4) == 0) {
    char* block = new char[4];
    volatile char c = block[size];  // out of bounds: size >= 4
    (void)c;
    delete[] block;
  }
  return 0;
}
