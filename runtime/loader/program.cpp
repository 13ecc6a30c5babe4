// Program: loading (mmap or buffer), verification, and method lookup.
#include "kiln/program.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/registry.h"

#include "executor/method_state.h"
#include "executor/packed_cache_file.h"
#include "kiln/log.h"
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

// "'a', 'b' or 'c'" for an error message.
std::string quoted_alternatives(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

// LoadOptions::kernels and ::isa, falling back to KILN_KERNELS and KILN_ISA.
Status resolve_kernel_options(const LoadOptions& options, internal::ProgramData* data) {
  const char* env_kernels = std::getenv("KILN_KERNELS");
  const bool from_env = options.kernels.empty() && env_kernels != nullptr && env_kernels[0] != '\0';
  const std::string kernels = from_env ? env_kernels : options.kernels;
  const char* source = from_env ? "KILN_KERNELS" : "LoadOptions::kernels";
  KILN_CHECK_OR_RETURN(
      kernels.empty() || kernels == kernel_tier_name(kTierOptimized) || kernels == kernel_tier_name(kTierPortable),
      InvalidArgument, "%s is '%s'; expected '%s' or '%s'", source, kernels.c_str(), kernel_tier_name(kTierOptimized),
      kernel_tier_name(kTierPortable));
  data->reference_kernels = kernels == kernel_tier_name(kTierPortable);

  const char* env_isa = std::getenv("KILN_ISA");
  const bool isa_from_env = options.isa.empty() && env_isa != nullptr && env_isa[0] != '\0';
  const std::string isa_name_wanted = isa_from_env ? env_isa : options.isa;
  const char* isa_source = isa_from_env ? "KILN_ISA" : "LoadOptions::isa";
  const CpuFeatures cpu = detected_cpu_features();
  data->isa = best_isa(cpu);
  if (isa_name_wanted.empty()) return Status::ok();
  Isa wanted;
  if (!parse_isa(isa_name_wanted.c_str(), &wanted)) {
    std::vector<std::string> names;
    for (Isa isa : isa_levels()) names.push_back(isa_name(isa));
    return Status(Error::InvalidArgument, format("%s is '%s'; expected %s", isa_source, isa_name_wanted.c_str(),
                                                 quoted_alternatives(names).c_str()));
  }
  KILN_CHECK_OR_RETURN(isa_of_this_architecture(wanted), InvalidArgument,
                       "%s is '%s', which is not an instruction set of this CPU (it supports '%s')", isa_source,
                       isa_name_wanted.c_str(), isa_name(data->isa));
  // A level takes away the features above it; asking for more than the CPU has gets what it has.
  data->isa = best_isa(cpu & isa_features(wanted));
  return Status::ok();
}

// LoadOptions::gemm_precision, else KILN_GEMM_PRECISION, else the program's kiln.gemm_precision, else
// float32. After verify_program: the metadata is in bounds.
Status resolve_gemm_precision(const LoadOptions& options, internal::ProgramData* data) {
  const char* env = std::getenv("KILN_GEMM_PRECISION");
  std::string wanted = options.gemm_precision, source = "LoadOptions::gemm_precision";
  if (wanted.empty() && env != nullptr && env[0] != '\0') wanted = env, source = "KILN_GEMM_PRECISION";
  bool from_program = false;
  if (wanted.empty()) {
    if (const auto* entries = data->program->metadata()) {
      for (const auto* e : *entries) {
        if (e->key()->str() != internal::kGemmPrecisionKey) continue;
        from_program = true;
        wanted = e->value() != nullptr ? std::string(e->value()->begin(), e->value()->end()) : std::string();
        source = format("the program's metadata '%s'", internal::kGemmPrecisionKey);
      }
    }
  }
  if ((wanted.empty() && !from_program) || wanted == "float32") return Status::ok();
  if (wanted == "bfloat16") {
    // The program's own choice (a bfloat16 model's) stands where the CPU multiplies bfloat16 itself:
    // AVX512_BF16, whose tiles the avx512_vnni level carries (optimized/bf16_gemm.h). Elsewhere the
    // emulation is slower than float32 on compute-bound products: the weights are converted instead.
    const bool native = data->isa == Isa::Avx512Vnni && (detected_cpu_features() & KILN_CPU_FEATURE_BIT(Avx512Bf16));
    if (!from_program || native) data->gemm_precision = GemmPrecision::Bfloat16;
    return Status::ok();
  }
  std::string shown = wanted.substr(0, 64);
  for (char& c : shown) c = c >= 0x20 && c < 0x7f ? c : '?';
  return Status(from_program ? Error::InvalidProgram : Error::InvalidArgument,
                format("%s is '%s'; expected 'float32' or 'bfloat16'", source.c_str(), shown.c_str()));
}

// LoadOptions::packed_cache (or KILN_PACKED_CACHE) for a mapped file: opens the cache file of this
// file, program table, kiln and CPU features. A missing or refused one is written after the first
// method load that packs; nothing here fails the load.
void attach_packed_cache(internal::ProgramData& data) {
  const char* env = std::getenv("KILN_PACKED_CACHE");
  const std::string option = !data.options.packed_cache.empty() ? data.options.packed_cache : env ? env : "";
  if (option.empty() || option == "0" || option == "off") return;
  const internal::ProgramBytes::FileIdentity* id = data.bytes->file_identity();
  if (id == nullptr) {
    data.packed->set_cache_report("off: only a program loaded from a mapped file has a packed-weight cache");
    return;
  }
  Result<std::string> directory = internal::packed_cache_directory(option);
  if (!directory.ok()) {
    log(LogLevel::Warning, "kiln: no packed-weight cache: %s", directory.status().message().c_str());
    data.packed->set_cache_report("off: " + directory.status().message());
    return;
  }
  internal::PackedCacheKey key;
  key.device = id->device;
  key.inode = id->inode;
  key.size = id->size;
  key.mtime_ns = id->mtime_ns;
  key.ctime_ns = id->ctime_ns;
  key.table_hash = internal::hash_bytes(data.bytes->structure(), data.bytes->structure_size());
  key.cpu_features = isa_features(data.isa) & detected_cpu_features();
  const std::string path = directory.value() + "/" + key.file_name();
  auto opened = internal::PackedCacheFile::open(path, key);
  std::string report;
  if (opened.ok()) {
    report = format("mapped %s (%zu packed constants)", path.c_str(), opened.value()->num_entries());
  } else if (opened.status().code() == Error::NotFound) {
    report = "no " + path + " yet";
  } else {
    report = "refused " + path + ": " + opened.status().message();
    log(LogLevel::Warning, "kiln: packed-weight cache %s refused (%s); it will be written anew", path.c_str(),
        opened.status().message().c_str());
  }
  data.packed->use_cache_file(data.bytes.get(), directory.value(), key,
                              opened.ok() ? std::move(opened).value() : nullptr, std::move(report));
}

Result<Program> finish_load(std::unique_ptr<internal::ProgramBytes> bytes, const LoadOptions& options,
                            Program (*make)(std::shared_ptr<const internal::ProgramData>)) {
  KILN_RETURN_IF_ERROR(prepare_runtime());
  auto data = std::make_shared<internal::ProgramData>();
  data->bytes = std::move(bytes);
  data->options = options;
  KILN_RETURN_IF_ERROR(resolve_kernel_options(options, data.get()));
  Result<internal::FileHeader> header = internal::parse_header(data->bytes->structure(), data->bytes->size());
  if (!header.ok()) return header.status();
  data->header = header.value();
  KILN_RETURN_IF_ERROR(internal::verify_program(*data));
  KILN_RETURN_IF_ERROR(resolve_gemm_precision(options, data.get()));
  attach_packed_cache(*data);
  return make(std::move(data));
}

// "the program has no method 'x' (its methods: 'forward', 'encode')"
Status no_method(const internal::ProgramData& data, const std::string& name) {
  std::string names;
  for (const auto& spec : data.specs) names += (names.empty() ? "'" : ", '") + spec.name + "'";
  return Status(Error::NotFound, "the program has no method '" + name + "' (its methods: " + names + ")");
}
}  // namespace

Program::Program(std::shared_ptr<const internal::ProgramData> data) : data_(std::move(data)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Result<Program> Program::load(const std::string& path, const LoadOptions& options) {
  auto bytes = internal::ProgramBytes::open_file(path, options.map_file);
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
  return no_method(*data_, name);
}

Result<Method> Program::load_method(const std::string& name) const {
  for (size_t i = 0; i < data_->specs.size(); ++i) {
    if (data_->specs[i].name != name) continue;
    auto state = internal::MethodState::create(data_, i);
    if (!state.ok()) return Status(state.status()).with_context("loading method '" + name + "'");
    data_->packed->write_cache_file();
    return Method(std::move(state).value());
  }
  return no_method(*data_, name);
}

size_t Program::size_bytes() const { return data_->bytes->size(); }

uint64_t Program::packed_bytes() const { return data_->packed->total_bytes(); }
uint64_t Program::packed_mapped_bytes() const { return data_->packed->mapped_bytes(); }
std::string Program::packed_cache_report() const { return data_->packed->cache_report(); }

std::string Program::producer() const {
  const auto* p = data_->program->producer();
  return p ? p->str() : "";
}

std::vector<std::string> Program::metadata_keys() const {
  std::vector<std::string> keys;
  if (const auto* entries = data_->program->metadata()) {
    for (const auto* e : *entries) keys.push_back(e->key()->str());  // verified: every key is present
  }
  return keys;
}

Result<Span<const uint8_t>> Program::metadata(const std::string& key) const {
  if (const auto* entries = data_->program->metadata()) {
    for (const auto* e : *entries) {
      if (e->key()->str() != key) continue;
      if (e->value() == nullptr) return Span<const uint8_t>();
      return Span<const uint8_t>(e->value()->data(), e->value()->size());
    }
  }
  return Status(Error::NotFound, "the program has no metadata '" + key + "'");
}

}  // namespace kiln
