// fuzz_load: libFuzzer target for the loader and verifier. The input is a
// program file; every outcome but an error value or a verified program is a bug.
#include <cstddef>
#include <cstdint>

#include "fuzz_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::Result<kiln::Program> program = kiln::Program::load_from_copy(data, size, kiln_fuzz::options());
  if (!program.ok()) return 0;
  for (const std::string& name : program->method_names()) (void)program->method_spec(name);
  (void)program->producer();
  return 0;
}
