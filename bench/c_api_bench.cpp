// c_api_bench: ns per call of one program's "forward" through the C API and the C++ API, in one
// process on the same inputs (bench/c_api.py builds it against the installed wheel and runs it).
//
//   c_api_bench program.kiln [batch seconds]
//
// Prints one line per way of calling: "<name> <median ns per call>". The inputs are zeros of each
// input's largest sizes; one pool thread, so only the calling thread works.
#include <kiln/c_api.h>
#include <kiln/kiln.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_timing.h"

namespace {

const kiln_api* api;

void check(kiln_status* st) {
  if (st == nullptr) return;
  std::fprintf(stderr, "error: %s\n", api->status_message(st));
  std::exit(1);
}

double ns(double seconds) { return seconds * 1e9; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: c_api_bench program.kiln [batch seconds]\n");
    return 2;
  }
  const double batch_s = argc > 2 ? std::atof(argv[2]) : 0.2;
  api = kiln_get_api_base()->get_api(KILN_C_API_VERSION, nullptr);
  check(api->set_num_threads(1));

  // The C API: a method, its inputs as kiln-allocated tensors, outputs into caller tensors (no
  // allocation per call) or into new ones (one allocation and free per output and call).
  kiln_program* program = nullptr;
  kiln_method* method = nullptr;
  check(api->program_load(argv[1], nullptr, &program));
  check(api->program_load_method(program, "forward", &method));
  size_t num_inputs = 0, num_outputs = 0;
  check(api->method_tensor_count(method, KILN_SPEC_INPUT, &num_inputs));
  check(api->method_tensor_count(method, KILN_SPEC_OUTPUT, &num_outputs));
  std::vector<kiln_tensor*> inputs(num_inputs), outputs(num_outputs), fresh(num_outputs);
  std::vector<kiln::Tensor> cpp_inputs;
  for (size_t i = 0; i < num_inputs; ++i) {
    kiln_tensor_spec spec{};
    spec.struct_size = sizeof(spec);
    check(api->method_tensor_spec(method, KILN_SPEC_INPUT, i, &spec));
    check(api->tensor_create(spec.dtype, spec.max_sizes, static_cast<size_t>(spec.ndim), &inputs[i]));
    void* data = nullptr;
    check(api->tensor_data(inputs[i], &data, nullptr));
    cpp_inputs.push_back(kiln::Tensor::view(data, kiln::Span<const int64_t>(spec.max_sizes, spec.ndim),
                                            static_cast<kiln::ScalarType>(spec.dtype)));
  }
  check(api->method_run(method, inputs.data(), num_inputs, outputs.data(), num_outputs));  // allocates them once
  const double c_into = kiln::bench::time_per_call(
      [&] { check(api->method_run(method, inputs.data(), num_inputs, outputs.data(), num_outputs)); }, 1, batch_s);
  const double c_alloc = kiln::bench::time_per_call(
      [&] {
        check(api->method_run(method, inputs.data(), num_inputs, fresh.data(), num_outputs));
        for (auto*& t : fresh) {
          api->tensor_free(t);
          t = nullptr;
        }
      },
      1, batch_s);

  // The C++ API: Method::run returns views of the method's own outputs (no copy).
  auto cpp_program = kiln::Program::load(argv[1]);
  if (!cpp_program.ok()) return std::fprintf(stderr, "%s\n", cpp_program.status().to_string().c_str()), 1;
  auto cpp_method = cpp_program->load_method("forward");
  if (!cpp_method.ok()) return std::fprintf(stderr, "%s\n", cpp_method.status().to_string().c_str()), 1;
  const double cpp = kiln::bench::time_per_call(
      [&] {
        auto out = cpp_method->run(kiln::Span<const kiln::Tensor>(cpp_inputs.data(), cpp_inputs.size()));
        if (!out.ok()) std::exit(1);
      },
      1, batch_s);

  std::printf("c_into_caller_tensors %.0f\nc_kiln_allocated_outputs %.0f\ncpp_method_run %.0f\n", ns(c_into),
              ns(c_alloc), ns(cpp));
  for (auto* t : inputs) api->tensor_free(t);
  for (auto* t : outputs) api->tensor_free(t);
  api->method_free(method);
  api->program_free(program);
  return 0;
}
