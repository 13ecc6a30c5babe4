// kiln._kiln: the Python bindings over the runtime (libkiln.so.0 or, in a static
// build, the runtime embedded in this module). The Python-facing API lives in
// python/kiln/*.py; this module is its thin native layer.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kiln/kiln.h"

// numpy's C API, for creating output arrays without a round trip through Python.
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

namespace nb = nanobind;

namespace {

// Raises the kiln.errors class that matches the Status's kind.
[[noreturn]] void raise_status(const kiln::Status& status) {
  nb::object errors = nb::module_::import_("kiln.errors");
  nb::object cls = errors.attr("BY_ERROR_NAME")[kiln::error_name(status.code())];
  // Messages may quote bytes from a corrupt file: never fail on bad UTF-8.
  const std::string& msg = status.message();
  PyObject* text = PyUnicode_DecodeUTF8(msg.data(), static_cast<Py_ssize_t>(msg.size()), "backslashreplace");
  if (text == nullptr) throw nb::python_error();
  PyErr_SetObject(cls.ptr(), text);
  Py_DECREF(text);
  throw nb::python_error();
}

void check(const kiln::Status& status) {
  if (!status.is_ok()) raise_status(status);
}

template <typename T>
T unwrap(kiln::Result<T>&& result) {
  if (!result.ok()) raise_status(result.status());
  return std::move(result).value();
}

bool to_scalar_type(nb::dlpack::dtype dt, kiln::ScalarType* out) {
  using C = nb::dlpack::dtype_code;
  if (dt.lanes != 1) return false;
  auto code = static_cast<C>(dt.code);
  struct Entry {
    C code;
    uint8_t bits;
    kiln::ScalarType type;
  };
  static const Entry table[] = {
      {C::Float, 32, kiln::ScalarType::Float32},   {C::Float, 64, kiln::ScalarType::Float64},
      {C::Int, 64, kiln::ScalarType::Int64},       {C::Int, 32, kiln::ScalarType::Int32},
      {C::Bool, 8, kiln::ScalarType::Bool},        {C::Float, 16, kiln::ScalarType::Float16},
      {C::Bfloat, 16, kiln::ScalarType::BFloat16}, {C::UInt, 8, kiln::ScalarType::UInt8},
      {C::Int, 8, kiln::ScalarType::Int8},
  };
  for (const Entry& e : table) {
    if (e.code == code && e.bits == dt.bits) {
      *out = e.type;
      return true;
    }
  }
  return false;
}

nb::dlpack::dtype to_dlpack(kiln::ScalarType t) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C c, int bits) { return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1}; };
  switch (t) {
    case kiln::ScalarType::Float32: return make(C::Float, 32);
    case kiln::ScalarType::Float64: return make(C::Float, 64);
    case kiln::ScalarType::Int64: return make(C::Int, 64);
    case kiln::ScalarType::Int32: return make(C::Int, 32);
    case kiln::ScalarType::Bool: return make(C::Bool, 8);
    case kiln::ScalarType::Float16: return make(C::Float, 16);
    case kiln::ScalarType::BFloat16: return make(C::Bfloat, 16);
    case kiln::ScalarType::UInt8: return make(C::UInt, 8);
    case kiln::ScalarType::Int8: return make(C::Int, 8);
  }
  return make(C::Float, 32);
}

nb::dict spec_to_dict(const kiln::TensorSpec& s) {
  nb::dict d;
  d["name"] = s.name;
  d["dtype"] = kiln::scalar_type_name(s.dtype);
  d["shape"] = nb::tuple(nb::cast(s.sizes));
  d["dynamic_dims"] = nb::tuple(nb::cast(s.dynamic_dims));
  d["min_shape"] = nb::tuple(nb::cast(s.min_sizes));
  return d;
}

nb::dict method_spec_to_dict(const kiln::MethodSpec& spec) {
  nb::dict d;
  d["name"] = spec.name;
  nb::list inputs, outputs;
  for (const auto& s : spec.inputs) inputs.append(spec_to_dict(s));
  for (const auto& s : spec.outputs) outputs.append(spec_to_dict(s));
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  nb::list state;
  for (const auto& s : spec.state) state.append(spec_to_dict(s));
  d["state"] = state;
  d["arena_bytes"] = nb::cast(spec.arena_sizes);
  d["num_instructions"] = spec.num_instructions;
  return d;
}

// A loaded program plus, when it borrows a Python buffer, that buffer.
struct PyProgram {
  std::shared_ptr<kiln::Program> program;
  std::shared_ptr<Py_buffer> borrowed;  // released when the last user goes
};

struct PyMethod {
  kiln::Method method;
  std::shared_ptr<kiln::Program> program;
  std::shared_ptr<Py_buffer> borrowed;
  // Contiguous copies of strided inputs, reused across calls (under the turn).
  std::vector<std::vector<uint8_t>> scratch;
  // The thread whose Python call holds the method's turn (Turn), if any.
  std::atomic<std::thread::id> turn_holder{};
  // Set (by the holder) when a conversion of an input called the method again:
  // a converter may swallow that Busy error and report a mere type mismatch.
  bool reentered = false;
};

std::shared_ptr<Py_buffer> hold_buffer(nb::handle obj) {
  auto* view = new Py_buffer();
  if (PyObject_GetBuffer(obj.ptr(), view, PyBUF_SIMPLE) != 0) {
    delete view;
    throw nb::python_error();
  }
  return std::shared_ptr<Py_buffer>(view, [](Py_buffer* v) {
    nb::gil_scoped_acquire gil;
    PyBuffer_Release(v);
    delete v;
  });
}

kiln::LoadOptions load_options(uint64_t max_memory_bytes, const std::string& kernels, const std::string& isa,
                               const std::string& packed_cache, const std::string& gemm_precision,
                               bool map_file = true) {
  kiln::LoadOptions options;
  options.gemm_precision = gemm_precision;
  options.max_memory_bytes = max_memory_bytes;
  options.kernels = kernels;
  options.isa = isa;
  options.packed_cache = packed_cache;
  options.map_file = map_file;
  return options;
}

PyProgram load_buffer(nb::handle obj, uint64_t max_memory_bytes, const std::string& kernels, const std::string& isa,
                      const std::string& packed_cache, const std::string& gemm_precision) {
  std::shared_ptr<Py_buffer> view = hold_buffer(obj);
  kiln::LoadOptions options = load_options(max_memory_bytes, kernels, isa, packed_cache, gemm_precision);
  // Program::load_from_buffer borrows 64-byte aligned memory, which must not
  // change while the program lives. Only a bytes object is sure not to: a
  // read-only view (memoryview.toreadonly(), a read-only mmap) may still be
  // written through its owner or its file, so everything else is copied.
  bool borrow = PyBytes_CheckExact(obj.ptr()) && reinterpret_cast<uintptr_t>(view->buf) % 64 == 0;
  kiln::Result<kiln::Program> program =
      borrow ? kiln::Program::load_from_buffer(view->buf, static_cast<size_t>(view->len), options)
             : kiln::Program::load_from_copy(view->buf, static_cast<size_t>(view->len), options);
  PyProgram out;
  out.program = std::make_shared<kiln::Program>(unwrap(std::move(program)));
  if (borrow) out.borrowed = view;
  return out;
}

// Copies a strided array into `buffer` in row-major order.
void copy_strided(const nb::ndarray<nb::ro, nb::device::cpu>& a, size_t item, std::vector<uint8_t>& buffer) {
  size_t ndim = a.ndim();
  size_t numel = 1;
  for (size_t d = 0; d < ndim; ++d) numel *= a.shape(d);
  buffer.resize(numel * item);
  std::vector<size_t> idx(ndim, 0);
  const auto* base = static_cast<const uint8_t*>(a.data());
  for (size_t n = 0; n < numel; ++n) {
    int64_t offset = 0;
    for (size_t d = 0; d < ndim; ++d) offset += static_cast<int64_t>(idx[d]) * a.stride(d);
    std::memcpy(buffer.data() + n * item, base + offset * static_cast<int64_t>(item), item);
    for (size_t d = ndim; d-- > 0;) {
      if (++idx[d] < a.shape(d)) break;
      idx[d] = 0;
    }
  }
}

bool is_row_major(const nb::ndarray<nb::ro, nb::device::cpu>& a) {
  int64_t expected = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expected) return false;
    expected *= static_cast<int64_t>(a.shape(d));
  }
  return true;
}

// The dtype of a buffer-protocol view (numpy arrays, memoryviews), from its
// struct format and item size; false for anything else.
bool buffer_dtype(const Py_buffer& view, kiln::ScalarType* out) {
  const char* f = view.format != nullptr ? view.format : "B";
  if (*f == '@' || *f == '=' || *f == '<') ++f;  // native order (x86-64 and aarch64 are little-endian)
  if (f[0] == '\0' || f[1] != '\0') return false;
  const Py_ssize_t size = view.itemsize;
  switch (f[0]) {
    case 'f': *out = kiln::ScalarType::Float32; return size == 4;
    case 'd': *out = kiln::ScalarType::Float64; return size == 8;
    case 'e': *out = kiln::ScalarType::Float16; return size == 2;
    case '?': *out = kiln::ScalarType::Bool; return size == 1;
    case 'B': *out = kiln::ScalarType::UInt8; return size == 1;
    case 'b': *out = kiln::ScalarType::Int8; return size == 1;
    case 'i':
    case 'l':
    case 'q':
      if (size == 4)
        *out = kiln::ScalarType::Int32;
      else if (size == 8)
        *out = kiln::ScalarType::Int64;
      else
        return false;
      return true;
    default: return false;
  }
}

// One input of a call and what keeps its memory alive until the call returns.
struct BoundInput {
  Py_buffer view{};
  bool has_view = false;
  nb::object array;  // a torch tensor's numpy view, when the input is one
  ~BoundInput() {
    if (has_view) PyBuffer_Release(&view);
  }
};

// Binds input i from a C-contiguous buffer (numpy arrays: the common case, no
// copy). Returns false, with no Python error set, when the object has no such
// buffer of a known dtype; the caller then takes the general path.
bool bind_buffer(PyMethod& self, size_t i, nb::handle obj, BoundInput& bound) {
  if (PyObject_GetBuffer(obj.ptr(), &bound.view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return false;
  }
  bound.has_view = true;
  kiln::ScalarType dtype;
  if (!buffer_dtype(bound.view, &dtype) || bound.view.ndim > kiln::kMaxDims ||
      reinterpret_cast<uintptr_t>(bound.view.buf) % static_cast<uintptr_t>(bound.view.itemsize) != 0) {
    PyBuffer_Release(&bound.view);
    bound.has_view = false;
    return false;
  }
  int64_t sizes[kiln::kMaxDims];
  for (int d = 0; d < bound.view.ndim; ++d) sizes[d] = bound.view.shape[d];
  check(self.method.set_input(
      i, kiln::Tensor::view(bound.view.buf, kiln::Span<const int64_t>(sizes, static_cast<size_t>(bound.view.ndim)),
                            dtype)));
  return true;
}

// Binds input i from anything nanobind reads as an array (DLPack: torch
// tensors, strided numpy views, ...); strided or misaligned data is copied
// into the method's scratch.
void bind_ndarray(PyMethod& self, size_t i, nb::handle obj) {
  const kiln::MethodSpec& spec = self.method.spec();
  nb::ndarray<nb::ro, nb::device::cpu> a;
  if (!nb::try_cast(obj, a, false)) {
    if (self.reentered) {
      check(kiln::Status(kiln::Error::Busy,
                         kiln::format("method '%s' was called again from inside its own call (by the conversion "
                                      "of input %zu)",
                                      spec.name.c_str(), i)));
    }
    throw nb::type_error(
        kiln::format("input %zu ('%s') is not an array, DLPack or buffer object", i, spec.inputs[i].name.c_str())
            .c_str());
  }
  kiln::ScalarType dtype = kiln::ScalarType::Float32;
  if (!to_scalar_type(a.dtype(), &dtype)) {
    check(
        kiln::Status(kiln::Error::InvalidInput,
                     kiln::format("method '%s' input %zu ('%s'): unsupported element type (DLPack code %d, %d bits)",
                                  spec.name.c_str(), i, spec.inputs[i].name.c_str(), a.dtype().code, a.dtype().bits)));
  }
  if (a.ndim() > static_cast<size_t>(kiln::kMaxDims)) {
    check(kiln::Status(kiln::Error::InvalidInput,
                       kiln::format("method '%s' input %zu ('%s') has %zu dims, at most %d are supported",
                                    spec.name.c_str(), i, spec.inputs[i].name.c_str(), a.ndim(), kiln::kMaxDims)));
  }
  int64_t sizes[kiln::kMaxDims];
  for (size_t d = 0; d < a.ndim(); ++d) sizes[d] = static_cast<int64_t>(a.shape(d));
  const void* data = a.data();
  size_t item = kiln::element_size(dtype);
  // Bind in place when the layout allows; copy only strided or misaligned inputs.
  if (!is_row_major(a) || reinterpret_cast<uintptr_t>(data) % item != 0) {
    self.scratch.resize(spec.inputs.size());
    copy_strided(a, item, self.scratch[i]);
    data = self.scratch[i].data();
  }
  check(self.method.set_input(i, kiln::Tensor::view(data, kiln::Span<const int64_t>(sizes, a.ndim()), dtype)));
}

int numpy_type(kiln::ScalarType t) {
  switch (t) {
    case kiln::ScalarType::Float32: return NPY_FLOAT32;
    case kiln::ScalarType::Float64: return NPY_FLOAT64;
    case kiln::ScalarType::Int64: return NPY_INT64;
    case kiln::ScalarType::Int32: return NPY_INT32;
    case kiln::ScalarType::Bool: return NPY_BOOL;
    case kiln::ScalarType::Float16: return NPY_FLOAT16;
    case kiln::ScalarType::UInt8: return NPY_UINT8;
    case kiln::ScalarType::Int8: return NPY_INT8;
    case kiln::ScalarType::BFloat16: break;
  }
  return -1;
}

// A new numpy array holding a copy of an output (the arena is reused by the next call).
nb::object output_array(const kiln::Tensor& t) {
  const int type = numpy_type(t.dtype());
  if (type < 0) {
    check(kiln::Status(kiln::Error::NotSupported,
                       kiln::format("numpy has no dtype for a %s output", kiln::scalar_type_name(t.dtype()))));
  }
  npy_intp dims[kiln::kMaxDims];
  for (int d = 0; d < t.dim(); ++d) dims[d] = static_cast<npy_intp>(t.sizes()[d]);
  PyObject* array = PyArray_SimpleNew(t.dim(), dims, type);
  if (array == nullptr) throw nb::python_error();
  if (t.nbytes() > 0) std::memcpy(PyArray_DATA(reinterpret_cast<PyArrayObject*>(array)), t.data(), t.nbytes());
  return nb::steal(array);
}

// torch.Tensor or a torch subclass such as Parameter (kiln never imports torch).
bool is_torch_tensor(nb::handle obj) {
  nb::handle type = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())));
  PyObject* module = PyObject_GetAttrString(type.ptr(), "__module__");
  if (module == nullptr) {
    PyErr_Clear();
    return false;
  }
  const char* name = PyUnicode_Check(module) ? PyUnicode_AsUTF8(module) : nullptr;
  const bool torch = name != nullptr && (std::strcmp(name, "torch") == 0 || std::strncmp(name, "torch.", 6) == 0);
  if (name == nullptr) PyErr_Clear();
  Py_DECREF(module);
  return torch;
}

// The Method's turn for one Python call (program.h, Threads): taken at once when
// free (the common case costs one uncontended lock), else waited for with the
// GIL released, so the thread whose turn it is can take the GIL back to finish.
class Turn {
 public:
  explicit Turn(PyMethod& self) : self_(self) {
    if (!self.method.try_lock()) {
      // Taken: by another thread (wait), or by this one, when converting an
      // input called this method again (waiting would never end).
      if (self.turn_holder.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
        self.reentered = true;
        check(kiln::Status(kiln::Error::Busy,
                           kiln::format("method '%s' was called again from inside its own call (by the "
                                        "conversion of one of its inputs)",
                                        self.method.spec().name.c_str())));
      }
      nb::gil_scoped_release release;
      self.method.lock();
    }
    self.turn_holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
    self.reentered = false;
  }
  ~Turn() {
    self_.turn_holder.store(std::thread::id(), std::memory_order_relaxed);
    self_.method.unlock();
  }
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

 private:
  PyMethod& self_;
};

// Method.run(inputs): in the method's turn, binds every input (in place when
// possible), executes with the GIL released, and returns a list of new numpy
// arrays (copied out before the turn ends).
nb::list run_method(PyMethod& self, nb::tuple inputs, kiln::Profile* profile) {
  Turn turn(self);
  const kiln::MethodSpec& spec = self.method.spec();
  const size_t n = inputs.size();
  if (n != spec.inputs.size()) {
    std::string names;
    for (const auto& s : spec.inputs) names += (names.empty() ? "" : ", ") + s.name;
    check(
        kiln::Status(kiln::Error::InvalidInput, kiln::format("method '%s' takes %zu inputs (%s), got %zu",
                                                             spec.name.c_str(), spec.inputs.size(), names.c_str(), n)));
  }
  BoundInput bound[16];
  std::vector<BoundInput> more(n > 16 ? n - 16 : 0);
  for (size_t i = 0; i < n; ++i) {
    BoundInput& b = i < 16 ? bound[i] : more[i - 16];
    nb::handle input = inputs[i];
    if (is_torch_tensor(input)) {
      // Tensor.numpy() is a zero-copy view and much cheaper than a DLPack
      // exchange; it refuses tensors that need grad, carry a conj or neg bit,
      // or live off the CPU.
      static PyObject* numpy_name = PyUnicode_InternFromString("numpy");
      PyObject* view = PyObject_CallMethodNoArgs(input.ptr(), numpy_name);
      if (view == nullptr) {
        // DLPack drops the neg and conj bits (c.conj().imag would be read as
        // its positive values): resolve them into real values first.
        PyErr_Clear();
        static PyObject* resolve_neg = PyUnicode_InternFromString("resolve_neg");
        static PyObject* resolve_conj = PyUnicode_InternFromString("resolve_conj");
        PyObject* resolved = PyObject_CallMethodNoArgs(input.ptr(), resolve_neg);
        PyObject* plain = resolved ? PyObject_CallMethodNoArgs(resolved, resolve_conj) : nullptr;
        Py_XDECREF(resolved);
        if (plain == nullptr) throw nb::python_error();
        b.array = nb::steal(plain);
        input = b.array;
        view = PyObject_CallMethodNoArgs(input.ptr(), numpy_name);
        if (view == nullptr) PyErr_Clear();
      }
      if (view != nullptr) {
        nb::object array = nb::steal(view);
        if (bind_buffer(self, i, array, b)) {
          b.array = std::move(array);
          continue;
        }
      }
    } else if (bind_buffer(self, i, input, b)) {
      continue;
    }
    bind_ndarray(self, i, input);
  }
  kiln::Status status;
  {
    nb::gil_scoped_release release;
    status = profile != nullptr ? self.method.execute(profile) : self.method.execute();
  }
  check(status);
  const size_t outs = self.method.num_outputs();
  nb::list outputs = nb::steal<nb::list>(PyList_New(static_cast<Py_ssize_t>(outs)));
  for (size_t i = 0; i < outs; ++i) {
    PyList_SET_ITEM(outputs.ptr(), static_cast<Py_ssize_t>(i), output_array(self.method.output(i)).release().ptr());
  }
  return outputs;
}

nb::list kernels_list(const std::vector<kiln::KernelInfo>& kernels) {
  nb::list out;
  for (const auto& k : kernels) out.append(nb::make_tuple(k.op_name, k.dtypes, k.library, k.tier));
  return out;
}

nb::list backends_list(const std::vector<kiln::BackendInfo>& backends) {
  nb::list out;
  for (const auto& b : backends) out.append(nb::make_tuple(b.name, b.library));
  return out;
}

}  // namespace

// kiln._kiln.llm: the LLM extension's bindings (llm_bindings.cpp).
void bind_llm(nb::module_& m);

NB_MODULE(_kiln, m) {
  m.doc() = "Native layer of kiln; use the kiln package instead.";
  if (_import_array() < 0) throw nb::python_error();
  m.attr("__version__") = KILN_VERSION_STRING;
  m.attr("ABI_VERSION") = KILN_ABI_VERSION;
#ifdef KILN_STATIC
  m.attr("STATIC_RUNTIME") = true;
#else
  m.attr("STATIC_RUNTIME") = false;
#endif

  nb::class_<PyProgram>(m, "Program")
      .def_prop_ro("method_names", [](const PyProgram& p) { return p.program->method_names(); })
      .def("method_spec",
           [](const PyProgram& p, const std::string& name) {
             return method_spec_to_dict(unwrap(p.program->method_spec(name)));
           })
      .def(
          "load_method",
          [](const PyProgram& p, const std::string& name) {
            kiln::Result<kiln::Method> method = [&] {
              nb::gil_scoped_release release;
              return p.program->load_method(name);
            }();
            return new PyMethod{unwrap(std::move(method)), p.program, p.borrowed, {}, {}};
          },
          nb::rv_policy::take_ownership)
      .def_prop_ro("size_bytes", [](const PyProgram& p) { return p.program->size_bytes(); })
      .def_prop_ro("packed_bytes", [](const PyProgram& p) { return p.program->packed_bytes(); })
      .def_prop_ro("packed_mapped_bytes", [](const PyProgram& p) { return p.program->packed_mapped_bytes(); })
      .def_prop_ro("packed_cache_report", [](const PyProgram& p) { return p.program->packed_cache_report(); })
      .def_prop_ro("producer", [](const PyProgram& p) { return p.program->producer(); })
      .def_prop_ro("metadata_keys", [](const PyProgram& p) { return p.program->metadata_keys(); })
      .def("metadata",
           [](const PyProgram& p, const std::string& key) {
             kiln::Span<const uint8_t> value = unwrap(p.program->metadata(key));
             return nb::bytes(value.data(), value.size());
           })
      .def_prop_ro("borrows_buffer", [](const PyProgram& p) { return p.borrowed != nullptr; });

  nb::class_<PyMethod>(m, "Method")
      .def_prop_ro("spec", [](const PyMethod& self) { return method_spec_to_dict(self.method.spec()); })
      .def("run", [](PyMethod& self, nb::tuple inputs) { return run_method(self, inputs, nullptr); })
      .def("run_profiled", &run_method)
      .def("reset_state",
           [](PyMethod& self) {
             nb::gil_scoped_release release;  // waits for the turn in progress
             self.method.reset_state();
           })
      .def_prop_ro("isa", [](const PyMethod& self) { return kiln::isa_name(self.method.isa()); })
      .def_prop_ro("gemm_precision",
                   [](const PyMethod& self) {
                     return self.method.gemm_precision() == kiln::GemmPrecision::Bfloat16 ? "bfloat16" : "float32";
                   })
      .def_prop_ro("instructions", [](const PyMethod& self) {
        nb::list out;
        for (const kiln::InstructionInfo& info : self.method.instructions()) {
          out.append(
              nb::make_tuple(info.kind, info.op, info.library, info.tier, info.packed_bytes, info.scratch_bytes));
        }
        return out;
      });

  nb::class_<kiln::Profile>(m, "Profile")
      .def(nb::init<>())
      .def_ro("method", &kiln::Profile::method)
      .def_prop_ro("calls",
                   [](const kiln::Profile& p) {
                     nb::list out;
                     for (const kiln::ProfiledCall& c : p.calls) out.append(nb::make_tuple(c.start_ns, c.end_ns));
                     return out;
                   })
      .def_prop_ro(
          "records",
          [](const kiln::Profile& p) {
            auto shapes = [](const std::vector<kiln::ProfiledShape>& v) {
              nb::list out;
              for (const kiln::ProfiledShape& s : v) {
                out.append(nb::make_tuple(kiln::scalar_type_name(s.dtype), nb::tuple(nb::cast(s.sizes))));
              }
              return out;
            };
            nb::list out;
            for (const kiln::ProfiledInstruction& r : p.records) {
              out.append(nb::make_tuple(r.call, r.index, r.start_ns, r.end_ns, shapes(r.inputs), shapes(r.outputs)));
            }
            return out;
          })
      .def_prop_ro(
          "chunks",
          [](const kiln::Profile& p) {
            nb::list out;
            for (const kiln::ProfiledChunk& c : p.chunks)
              out.append(nb::make_tuple(c.call, c.index, c.thread, c.start_ns, c.end_ns, c.job, c.begin, c.end, c.n));
            return out;
          })
      .def_prop_ro("call_ns", &kiln::Profile::call_ns)
      .def_prop_ro("instruction_ns", &kiln::Profile::instruction_ns)
      .def("table", &kiln::Profile::table)
      .def("chrome_trace", &kiln::Profile::chrome_trace)
      .def("clear", &kiln::Profile::clear);

  m.def("load_file", [](const std::string& path, uint64_t max_memory_bytes, const std::string& kernels,
                        const std::string& isa, bool map_file, const std::string& packed_cache,
                        const std::string& gemm_precision) {
    kiln::LoadOptions options = load_options(max_memory_bytes, kernels, isa, packed_cache, gemm_precision, map_file);
    kiln::Result<kiln::Program> program = [&] {
      nb::gil_scoped_release release;
      return kiln::Program::load(path, options);
    }();
    return PyProgram{std::make_shared<kiln::Program>(unwrap(std::move(program))), nullptr};
  });
  m.def("load_buffer", &load_buffer);

  m.def("registered_kernels", [] { return kernels_list(kiln::registered_kernels()); });
  m.def("registered_backends", [] { return backends_list(kiln::registered_backends()); });
  m.def("registration_failures", [] {
    nb::list out;
    for (const auto& f : kiln::registration_failures()) {
      out.append(nb::make_tuple(f.what, f.library, kiln::error_name(f.status.code()), f.status.message()));
    }
    return out;
  });
  m.def("load_library", [](const std::string& path) {
    kiln::LibraryInfo info = unwrap(kiln::load_library(path));
    return nb::make_tuple(info.path, kernels_list(info.kernels), backends_list(info.backends));
  });
  m.def("runtime_library_path", &kiln::runtime_library_path);
  m.def("runtime_copies", &kiln::runtime_copies);
  m.def("check_single_runtime", [] { check(kiln::check_single_runtime()); });
  m.def("num_threads", &kiln::num_threads);
  m.attr("MAX_THREADS") = kiln::kMaxThreads;
  m.def("detected_isa", [] { return kiln::isa_name(kiln::detected_isa()); });
  // Names only: the lists themselves live in kiln/cpu_list.h and kiln/kernel.h.
  m.def("cpu_feature_names", [] {
    std::vector<std::string> out;
    for (kiln::CpuFeature f : kiln::cpu_feature_list()) out.push_back(kiln::cpu_feature_name(f));
    return out;
  });
  m.def("cpu_features", [] {
    std::vector<std::string> out;
    const kiln::CpuFeatures have = kiln::detected_cpu_features();
    for (kiln::CpuFeature f : kiln::cpu_feature_list()) {
      if (have & (kiln::CpuFeatures{1} << static_cast<unsigned>(f))) out.push_back(kiln::cpu_feature_name(f));
    }
    return out;
  });
  m.def("isa_levels", [] {
    std::vector<std::string> out;
    for (kiln::Isa isa : kiln::isa_levels()) out.push_back(kiln::isa_name(isa));
    return out;
  });
  m.def("supported_isas", [] {
    std::vector<std::string> out;
    for (kiln::Isa isa : kiln::supported_isas()) out.push_back(kiln::isa_name(isa));
    return out;
  });
  m.def("isa_features", [](const std::string& name) {
    kiln::Isa isa;
    if (!kiln::parse_isa(name.c_str(), &isa) || !kiln::isa_of_this_architecture(isa)) {
      check(kiln::Status(kiln::Error::InvalidArgument,
                         kiln::format("'%s' is not an instruction-set level of this architecture", name.c_str())));
    }
    std::vector<std::string> out;
    for (kiln::CpuFeature f : kiln::cpu_feature_list()) {
      if (kiln::isa_features(isa) & (kiln::CpuFeatures{1} << static_cast<unsigned>(f))) {
        out.push_back(kiln::cpu_feature_name(f));
      }
    }
    return out;
  });
  m.def("kernel_tiers", [] {
    nb::dict out;
#define KILN_BIND_TIER_(Enum, name, value) out[name] = value;
    KILN_KERNEL_TIER_LIST(KILN_BIND_TIER_)
#undef KILN_BIND_TIER_
    return out;
  });
  m.def("set_num_threads", [](int n) {
    nb::gil_scoped_release release;
    kiln::set_num_threads(n);
  });
  m.def("error_names", [] {
    std::vector<std::string> names;
    for (uint32_t e = 1; e <= static_cast<uint32_t>(kiln::Error::Busy); ++e) {
      names.push_back(kiln::error_name(static_cast<kiln::Error>(e)));
    }
    return names;
  });
  bind_llm(m);
}
