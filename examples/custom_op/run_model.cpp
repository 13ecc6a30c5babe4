// run_model: runs a .kiln program that calls kiln_demo::scaled_tanh.
//
//   run_model model.kiln input.bin
//
// input.bin holds the raw float32 bytes of the method's single input. The
// program never loads the plugin itself: it links the kiln_demo_ops target
// (target_link_libraries in CMakeLists.txt), whose link options keep the
// library on the link line, so the dynamic loader maps it at start-up and its
// static registrar adds the kernel before main() runs.
#include <kiln/kiln.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {
int fail(const kiln::Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s model.kiln input.bin\n", argv[0]);
    return 2;
  }
  for (const kiln::KernelInfo& k : kiln::registered_kernels()) {
    if (k.op_name.rfind("kiln_demo::", 0) == 0) {
      std::printf("kernel %s [%s] from %s\n", k.op_name.c_str(), k.dtypes.c_str(), k.library.c_str());
    }
  }

  kiln::Result<kiln::Program> program = kiln::Program::load(argv[1]);
  if (!program.ok()) return fail(program.status());
  kiln::Result<kiln::Method> method = program->load_method("forward");  // MissingKernel here if unlinked
  if (!method.ok()) return fail(method.status());
  const kiln::MethodSpec& spec = method->spec();
  if (spec.inputs.size() != 1 || spec.inputs[0].dtype != kiln::ScalarType::Float32) {
    std::fprintf(stderr, "error: expected one float32 input\n");
    return 2;
  }

  std::ifstream file(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  size_t numel = 1;
  for (int64_t d : spec.inputs[0].sizes) numel *= static_cast<size_t>(d);
  if (bytes.size() != numel * sizeof(float)) {
    std::fprintf(stderr, "error: %s holds %zu bytes, the input needs %zu\n", argv[2], bytes.size(),
                 numel * sizeof(float));
    return 2;
  }
  std::vector<float> input(numel);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(input.data()));

  kiln::Tensor x = kiln::Tensor::view(input.data(), spec.inputs[0].sizes, kiln::ScalarType::Float32);
  kiln::Result<std::vector<kiln::Tensor>> outputs = method->run({x});
  if (!outputs.ok()) return fail(outputs.status());
  for (size_t i = 0; i < outputs->size(); ++i) {
    const kiln::Tensor& y = (*outputs)[i];
    std::printf("output %zu %s\n", i, kiln::describe(y).c_str());
    for (int64_t k = 0; k < y.numel(); ++k) std::printf("%.9g\n", static_cast<double>(y.data_as<float>()[k]));
  }
  return 0;
}
