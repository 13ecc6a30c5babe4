// The C API (kiln/c_api.h): the function table over the C++ API, with statuses as values and a
// catch-all around every entry point, so that no C++ exception or type crosses into C.
#include "kiln/c_api.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "c_api/c_api_internal.h"
#include "kiln/cpu.h"
#include "kiln/error.h"
#include "kiln/program.h"
#include "kiln/registry.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"
#include "kiln/version.h"

// The codes of the header are kiln::Error's values, so a status converts without a table.
static_assert(KILN_ERROR_INVALID_ARGUMENT == static_cast<int>(kiln::Error::InvalidArgument));
static_assert(KILN_ERROR_INVALID_PROGRAM == static_cast<int>(kiln::Error::InvalidProgram));
static_assert(KILN_ERROR_ABI_MISMATCH == static_cast<int>(kiln::Error::AbiMismatch));
static_assert(KILN_ERROR_INTERNAL == static_cast<int>(kiln::Error::Internal));
static_assert(KILN_ERROR_BUSY == static_cast<int>(kiln::Error::Busy));
static_assert(KILN_DTYPE_FLOAT32 == static_cast<int>(kiln::ScalarType::Float32));
static_assert(KILN_DTYPE_BFLOAT16 == static_cast<int>(kiln::ScalarType::BFloat16));
static_assert(KILN_DTYPE_INT8 == static_cast<int>(kiln::ScalarType::Int8));
static_assert(KILN_MAX_DIMS == kiln::kMaxDims);

namespace {

// Every handle carries a magic number of its kind, so that a null, freed or wrong-kind handle is a
// status instead of a wild access.
constexpr uint32_t kStatusMagic = 0x4b53544eu;   // "KSTN"
constexpr uint32_t kOptionsMagic = 0x4b4f5054u;  // "KOPT"
constexpr uint32_t kProgramMagic = 0x4b50524fu;  // "KPRO"
constexpr uint32_t kMethodMagic = 0x4b4d5448u;   // "KMTH"
constexpr uint32_t kTensorMagic = 0x4b54534eu;   // "KTSN"
constexpr uint32_t kFreedMagic = 0x4b444541u;    // "KDEA": a handle whose contents were freed

// The part of a handle that outlives free (in the quarantine below); release() frees the rest at once.
struct Handle {
  explicit Handle(uint32_t m) : magic(m) {}
  virtual ~Handle() = default;
  virtual void release() noexcept {}
  uint32_t magic;
};

}  // namespace

struct kiln_status : Handle {
  kiln_status(kiln_code c, std::string m) : Handle(kStatusMagic), code(c), message(std::move(m)) {}
  void release() noexcept override { std::string().swap(message); }
  kiln_code code;
  std::string message;
};

struct kiln_load_options : Handle {
  kiln_load_options() : Handle(kOptionsMagic) {}
  void release() noexcept override { options = kiln::LoadOptions(); }
  kiln::LoadOptions options;
};

struct kiln_program : Handle {
  explicit kiln_program(kiln::Program p) : Handle(kProgramMagic), held(std::move(p)) { names = held->method_names(); }
  // Unmaps the file, unless a method still holds the program's data.
  void release() noexcept override {
    held.reset();
    std::vector<std::string>().swap(names);
  }
  const kiln::Program& program() const { return *held; }  // engaged while the magic says live
  std::optional<kiln::Program> held;
  std::vector<std::string> names;
};

struct kiln_method : Handle {
  kiln_method(kiln::Method m, std::string n) : Handle(kMethodMagic), held(std::move(m)), name(std::move(n)) {}
  // Frees the method's arenas and state.
  void release() noexcept override {
    held.reset();
    std::string().swap(name);
  }
  kiln::Method& method() { return *held; }  // engaged while the magic says live
  const kiln::Method& method() const { return *held; }
  std::optional<kiln::Method> held;
  std::string name;
};

struct kiln_tensor : Handle {
  kiln_tensor() : Handle(kTensorMagic) {}
  ~kiln_tensor() override { std::free(owned); }
  void release() noexcept override {
    std::free(owned);
    owned = nullptr;
    tensor = kiln::Tensor();
  }
  kiln::Tensor tensor;  // capacity() is the buffer's size in bytes
  void* owned = nullptr;
  bool fresh = false;  // allocated by the method_run in progress: freed again if it fails
};

namespace {

// Freed handles are kept (their contents destroyed, their magic set to kFreedMagic) until this
// many newer ones were freed, so that a handle used again soon after it was freed is still
// readable memory and gives a status, not a use after free.
constexpr size_t kQuarantine = 256;

class Quarantine {
 public:
  void retire(void* husk, void (*destroy)(void*)) noexcept {
    Entry oldest;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      oldest = ring_[next_];
      ring_[next_] = {husk, destroy};
      next_ = (next_ + 1) % kQuarantine;
    }
    if (oldest.husk != nullptr) oldest.destroy(oldest.husk);
  }

 private:
  struct Entry {
    void* husk = nullptr;
    void (*destroy)(void*) = nullptr;
  };
  std::mutex mutex_;
  Entry ring_[kQuarantine];
  size_t next_ = 0;
};

Quarantine& quarantine() {
  static Quarantine* q = new Quarantine();  // never destroyed: frees may come from static destructors
  return *q;
}

kiln_status* out_of_memory_status() noexcept { return kiln::c_internal::out_of_memory(); }

kiln_status* make_status(kiln_code code, std::string message) noexcept {
  try {
    return new kiln_status(code, std::move(message));
  } catch (...) {
    return out_of_memory_status();
  }
}

kiln_status* from(const kiln::Status& st) noexcept {
  if (st.is_ok()) return nullptr;
  try {
    return make_status(static_cast<kiln_code>(st.code()), st.message());
  } catch (...) {
    return out_of_memory_status();
  }
}

kiln_status* invalid(const char* function, const char* what) noexcept {
  try {
    return make_status(KILN_ERROR_INVALID_ARGUMENT, kiln::format("%s: %s", function, what));
  } catch (...) {
    return out_of_memory_status();
  }
}

using kiln::c_internal::copy_prefix;
using kiln::c_internal::guarded;

const char* kind_name(uint32_t magic) {
  switch (magic) {
    case kStatusMagic: return "kiln_status";
    case kOptionsMagic: return "kiln_load_options";
    case kProgramMagic: return "kiln_program";
    case kMethodMagic: return "kiln_method";
    case kTensorMagic: return "kiln_tensor";
    case kFreedMagic: return "freed handle";
  }
  return "unknown";
}

// Checks that `h` is a live handle of the kind `magic`; the message names the function and argument.
template <typename H>
kiln_status* check_handle(const H* h, uint32_t magic, const char* function, const char* arg) {
  if (h == nullptr) return make_status(KILN_ERROR_INVALID_ARGUMENT, kiln::format("%s: %s is NULL", function, arg));
  if (h->magic == magic) return nullptr;
  if (h->magic == kFreedMagic) {
    return make_status(KILN_ERROR_INVALID_ARGUMENT,
                       kiln::format("%s: %s is a %s that was already freed", function, arg, kind_name(magic)));
  }
  return make_status(KILN_ERROR_INVALID_ARGUMENT, kiln::format("%s: %s is not a %s (found a %s)", function, arg,
                                                               kind_name(magic), kind_name(h->magic)));
}

#define KILN_C_CHECK_HANDLE(h, magic, arg)                                  \
  do {                                                                      \
    if (kiln_status* bad_ = check_handle((h), (magic), function_, (arg))) { \
      return bad_;                                                          \
    }                                                                       \
  } while (0)

#define KILN_C_CHECK_ARG(cond, ...)                                                                               \
  do {                                                                                                            \
    if (!(cond)) {                                                                                                \
      return make_status(KILN_ERROR_INVALID_ARGUMENT, std::string(function_) + ": " + kiln::format(__VA_ARGS__)); \
    }                                                                                                             \
  } while (0)

template <typename H>
void free_handle(H* h, uint32_t magic) noexcept {
  if (h == nullptr || h->magic != magic) return;  // a wrong or freed handle: nothing to free
  h->magic = kFreedMagic;
  h->release();
  quarantine().retire(static_cast<Handle*>(h), [](void* husk) { delete static_cast<Handle*>(husk); });
}

// The element count and byte size of `sizes`, refused on a negative size or overflow.
kiln_status* checked_nbytes(const char* function, kiln_dtype dtype, const int64_t* sizes, size_t ndim, size_t* nbytes) {
  if (dtype < 0 || dtype >= kiln::kNumScalarTypes) {
    return make_status(KILN_ERROR_INVALID_ARGUMENT, kiln::format("%s: dtype %d is not a kiln dtype", function, dtype));
  }
  if (ndim > static_cast<size_t>(kiln::kMaxDims)) {
    return make_status(KILN_ERROR_INVALID_ARGUMENT,
                       kiln::format("%s: %zu dimensions, at most %d", function, ndim, kiln::kMaxDims));
  }
  if (ndim > 0 && sizes == nullptr) return invalid(function, "sizes is NULL");
  uint64_t bytes = kiln::element_size(static_cast<kiln::ScalarType>(dtype));
  for (size_t d = 0; d < ndim; ++d) {
    if (sizes[d] < 0) {
      return make_status(KILN_ERROR_INVALID_ARGUMENT, kiln::format("%s: size %lld of dimension %zu is negative",
                                                                   function, static_cast<long long>(sizes[d]), d));
    }
    if (sizes[d] != 0 && bytes > (uint64_t{1} << 62) / static_cast<uint64_t>(sizes[d])) {
      return invalid(function, "the sizes overflow 2^62 bytes");
    }
    bytes *= static_cast<uint64_t>(sizes[d]);
  }
  *nbytes = static_cast<size_t>(bytes);
  return nullptr;
}

// ---- statuses ----

kiln_code status_code(const kiln_status* status) {
  if (status == nullptr) return KILN_OK;
  return status->magic == kStatusMagic ? status->code : KILN_ERROR_INVALID_ARGUMENT;
}

const char* status_message(const kiln_status* status) {
  if (status == nullptr) return "";
  return status->magic == kStatusMagic ? status->message.c_str() : "status_message: not a live kiln_status";
}

const char* code_name(kiln_code code) {
  if (code < 0 || code > KILN_ERROR_BUSY) return "unknown";
  return kiln::error_name(static_cast<kiln::Error>(code));
}

void status_free(kiln_status* status) {
  if (status == out_of_memory_status()) return;
  free_handle(status, kStatusMagic);
}

// ---- library-wide ----

kiln_status* build_info(kiln_build_info* info) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    static const std::string* library = new std::string(kiln::runtime_library_path());
    kiln_build_info filled{};
    filled.version = KILN_VERSION_STRING;
    filled.api_version = KILN_C_API_VERSION;
    filled.abi_version = KILN_ABI_VERSION;
    filled.runtime_library = library->c_str();
    filled.detected_isa = kiln::isa_name(kiln::detected_isa());
    filled.compiler = __VERSION__;  // GCC and clang both define it
    return copy_prefix(function_, filled, info);
  });
}

kiln_status* set_num_threads(int32_t n) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_ARG(n <= kiln::kMaxThreads, "%d threads, at most %d", n, kiln::kMaxThreads);
    kiln::set_num_threads(n);
    return nullptr;
  });
}

kiln_status* num_threads(int32_t* out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    if (out == nullptr) return invalid(function_, "out is NULL");
    *out = kiln::num_threads();
    return nullptr;
  });
}

kiln_status* load_library(const char* path, size_t* num_kernels, size_t* num_backends) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    if (path == nullptr) return invalid(function_, "path is NULL");
    auto info = kiln::load_library(path);
    if (!info.ok()) return from(info.status());
    if (num_kernels != nullptr) *num_kernels = info->kernels.size();
    if (num_backends != nullptr) *num_backends = info->backends.size();
    return nullptr;
  });
}

kiln_status* registered_kernel_count(size_t* out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    if (out == nullptr) return invalid(function_, "out is NULL");
    *out = kiln::registered_kernels().size();
    return nullptr;
  });
}

kiln_status* registered_backend_count(size_t* out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    if (out == nullptr) return invalid(function_, "out is NULL");
    *out = kiln::registered_backends().size();
    return nullptr;
  });
}

// ---- load options ----

kiln_status* load_options_create(kiln_load_options** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    if (out == nullptr) return invalid(function_, "out is NULL");
    *out = new kiln_load_options();
    return nullptr;
  });
}

void load_options_free(kiln_load_options* options) { free_handle(options, kOptionsMagic); }

kiln_status* load_options_set_kernels(kiln_load_options* options, const char* tier) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(options, kOptionsMagic, "options");
    options->options.kernels = tier == nullptr ? "" : tier;
    return nullptr;
  });
}

kiln_status* load_options_set_isa(kiln_load_options* options, const char* isa) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(options, kOptionsMagic, "options");
    options->options.isa = isa == nullptr ? "" : isa;
    return nullptr;
  });
}

kiln_status* load_options_set_max_memory(kiln_load_options* options, uint64_t bytes) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(options, kOptionsMagic, "options");
    options->options.max_memory_bytes = bytes;
    return nullptr;
  });
}

kiln_status* load_options_set_map_file(kiln_load_options* options, int32_t map_file) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(options, kOptionsMagic, "options");
    options->options.map_file = map_file != 0;
    return nullptr;
  });
}

// ---- programs ----

// The options a load uses: the defaults for NULL, else the handle's (checked).
kiln_status* options_of(const char* function, const kiln_load_options* options, kiln::LoadOptions* out) {
  if (options == nullptr) return nullptr;
  if (kiln_status* bad = check_handle(options, kOptionsMagic, function, "options")) return bad;
  *out = options->options;
  return nullptr;
}

kiln_status* finish_load(kiln::Result<kiln::Program> program, kiln_program** out) {
  if (!program.ok()) return from(program.status());
  *out = new kiln_program(std::move(program).value());
  return nullptr;
}

kiln_status* program_load(const char* path, const kiln_load_options* options, kiln_program** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_ARG(path != nullptr, "path is NULL");
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = nullptr;
    kiln::LoadOptions o;
    if (kiln_status* bad = options_of(function_, options, &o)) return bad;
    return finish_load(kiln::Program::load(path, o), out);
  });
}

kiln_status* program_load_from_buffer(const void* data, size_t size, const kiln_load_options* options,
                                      kiln_program** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_ARG(data != nullptr || size == 0, "data is NULL");
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = nullptr;
    kiln::LoadOptions o;
    if (kiln_status* bad = options_of(function_, options, &o)) return bad;
    return finish_load(kiln::Program::load_from_buffer(data, size, o), out);
  });
}

kiln_status* program_load_from_copy(const void* data, size_t size, const kiln_load_options* options,
                                    kiln_program** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_ARG(data != nullptr || size == 0, "data is NULL");
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = nullptr;
    kiln::LoadOptions o;
    if (kiln_status* bad = options_of(function_, options, &o)) return bad;
    return finish_load(kiln::Program::load_from_copy(data, size, o), out);
  });
}

void program_free(kiln_program* program) { free_handle(program, kProgramMagic); }

kiln_status* program_method_count(const kiln_program* program, size_t* out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(program, kProgramMagic, "program");
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = program->names.size();
    return nullptr;
  });
}

kiln_status* program_method_name(const kiln_program* program, size_t index, const char** name) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(program, kProgramMagic, "program");
    KILN_C_CHECK_ARG(name != nullptr, "name is NULL");
    KILN_C_CHECK_ARG(index < program->names.size(), "method %zu of %zu", index, program->names.size());
    *name = program->names[index].c_str();
    return nullptr;
  });
}

kiln_status* program_load_method(const kiln_program* program, const char* name, kiln_method** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(program, kProgramMagic, "program");
    KILN_C_CHECK_ARG(name != nullptr, "name is NULL");
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = nullptr;
    auto method = program->program().load_method(name);
    if (!method.ok()) return from(method.status());
    *out = new kiln_method(std::move(method).value(), name);
    return nullptr;
  });
}

// ---- methods ----

void method_free(kiln_method* method) { free_handle(method, kMethodMagic); }

kiln_status* method_name(const kiln_method* method, const char** name) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(method, kMethodMagic, "method");
    KILN_C_CHECK_ARG(name != nullptr, "name is NULL");
    *name = method->name.c_str();
    return nullptr;
  });
}

const std::vector<kiln::TensorSpec>* spec_list(const kiln_method* method, kiln_spec_kind kind) {
  const kiln::MethodSpec& spec = method->method().spec();
  switch (kind) {
    case KILN_SPEC_INPUT: return &spec.inputs;
    case KILN_SPEC_OUTPUT: return &spec.outputs;
    case KILN_SPEC_STATE: return &spec.state;
  }
  return nullptr;
}

kiln_status* method_tensor_count(const kiln_method* method, kiln_spec_kind kind, size_t* out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(method, kMethodMagic, "method");
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    const auto* list = spec_list(method, kind);
    KILN_C_CHECK_ARG(list != nullptr, "kind %d is not a KILN_SPEC_ value", kind);
    *out = list->size();
    return nullptr;
  });
}

kiln_status* method_tensor_spec(const kiln_method* method, kiln_spec_kind kind, size_t index, kiln_tensor_spec* spec) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(method, kMethodMagic, "method");
    const auto* list = spec_list(method, kind);
    KILN_C_CHECK_ARG(list != nullptr, "kind %d is not a KILN_SPEC_ value", kind);
    KILN_C_CHECK_ARG(index < list->size(), "tensor %zu of %zu", index, list->size());
    const kiln::TensorSpec& t = (*list)[index];
    kiln_tensor_spec filled{};
    filled.name = t.name.c_str();
    filled.dtype = static_cast<kiln_dtype>(t.dtype);
    filled.ndim = static_cast<int32_t>(t.sizes.size());
    filled.max_sizes = t.sizes.data();
    filled.min_sizes = t.min_sizes.size() == t.sizes.size() ? t.min_sizes.data() : t.sizes.data();
    for (int d : t.dynamic_dims) {
      if (d >= 0 && d < 32) filled.dynamic_mask |= uint32_t{1} << d;
    }
    return copy_prefix(function_, filled, spec);
  });
}

// Writes output `o` into the caller's slot: into the tensor there, or into a new one.
kiln_status* write_output(const kiln::Tensor& o, size_t index, kiln_tensor** slot) {
  kiln_tensor* t = *slot;
  if (t == nullptr) {
    t = new kiln_tensor();
    size_t capacity = (std::max<size_t>(o.nbytes(), 1) + 63) / 64 * 64;
    t->owned = std::aligned_alloc(64, capacity);
    if (t->owned == nullptr) {
      delete t;
      return make_status(KILN_ERROR_OUT_OF_MEMORY,
                         kiln::format("method_run: output %zu: %zu bytes", index, o.nbytes()));
    }
    t->tensor.reset(t->owned, o.sizes(), o.dtype(), capacity);
    t->fresh = true;
    *slot = t;
  } else if (t->tensor.dtype() != o.dtype()) {
    return make_status(KILN_ERROR_INVALID_ARGUMENT,
                       kiln::format("method_run: output %zu is %s, the tensor given for it is %s", index,
                                    kiln::scalar_type_name(o.dtype()), kiln::scalar_type_name(t->tensor.dtype())));
  } else if (t->tensor.capacity() < o.nbytes()) {
    return make_status(KILN_ERROR_INVALID_ARGUMENT,
                       kiln::format("method_run: output %zu is %s (%zu bytes); the tensor given for it holds %zu",
                                    index, kiln::describe(o).c_str(), o.nbytes(), t->tensor.capacity()));
  } else {
    t->tensor.reset(t->tensor.data(), o.sizes(), o.dtype(), t->tensor.capacity());
  }
  if (o.nbytes() > 0) std::memcpy(t->tensor.data(), o.data(), o.nbytes());
  return nullptr;
}

kiln_status* run_locked(kiln_method* method, const kiln_tensor* const* inputs, size_t num_inputs, kiln_tensor** outputs,
                        size_t num_outputs) {
  kiln::Method& m = method->method();
  for (size_t i = 0; i < num_inputs; ++i) {
    kiln::Status st = m.set_input(i, inputs[i]->tensor);
    if (!st.is_ok()) return from(st);
  }
  kiln::Status st = m.execute();
  if (!st.is_ok()) return from(st);
  for (size_t i = 0; i < num_outputs; ++i) {
    if (kiln_status* bad = write_output(m.output(i), i, &outputs[i])) return bad;
  }
  return nullptr;
}

// Checks a tensor argument; the message (built only on failure) names its role and index.
kiln_status* check_tensor_arg(const kiln_tensor* t, const char* role, size_t index) {
  if (t != nullptr && t->magic == kTensorMagic) return nullptr;
  return check_handle(t, kTensorMagic, "method_run", kiln::format("%s %zu", role, index).c_str());
}

kiln_status* method_run(kiln_method* method, const kiln_tensor* const* inputs, size_t num_inputs, kiln_tensor** outputs,
                        size_t num_outputs) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(method, kMethodMagic, "method");
    kiln::Method& m = method->method();
    if (num_inputs != m.num_inputs()) {
      return make_status(KILN_ERROR_INVALID_INPUT, kiln::format("method_run: method '%s' takes %zu inputs, got %zu",
                                                                method->name.c_str(), m.num_inputs(), num_inputs));
    }
    KILN_C_CHECK_ARG(num_outputs == m.num_outputs(), "method '%s' has %zu outputs, %zu slots were given",
                     method->name.c_str(), m.num_outputs(), num_outputs);
    KILN_C_CHECK_ARG(inputs != nullptr || num_inputs == 0, "inputs is NULL");
    KILN_C_CHECK_ARG(outputs != nullptr || num_outputs == 0, "outputs is NULL");
    for (size_t i = 0; i < num_inputs; ++i) {
      if (kiln_status* bad = check_tensor_arg(inputs[i], "input", i)) return bad;
    }
    for (size_t i = 0; i < num_outputs; ++i) {
      if (outputs[i] == nullptr) continue;
      if (kiln_status* bad = check_tensor_arg(outputs[i], "output slot", i)) return bad;
      outputs[i]->fresh = false;
    }
    kiln_status* bad;
    {
      // The turn covers binding, execution and the copy-out, so concurrent callers never mix.
      std::lock_guard<kiln::Method> turn(m);
      bad = run_locked(method, inputs, num_inputs, outputs, num_outputs);
    }
    for (size_t i = 0; i < num_outputs; ++i) {
      if (outputs[i] == nullptr || !outputs[i]->fresh) continue;
      outputs[i]->fresh = false;
      if (bad != nullptr) {  // only what this call allocated goes; caller tensors stay
        delete outputs[i];
        outputs[i] = nullptr;
      }
    }
    return bad;
  });
}

kiln_status* method_reset_state(kiln_method* method) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(method, kMethodMagic, "method");
    method->method().reset_state();
    return nullptr;
  });
}

// ---- tensors ----

kiln_status* tensor_create_view(void* data, size_t capacity, kiln_dtype dtype, const int64_t* sizes, size_t ndim,
                                kiln_tensor** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = nullptr;
    size_t nbytes = 0;
    if (kiln_status* bad = checked_nbytes(function_, dtype, sizes, ndim, &nbytes)) return bad;
    KILN_C_CHECK_ARG(nbytes <= capacity, "the sizes need %zu bytes, the buffer has %zu", nbytes, capacity);
    KILN_C_CHECK_ARG(data != nullptr || capacity == 0, "data is NULL");
    auto* t = new kiln_tensor();
    t->tensor.reset(data, kiln::Span<const int64_t>(sizes, ndim), static_cast<kiln::ScalarType>(dtype), capacity);
    *out = t;
    return nullptr;
  });
}

kiln_status* tensor_create(kiln_dtype dtype, const int64_t* sizes, size_t ndim, kiln_tensor** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = nullptr;
    size_t nbytes = 0;
    if (kiln_status* bad = checked_nbytes(function_, dtype, sizes, ndim, &nbytes)) return bad;
    size_t capacity = (std::max<size_t>(nbytes, 1) + 63) / 64 * 64;
    void* data = std::aligned_alloc(64, capacity);
    if (data == nullptr) {
      return make_status(KILN_ERROR_OUT_OF_MEMORY, kiln::format("tensor_create: %zu bytes", nbytes));
    }
    std::memset(data, 0, capacity);
    auto* t = new kiln_tensor();
    t->owned = data;
    t->tensor.reset(data, kiln::Span<const int64_t>(sizes, ndim), static_cast<kiln::ScalarType>(dtype), capacity);
    *out = t;
    return nullptr;
  });
}

void tensor_free(kiln_tensor* tensor) { free_handle(tensor, kTensorMagic); }

kiln_status* tensor_dtype(const kiln_tensor* tensor, kiln_dtype* out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(tensor, kTensorMagic, "tensor");
    KILN_C_CHECK_ARG(out != nullptr, "out is NULL");
    *out = static_cast<kiln_dtype>(tensor->tensor.dtype());
    return nullptr;
  });
}

kiln_status* tensor_sizes(const kiln_tensor* tensor, int64_t* sizes, size_t max_dims, size_t* ndim) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(tensor, kTensorMagic, "tensor");
    KILN_C_CHECK_ARG(ndim != nullptr, "ndim is NULL");
    KILN_C_CHECK_ARG(sizes != nullptr || max_dims == 0, "sizes is NULL");
    auto s = tensor->tensor.sizes();
    *ndim = s.size();
    for (size_t d = 0; d < s.size() && d < max_dims; ++d) sizes[d] = s[d];
    return nullptr;
  });
}

kiln_status* tensor_data(const kiln_tensor* tensor, void** data, size_t* nbytes) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_C_CHECK_HANDLE(tensor, kTensorMagic, "tensor");
    KILN_C_CHECK_ARG(data != nullptr, "data is NULL");
    *data = tensor->tensor.data();
    if (nbytes != nullptr) *nbytes = tensor->tensor.nbytes();
    return nullptr;
  });
}

// ---- the tables ----

kiln_api make_api() {
  kiln_api t{};
  t.version = KILN_C_API_VERSION;
  t.struct_size = sizeof(kiln_api);
  t.status_code = status_code;
  t.status_message = status_message;
  t.code_name = code_name;
  t.status_free = status_free;
  t.build_info = build_info;
  t.set_num_threads = set_num_threads;
  t.num_threads = num_threads;
  t.load_library = load_library;
  t.registered_kernel_count = registered_kernel_count;
  t.registered_backend_count = registered_backend_count;
  t.load_options_create = load_options_create;
  t.load_options_free = load_options_free;
  t.load_options_set_kernels = load_options_set_kernels;
  t.load_options_set_isa = load_options_set_isa;
  t.load_options_set_max_memory = load_options_set_max_memory;
  t.load_options_set_map_file = load_options_set_map_file;
  t.program_load = program_load;
  t.program_load_from_buffer = program_load_from_buffer;
  t.program_load_from_copy = program_load_from_copy;
  t.program_free = program_free;
  t.program_method_count = program_method_count;
  t.program_method_name = program_method_name;
  t.program_load_method = program_load_method;
  t.method_free = method_free;
  t.method_name = method_name;
  t.method_tensor_count = method_tensor_count;
  t.method_tensor_spec = method_tensor_spec;
  t.method_run = method_run;
  t.method_reset_state = method_reset_state;
  t.tensor_create_view = tensor_create_view;
  t.tensor_create = tensor_create;
  t.tensor_free = tensor_free;
  t.tensor_dtype = tensor_dtype;
  t.tensor_sizes = tensor_sizes;
  t.tensor_data = tensor_data;
  return t;
}

const kiln_api* get_api(uint32_t version, kiln_status** status) {
  if (status != nullptr) *status = nullptr;
  if (version >= 1 && version <= KILN_C_API_VERSION) {
    static const kiln_api table = make_api();
    return &table;
  }
  if (status != nullptr) {
    *status = make_status(
        KILN_ERROR_ABI_MISMATCH,
        version == 0 ? kiln::format("kiln C API version 0 does not exist: versions start at 1")
                     : kiln::format("this libkiln.so.0 (kiln %s) serves kiln C API versions 1 to %d, and version %u "
                                    "was asked for: the caller was built against a newer kiln/c_api.h than this "
                                    "library; install a kiln whose C API version is at least %u",
                                    KILN_VERSION_STRING, KILN_C_API_VERSION, version, version));
  }
  return nullptr;
}

const char* version_string() { return KILN_VERSION_STRING; }

}  // namespace

namespace kiln::c_internal {

kiln_status* make_status(const Status& status) noexcept { return from(status); }

kiln_status* out_of_memory() noexcept {
  static kiln_status* s = new (std::nothrow) kiln_status(KILN_ERROR_OUT_OF_MEMORY, "out of memory");
  return s;
}

kiln_status* unexpected_exception(const char* function, const char* what) noexcept {
  try {
    return ::make_status(KILN_ERROR_INTERNAL, std::string(function) + ": unexpected C++ exception" +
                                                  (what != nullptr ? std::string(": ") + what : std::string()));
  } catch (...) {
    return out_of_memory();
  }
}

void retire(void* husk, void (*destroy)(void*)) noexcept { quarantine().retire(husk, destroy); }

kiln_status* read_load_options(const kiln_load_options* options, const char* function, LoadOptions* out) noexcept {
  return guarded(function, [&]() -> kiln_status* { return options_of(function, options, out); });
}

}  // namespace kiln::c_internal

extern "C" KILN_C_EXPORT const kiln_api_base* kiln_get_api_base(void) {
  static const kiln_api_base base = {sizeof(kiln_api_base), KILN_C_API_VERSION, get_api,    version_string,
                                     status_code,           status_message,     status_free};
  return &base;
}
