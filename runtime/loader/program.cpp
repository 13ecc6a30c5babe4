// Program: loading (mmap or buffer), verification, and method lookup.
#include "kiln/program.h"
#include "kiln/registry.h"

#include "executor/method_state.h"
#include "loader/program_data.h"

namespace kiln {

namespace {
// Before any program loads: KILN_PLUGIN_PATH plugins are in (once; a failing
// plugin was logged and must not block programs that do not need it), and this
// process has a single runtime.
Status prepare_runtime() {
  (void)load_plugins_from_env();
  return check_single_runtime();
}

Result<Program> finish_load(std::unique_ptr<internal::ProgramBytes> bytes, const LoadOptions& options,
                            Program (*make)(std::shared_ptr<const internal::ProgramData>)) {
  KILN_RETURN_IF_ERROR(prepare_runtime());
  auto data = std::make_shared<internal::ProgramData>();
  data->bytes = std::move(bytes);
  data->options = options;
  Result<internal::FileHeader> header = internal::parse_header(data->bytes->data(), data->bytes->size());
  if (!header.ok()) return header.status();
  data->header = header.value();
  KILN_RETURN_IF_ERROR(internal::verify_program(*data));
  return make(std::move(data));
}
}  // namespace

Program::Program(std::shared_ptr<const internal::ProgramData> data) : data_(std::move(data)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Result<Program> Program::load(const std::string& path, const LoadOptions& options) {
  auto bytes = internal::ProgramBytes::map_file(path);
  if (!bytes.ok()) return bytes.status();
  auto program = finish_load(std::move(bytes).value(), options,
                             [](std::shared_ptr<const internal::ProgramData> d) { return Program(std::move(d)); });
  if (!program.ok()) return Status(program.status()).with_context("'" + path + "'");
  return program;
}

Result<Program> Program::load_from_buffer(const void* data, size_t size, const LoadOptions& options) {
  auto bytes = internal::ProgramBytes::from_buffer(data, size);
  if (!bytes.ok()) return bytes.status();
  return finish_load(std::move(bytes).value(), options,
                     [](std::shared_ptr<const internal::ProgramData> d) { return Program(std::move(d)); });
}

Result<Program> Program::load_from_copy(const void* data, size_t size, const LoadOptions& options) {
  auto bytes = internal::ProgramBytes::copy_of(data, size);
  if (!bytes.ok()) return bytes.status();
  return finish_load(std::move(bytes).value(), options,
                     [](std::shared_ptr<const internal::ProgramData> d) { return Program(std::move(d)); });
}

std::vector<std::string> Program::method_names() const {
  std::vector<std::string> names;
  for (const auto& spec : data_->specs) names.push_back(spec.name);
  return names;
}

Result<MethodSpec> Program::method_spec(const std::string& name) const {
  for (const auto& spec : data_->specs) {
    if (spec.name == name) return spec;
  }
  return Status(Error::NotFound, "the program has no method '" + name + "'");
}

Result<Method> Program::load_method(const std::string& name) const {
  for (size_t i = 0; i < data_->specs.size(); ++i) {
    if (data_->specs[i].name != name) continue;
    auto state = internal::MethodState::create(data_, i);
    if (!state.ok()) return Status(state.status()).with_context("loading method '" + name + "'");
    return Method(std::move(state).value());
  }
  return Status(Error::NotFound, "the program has no method '" + name + "'");
}

size_t Program::size_bytes() const { return data_->bytes->size(); }

std::string Program::producer() const {
  const auto* p = data_->program->producer();
  return p ? p->str() : "";
}

}  // namespace kiln
