// hello: load a .kiln program, print its methods, run one on given inputs, print the outputs.
//
//   hello model.kiln [--method NAME] [--input FILE]... [--sizes D0,D1,...]... [--fill VALUE]
//                    [--calls N] [--all] [--profile TRACE.json] [--output FILE]
//
// Each --input is a raw little-endian file holding one input's bytes (in input
// order); without one, inputs are filled with --fill (default 1.0 / 1). Each
// --sizes gives the run-time sizes of one input (in input order; dynamic dims
// may be smaller than the declared bounds, which are the default). --calls runs
// the method N times on the same inputs: state (e.g. a KV cache) carries over.
// --profile records every call (kiln::Profile), prints the costliest operators
// and writes a Chrome trace. --output writes the raw bytes of the last call's
// outputs, one after the other.
#include <kiln/kiln.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::string describe_spec(const kiln::TensorSpec& s) {
  std::string out = s.name + ": " + kiln::scalar_type_name(s.dtype) + kiln::describe_sizes(s.sizes);
  if (!s.dynamic_dims.empty()) out += " (dynamic)";
  return out;
}

int fail(const kiln::Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

template <typename T>
void fill(std::vector<unsigned char>& bytes, double value) {
  T* p = reinterpret_cast<T*>(bytes.data());
  for (size_t i = 0; i < bytes.size() / sizeof(T); ++i) p[i] = static_cast<T>(value);
}

double element(const kiln::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case kiln::ScalarType::Float32: return t.data_as<float>()[i];
    case kiln::ScalarType::Float64: return t.data_as<double>()[i];
    case kiln::ScalarType::Int64: return static_cast<double>(t.data_as<int64_t>()[i]);
    case kiln::ScalarType::Int32: return t.data_as<int32_t>()[i];
    case kiln::ScalarType::Bool: return t.data_as<bool>()[i] ? 1.0 : 0.0;
    default: return 0.0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.kiln [--method NAME] [--input FILE]... [--fill VALUE] [--all]\n", argv[0]);
    return 2;
  }
  std::string path = argv[1], method_name = "forward";
  std::vector<std::string> input_files;
  std::vector<std::vector<int64_t>> input_sizes;
  double fill_value = 1.0;
  int calls = 1;
  bool print_all = false;
  std::string trace_path, output_path;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--method" && i + 1 < argc)
      method_name = argv[++i];
    else if (arg == "--input" && i + 1 < argc)
      input_files.push_back(argv[++i]);
    else if (arg == "--fill" && i + 1 < argc)
      fill_value = std::atof(argv[++i]);
    else if (arg == "--calls" && i + 1 < argc)
      calls = std::atoi(argv[++i]);
    else if (arg == "--sizes" && i + 1 < argc) {
      std::vector<int64_t> sizes;
      for (char* p = argv[++i]; *p != '\0';) {
        sizes.push_back(std::strtoll(p, &p, 10));
        if (*p == ',') ++p;
      }
      input_sizes.push_back(sizes);
    } else if (arg == "--all")
      print_all = true;
    else if (arg == "--profile" && i + 1 < argc)
      trace_path = argv[++i];
    else if (arg == "--output" && i + 1 < argc)
      output_path = argv[++i];
    else {
      std::fprintf(stderr, "unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }

  kiln::Result<kiln::Program> program = kiln::Program::load(path);
  if (!program.ok()) return fail(program.status());
  std::printf("program %s (%zu bytes), runtime %s\n", path.c_str(), program->size_bytes(),
              kiln::runtime_library_path().c_str());
  for (const std::string& name : program->method_names()) {
    kiln::Result<kiln::MethodSpec> spec = program->method_spec(name);
    if (!spec.ok()) return fail(spec.status());
    std::printf("method %s\n", name.c_str());
    for (const auto& s : spec->inputs) std::printf("  input  %s\n", describe_spec(s).c_str());
    for (const auto& s : spec->outputs) std::printf("  output %s\n", describe_spec(s).c_str());
    for (const auto& s : spec->state) std::printf("  state  %s\n", describe_spec(s).c_str());
  }

  kiln::Result<kiln::Method> method = program->load_method(method_name);
  if (!method.ok()) return fail(method.status());
  const kiln::MethodSpec& spec = method->spec();
  if (!input_files.empty() && input_files.size() != spec.inputs.size()) {
    std::fprintf(stderr, "error: method %s takes %zu inputs, got %zu --input files\n", method_name.c_str(),
                 spec.inputs.size(), input_files.size());
    return 2;
  }

  std::vector<std::vector<unsigned char>> buffers(spec.inputs.size());
  std::vector<kiln::Tensor> inputs;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const kiln::TensorSpec& s = spec.inputs[i];
    std::vector<int64_t> sizes = i < input_sizes.size() ? input_sizes[i] : s.sizes;
    size_t numel = 1;
    for (int64_t d : sizes) numel *= static_cast<size_t>(d < 0 ? 0 : d);
    size_t nbytes = numel * kiln::element_size(s.dtype);
    if (!input_files.empty()) {
      std::ifstream in(input_files[i], std::ios::binary);
      buffers[i].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (buffers[i].size() != nbytes) {
        std::fprintf(stderr, "error: %s holds %zu bytes, input %s needs %zu\n", input_files[i].c_str(),
                     buffers[i].size(), s.name.c_str(), nbytes);
        return 2;
      }
    } else {
      buffers[i].resize(nbytes);
      if (s.dtype == kiln::ScalarType::Float32)
        fill<float>(buffers[i], fill_value);
      else if (s.dtype == kiln::ScalarType::Int64)
        fill<int64_t>(buffers[i], fill_value);
      else if (s.dtype == kiln::ScalarType::Float64)
        fill<double>(buffers[i], fill_value);
    }
    inputs.push_back(kiln::Tensor::view(buffers[i].data(), sizes, s.dtype));
  }

  kiln::Profile profile;
  for (int call = 0; call < calls; ++call) {
    // set_input checks each input against the spec (dtype, rank, sizes within bounds).
    kiln::Result<std::vector<kiln::Tensor>> outputs = method->run(inputs, trace_path.empty() ? nullptr : &profile);
    if (!outputs.ok()) return fail(outputs.status());
    for (size_t i = 0; i < outputs->size(); ++i) {
      const kiln::Tensor& t = (*outputs)[i];
      double sum = 0;
      for (int64_t k = 0; k < t.numel(); ++k) sum += element(t, k);
      std::printf("output %zu %s sum=%.9g\n", i, kiln::describe(t).c_str(), sum);
      int64_t shown = print_all ? t.numel() : (t.numel() < 8 ? t.numel() : 8);
      std::printf("  values");
      for (int64_t k = 0; k < shown; ++k) std::printf(" %.9g", element(t, k));
      std::printf("%s\n", shown < t.numel() ? " ..." : "");
    }
    if (!output_path.empty() && call + 1 == calls) {
      std::ofstream out(output_path, std::ios::binary);
      for (const kiln::Tensor& t : *outputs) out.write(static_cast<const char*>(t.data()), t.nbytes());
      if (!out) return fail(kiln::Status(kiln::Error::IoError, "cannot write " + output_path));
    }
  }
  if (!trace_path.empty()) {
    std::printf("%s", profile.table(10).c_str());
    std::ofstream(trace_path) << profile.chrome_trace();
  }
  return 0;
}
