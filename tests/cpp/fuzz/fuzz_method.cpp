// fuzz_method: libFuzzer target for method load (value table, arenas, kernel
// choice and prepare, packed weights, scratch, delegates, initial state). The
// input is a program file; each method that verifies is loaded.
#include <cstddef>
#include <cstdint>

#include "fuzz_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::Result<kiln::Program> program = kiln::Program::load_from_copy(data, size, kiln_fuzz::options());
  if (!program.ok()) return 0;
  for (const std::string& name : program->method_names()) {
    kiln::Result<kiln::Method> method = program->load_method(name);
    if (method.ok()) (void)method->instructions();
  }
  return 0;
}
