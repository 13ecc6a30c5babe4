// run_programs: loads each program file given on the command line, loads every
// method and runs it on zero-filled inputs, and prints one outcome per file.
// Built with sanitizers (tests/test_sanitizers.py) to prove that corrupt files
// end in error values, never in out-of-bounds accesses.
#include <kiln/kiln.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  for (int f = 1; f < argc; ++f) {
    const char* outcome = "ran";
    kiln::Result<kiln::Program> program = kiln::Program::load(argv[f]);
    if (!program.ok()) {
      outcome = kiln::error_name(program.error());
    } else {
      for (const std::string& name : program->method_names()) {
        kiln::Result<kiln::Method> method = program->load_method(name);
        if (!method.ok()) {
          outcome = kiln::error_name(method.error());
          break;
        }
        std::vector<std::vector<unsigned char>> buffers;
        std::vector<kiln::Tensor> inputs;
        bool too_big = false;
        for (const kiln::TensorSpec& spec : method->spec().inputs) {
          size_t bytes = kiln::element_size(spec.dtype);
          for (int64_t s : spec.sizes) bytes *= static_cast<size_t>(s);
          if (bytes > (size_t{64} << 20)) too_big = true;
          if (too_big) break;
          buffers.emplace_back(bytes, 0);
          inputs.push_back(kiln::Tensor::view(buffers.back().data(), spec.sizes, spec.dtype));
        }
        if (too_big) {
          outcome = "loaded";
          break;
        }
        auto outputs = method->run(inputs);
        if (!outputs.ok()) {
          outcome = kiln::error_name(outputs.error());
          break;
        }
      }
    }
    std::printf("%s %s\n", argv[f], outcome);
    std::fflush(stdout);
  }
  return 0;
}
