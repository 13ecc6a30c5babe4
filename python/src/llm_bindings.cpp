// kiln._kiln.llm: bindings of libkiln_llm.so.0 (tokenizer, chat template, GGUF
// reader, runner). The Python API is python/kiln/llm/; this is its native layer.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/llm.h"

namespace nb = nanobind;
namespace llm = kiln::llm;

namespace {

[[noreturn]] void raise(const kiln::Status& status) {
  nb::object cls = nb::module_::import_("kiln.errors").attr("BY_ERROR_NAME")[kiln::error_name(status.code())];
  const std::string& msg = status.message();
  PyObject* text = PyUnicode_DecodeUTF8(msg.data(), static_cast<Py_ssize_t>(msg.size()), "backslashreplace");
  if (text == nullptr) throw nb::python_error();
  PyErr_SetObject(cls.ptr(), text);
  Py_DECREF(text);
  throw nb::python_error();
}

template <typename T>
T take(kiln::Result<T>&& r) {
  if (!r.ok()) raise(r.status());
  return std::move(r).value();
}

// Text from the model or a file may hold anything: never fail on bad UTF-8.
nb::str to_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

nb::object gguf_value(const llm::GgufValue& v) {
  using T = llm::GgufType;
  switch (v.type) {
    case T::String: return to_str(v.str);
    case T::Bool: return nb::bool_(v.i != 0);
    case T::Float32:
    case T::Float64: return nb::float_(v.f);
    case T::Array: {
      nb::list out;
      if (v.array_type == T::String)
        for (const auto& s : v.strings) out.append(to_str(s));
      else if (v.array_type == T::Float32 || v.array_type == T::Float64)
        for (double f : v.floats) out.append(f);
      else if (v.array_type == T::Bool)
        for (int64_t i : v.ints) out.append(nb::bool_(i != 0));
      else
        for (int64_t i : v.ints) out.append(i);
      return out;
    }
    default: return nb::int_(v.i);
  }
}

nb::dict read_gguf(const std::string& path) {
  llm::GgufFile f = take(llm::GgufFile::open(path));
  nb::dict out, meta;
  for (const std::string& key : f.keys()) meta[to_str(key)] = gguf_value(*f.find(key));
  nb::list tensors;
  for (const auto& t : f.tensors()) {
    nb::dict d;
    d["name"] = to_str(t.name);
    d["ggml_type"] = t.ggml_type;
    d["type_name"] = llm::ggml_type_name(t.ggml_type);
    d["dims"] = nb::cast(t.dims);
    d["offset"] = t.offset;
    d["nbytes"] = t.nbytes;
    tensors.append(d);
  }
  out["version"] = f.version();
  out["metadata"] = meta;
  out["tensors"] = tensors;
  return out;
}

// Arguments are converted here, not by nanobind's casters, so that a value
// kiln cannot use (an integer past int32, a str with a lone surrogate, a path
// with a NUL byte) is kiln.InvalidArgument naming the argument, not a
// TypeError listing the overloads.
[[noreturn]] void bad_argument(const std::string& message) {
  raise(kiln::Status(kiln::Error::InvalidArgument, message));
}

std::string describe_value(nb::handle h) {
  PyObject* r = PyObject_Repr(h.ptr());
  if (r == nullptr) {
    PyErr_Clear();
    return "?";
  }
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(r, &size);  // a __repr__ may return anything
  std::string out = utf8 != nullptr ? std::string(utf8, static_cast<size_t>(size)) : "?";
  PyErr_Clear();
  Py_DECREF(r);
  return out.size() > 40 ? out.substr(0, 37) + "..." : out;
}

int64_t int_arg(nb::handle h, const char* name, int64_t lo, int64_t hi) {
  auto fail = [&]() {
    bad_argument(kiln::format("%s must be an integer from %lld to %lld, got %s", name, static_cast<long long>(lo),
                              static_cast<long long>(hi), describe_value(h).c_str()));
  };
  if (PyBool_Check(h.ptr()) || PyFloat_Check(h.ptr())) fail();
  PyObject* index = PyNumber_Index(h.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    fail();
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow != 0 || (v == -1 && PyErr_Occurred()) || v < lo || v > hi) {
    PyErr_Clear();
    fail();
  }
  return v;
}

int32_t int32_arg(nb::handle h, const char* name, int64_t lo = INT32_MIN, int64_t hi = INT32_MAX) {
  return static_cast<int32_t>(int_arg(h, name, lo, hi));
}

float float_arg(nb::handle h, const char* name) {
  double v = PyBool_Check(h.ptr()) ? -1.0 : PyFloat_AsDouble(h.ptr());  // anything with __float__ or __index__
  if (PyBool_Check(h.ptr()) || (v == -1.0 && PyErr_Occurred())) {
    PyErr_Clear();
    bad_argument(kiln::format("%s must be a number, got %s", name, describe_value(h).c_str()));
  }
  return static_cast<float>(v);  // out-of-range values become inf: refused by the option checks
}

bool bool_arg(nb::handle h, const char* name) {
  if (h.ptr() == Py_True) return true;
  if (h.ptr() == Py_False) return false;
  bad_argument(kiln::format("%s must be True or False, got %s", name, describe_value(h).c_str()));
}

std::string text_arg(nb::handle h, const char* name) {
  if (!PyUnicode_Check(h.ptr())) {
    bad_argument(kiln::format("%s must be a str, not %s", name, Py_TYPE(h.ptr())->tp_name));
  }
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
  if (utf8 == nullptr) {
    // Only lone surrogates make a str unencodable (e.g. bytes decoded with
    // errors="surrogateescape": text that was not UTF-8 to begin with).
    PyErr_Clear();
    Py_ssize_t at = 0, n = PyUnicode_GetLength(h.ptr());
    while (at < n) {
      Py_UCS4 c = PyUnicode_ReadChar(h.ptr(), at);
      if (c >= 0xD800 && c <= 0xDFFF) break;
      ++at;
    }
    bad_argument(
        kiln::format("%s is not valid Unicode text: a lone surrogate at character %zd (text that was not "
                     "UTF-8?)",
                     name, at));
  }
  return std::string(utf8, static_cast<size_t>(size));
}

std::string path_arg(nb::handle h, const char* name) {
  // str, bytes or os.PathLike, encoded as the OS does (os.fsencode).
  PyObject* bytes = nullptr;
  if (!PyUnicode_FSConverter(h.ptr(), &bytes)) {
    PyErr_Clear();
    bad_argument(kiln::format("%s must be a path (str, bytes or os.PathLike) without NUL bytes, got %s", name,
                              describe_value(h).c_str()));
  }
  std::string out(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
  Py_DECREF(bytes);
  return out;
}

template <typename T, typename F>
std::vector<T> list_arg(nb::handle h, const char* name, F&& item) {
  if (PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr())) {
    bad_argument(kiln::format("%s must be a sequence, not %s", name, Py_TYPE(h.ptr())->tp_name));
  }
  PyObject* seq = PySequence_Fast(h.ptr(), "");
  if (seq == nullptr) {
    PyErr_Clear();
    bad_argument(kiln::format("%s must be a sequence, not %s", name, Py_TYPE(h.ptr())->tp_name));
  }
  nb::object hold = nb::steal(seq);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  std::vector<T> out;
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    std::string item_name = kiln::format("%s[%zd]", name, i);
    out.push_back(item(nb::handle(PySequence_Fast_GET_ITEM(seq, i)), item_name.c_str()));
  }
  return out;
}

std::vector<int32_t> ids_arg(nb::handle h, const char* name) {
  return list_arg<int32_t>(h, name, [](nb::handle v, const char* n) { return int32_arg(v, n); });
}

std::vector<std::string> texts_arg(nb::handle h, const char* name) {
  return list_arg<std::string>(h, name, [](nb::handle v, const char* n) { return text_arg(v, n); });
}

// [(role, content)] of str pairs.
std::vector<llm::ChatMessage> messages_arg(nb::handle h) {
  return list_arg<llm::ChatMessage>(h, "messages", [](nb::handle m, const char* n) {
    if (!PyTuple_Check(m.ptr()) || PyTuple_GET_SIZE(m.ptr()) != 2) {
      bad_argument(kiln::format("%s must be a (role, content) pair, got %s", n, describe_value(m).c_str()));
    }
    std::string role_name = std::string(n) + " role", content_name = std::string(n) + " content";
    return llm::ChatMessage{text_arg(PyTuple_GET_ITEM(m.ptr(), 0), role_name.c_str()),
                            text_arg(PyTuple_GET_ITEM(m.ptr(), 1), content_name.c_str())};
  });
}

// The options of begin() and generate(), in the order kiln/llm/__init__.py passes them.
llm::GenerateOptions make_options(nb::handle max_new_tokens, nb::handle temperature, nb::handle top_k, nb::handle top_p,
                                  nb::handle min_p, nb::handle repetition_penalty, nb::handle seed,
                                  nb::handle stop_strings, nb::handle stop_tokens, nb::handle ignore_eos) {
  llm::GenerateOptions o;
  o.max_new_tokens = int32_arg(max_new_tokens, "max_new_tokens");
  o.sampling.temperature = float_arg(temperature, "temperature");
  o.sampling.top_k = int32_arg(top_k, "top_k");
  o.sampling.top_p = float_arg(top_p, "top_p");
  o.sampling.min_p = float_arg(min_p, "min_p");
  o.sampling.repetition_penalty = float_arg(repetition_penalty, "repetition_penalty");
  o.sampling.seed = int_arg(seed, "seed", -1, INT64_MAX);
  o.stop_strings = texts_arg(stop_strings, "stop");
  o.stop_tokens = ids_arg(stop_tokens, "stop_tokens");
  o.ignore_eos = bool_arg(ignore_eos, "ignore_eos");
  return o;
}

kiln::LoadOptions load_options_arg(nb::handle max_memory_bytes, nb::handle kernels, nb::handle isa) {
  kiln::LoadOptions o;
  o.max_memory_bytes = static_cast<uint64_t>(int_arg(max_memory_bytes, "max_memory_bytes", 1, INT64_MAX));
  o.kernels = text_arg(kernels, "kernels");
  o.isa = text_arg(isa, "isa");
  return o;
}

nb::dict stats_dict(const llm::GenerationStats& s) {
  nb::dict d;
  d["load_ms"] = s.load_ms;
  d["load_program_ms"] = s.load_program_ms;
  d["load_metadata_ms"] = s.load_metadata_ms;
  d["load_method_ms"] = s.load_method_ms;
  d["queue_ms"] = s.queue_ms;
  d["prompt_tokens"] = s.prompt_tokens;
  d["reused_tokens"] = s.reused_tokens;
  d["generated_tokens"] = s.generated_tokens;
  d["time_to_first_token_ms"] = s.time_to_first_token_ms;
  d["prefill_ms"] = s.prefill_ms;
  d["decode_ms"] = s.decode_ms;
  d["prefill_tokens_per_s"] = s.prefill_tokens_per_s;
  d["decode_tokens_per_s"] = s.decode_tokens_per_s;
  d["finish_reason"] = to_str(s.finish_reason);
  return d;
}

nb::dict config_dict(const llm::ModelConfig& c) {
  nb::dict d;
  d["architecture"] = to_str(c.architecture);
  d["name"] = to_str(c.name);
  d["vocab_size"] = c.vocab_size;
  d["context_length"] = c.context_length;
  d["max_tokens_per_call"] = c.max_tokens_per_call;
  d["bos_id"] = c.bos_id;
  d["eos_id"] = c.eos_id;
  d["add_bos"] = c.add_bos;
  d["stop_ids"] = nb::cast(c.stop_ids);
  d["weights"] = to_str(c.weights);
  return d;
}

// A Runner shared by Python threads (docs/threads-and-files.md): every call
// takes the Runner's turn, waiting for it with the GIL released; a generation
// is identified by the generation() id its begin() returned.
struct PyRunner {
  llm::Runner runner;
  // The thread whose Python call holds the turn (RunnerTurn), if any.
  std::atomic<std::thread::id> turn_holder{};
};

class RunnerTurn {
 public:
  explicit RunnerTurn(PyRunner& self) : self_(self) {
    if (!self.runner.try_lock()) {
      // Taken by another thread (wait), or by this one: a signal handler or a
      // finalizer that ran inside a call of this runner (waiting would never end).
      if (self.turn_holder.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
        raise(kiln::Status(kiln::Error::Busy,
                           "the LLM runner was called again from inside its own call (a signal "
                           "handler or a finalizer?)"));
      }
      nb::gil_scoped_release release;
      self.runner.lock();
    }
    self.turn_holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  ~RunnerTurn() {
    self_.turn_holder.store(std::thread::id(), std::memory_order_relaxed);
    self_.runner.unlock();
  }
  RunnerTurn(const RunnerTurn&) = delete;
  RunnerTurn& operator=(const RunnerTurn&) = delete;

 private:
  PyRunner& self_;
};

// What a finished generation leaves for its caller, read in the caller's turn
// (so it is never another caller's): (tokens, stats).
nb::tuple outcome(const llm::Runner& r) {
  return nb::make_tuple(nb::cast(r.generated_tokens()), stats_dict(r.stats()));
}

// Ends the generation in progress (cancel, then the step that records it), in the turn.
void drain(llm::Runner& r) {
  r.cancel();
  std::string piece;
  while (true) {
    kiln::Result<bool> more = false;
    {
      nb::gil_scoped_release release;
      more = r.next(&piece);
    }
    if (!more.ok() || !more.value()) return;
  }
}

void begin_in_turn(llm::Runner& r, std::vector<int32_t> ids, const llm::GenerateOptions& o) {
  kiln::Status st;
  {
    nb::gil_scoped_release release;
    st = r.begin(std::move(ids), o);
  }
  if (!st.is_ok()) raise(st);
}

}  // namespace

void bind_llm(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("llm", "Native layer of kiln.llm (libkiln_llm.so.0)");

  nb::class_<llm::Tokenizer>(m, "Tokenizer")
      .def_static(
          "from_json", [](nb::handle text) { return take(llm::Tokenizer::from_json(text_arg(text, "text"))); },
          nb::arg("text"))
      .def_static(
          "from_json_file",
          [](nb::handle path) { return take(llm::Tokenizer::from_json_file(path_arg(path, "path"))); }, nb::arg("path"))
      .def_static(
          "from_gguf", [](nb::handle path) { return take(llm::Tokenizer::from_gguf_file(path_arg(path, "path"))); },
          nb::arg("path"))
      .def("to_json",
           [](const llm::Tokenizer& t) {
             std::string json = t.to_json();
             PyObject* o = PyUnicode_DecodeUTF8(json.data(), static_cast<Py_ssize_t>(json.size()), "strict");
             if (o == nullptr) {
               // Replacing the bytes would store another vocabulary than the one read.
               PyErr_Clear();
               raise(kiln::Status(kiln::Error::InvalidProgram,
                                  "the tokenizer's vocabulary holds a token that is not UTF-8 "
                                  "text: it has no tokenizer.json form"));
             }
             return nb::steal<nb::str>(o);
           })
      .def(
          "encode",
          [](const llm::Tokenizer& t, nb::handle text, nb::handle parse_special) {
            std::string s = text_arg(text, "text");
            bool special = bool_arg(parse_special, "parse_special");
            nb::gil_scoped_release release;
            return t.encode(s, special);
          },
          nb::arg("text"), nb::arg("parse_special") = true)
      .def(
          "decode",
          [](const llm::Tokenizer& t, nb::handle ids, nb::handle skip_special) {
            return to_str(take(t.decode(ids_arg(ids, "ids"), bool_arg(skip_special, "skip_special"))));
          },
          nb::arg("ids"), nb::arg("skip_special") = false)
      .def_prop_ro("vocab_size", &llm::Tokenizer::vocab_size)
      .def(
          "id_to_token",
          [](const llm::Tokenizer& t, nb::handle id) { return to_str(t.id_to_token(int32_arg(id, "id"))); },
          nb::arg("id"))
      .def(
          "token_to_id", [](const llm::Tokenizer& t, nb::handle s) { return t.token_to_id(text_arg(s, "token")); },
          nb::arg("token"))
      .def(
          "token_bytes",
          [](const llm::Tokenizer& t, nb::handle id) {
            std::string b = t.token_bytes(int32_arg(id, "id"));
            return nb::bytes(b.data(), b.size());
          },
          nb::arg("id"))
      .def(
          "is_special", [](const llm::Tokenizer& t, nb::handle id) { return t.is_special(int32_arg(id, "id")); },
          nb::arg("id"))
      .def_prop_ro("special_ids", &llm::Tokenizer::special_ids)
      .def_prop_ro("bos_id", &llm::Tokenizer::bos_id)
      .def_prop_ro("eos_id", &llm::Tokenizer::eos_id);

  nb::class_<llm::StreamDecoder>(m, "StreamDecoder")
      .def(nb::init<const llm::Tokenizer&, bool>(), nb::arg("tokenizer"), nb::arg("skip_special") = false)
      .def(
          "push", [](llm::StreamDecoder& d, nb::handle id) { return to_str(take(d.push(int32_arg(id, "id")))); },
          nb::arg("id"))
      .def("flush", [](llm::StreamDecoder& d) { return to_str(d.flush()); });

  nb::class_<llm::ChatTemplate>(m, "ChatTemplate")
      .def_static(
          "from_jinja", [](nb::handle jinja) { return take(llm::ChatTemplate::from_jinja(text_arg(jinja, "jinja"))); },
          nb::arg("jinja"))
      .def_prop_ro("format", [](const llm::ChatTemplate& t) { return to_str(t.format()); })
      .def_prop_ro("default_system", [](const llm::ChatTemplate& t) { return to_str(t.default_system()); })
      .def(
          "apply",
          [](const llm::ChatTemplate& t, nb::handle messages, nb::handle add_generation_prompt) {
            return to_str(
                take(t.apply(messages_arg(messages), bool_arg(add_generation_prompt, "add_generation_prompt"))));
          },
          nb::arg("messages"), nb::arg("add_generation_prompt") = true);

  // The runner's sampler on its own, for a caller's own decoding loop (and for testing it on logits
  // no model would produce).
  nb::class_<llm::Sampler>(m, "Sampler")
      .def(
          "__init__",
          [](llm::Sampler* self, float temperature, int32_t top_k, float top_p, float min_p, float repetition_penalty,
             int64_t seed) {
            llm::SamplingOptions o;
            o.temperature = temperature;
            o.top_k = top_k;
            o.top_p = top_p;
            o.min_p = min_p;
            o.repetition_penalty = repetition_penalty;
            o.seed = seed;
            kiln::Status st = llm::check_sampling_options(o);
            if (!st.is_ok()) raise(st);
            new (self) llm::Sampler(o);
          },
          nb::arg("temperature") = 0.8f, nb::arg("top_k") = 40, nb::arg("top_p") = 0.95f, nb::arg("min_p") = 0.05f,
          nb::arg("repetition_penalty") = 1.0f, nb::arg("seed") = -1)
      .def(
          "sample",
          [](llm::Sampler& s, std::vector<float> logits, const std::vector<int32_t>& history) {
            if (logits.empty()) raise(kiln::Status(kiln::Error::InvalidArgument, "Sampler.sample: no logits"));
            return s.sample(kiln::Span<float>(logits.data(), logits.size()),
                            kiln::Span<const int32_t>(history.data(), history.size()));
          },
          nb::arg("logits"), nb::arg("history") = std::vector<int32_t>{});

  m.def("read_gguf", [](nb::handle path) { return read_gguf(path_arg(path, "path")); }, nb::arg("path"));
  m.def("ggml_type_name", &llm::ggml_type_name);

  nb::class_<PyRunner>(m, "Runner")
      .def_static(
          "load",
          [](nb::handle path, nb::handle max_memory_bytes, nb::handle kernels, nb::handle isa, nb::handle num_threads) {
            std::string p = path_arg(path, "path");
            llm::RunnerOptions o;
            o.load = load_options_arg(max_memory_bytes, kernels, isa);
            o.num_threads = int32_arg(num_threads, "num_threads", 0, kiln::kMaxThreads);
            kiln::Result<llm::Runner> r = [&] {
              nb::gil_scoped_release release;
              return llm::Runner::load(p, o);
            }();
            return new PyRunner{take(std::move(r)), {}};
          },
          nb::rv_policy::take_ownership)
      .def_prop_ro("config", [](const PyRunner& r) { return config_dict(r.runner.config()); })
      .def_prop_ro("tokenizer", [](const PyRunner& r) { return r.runner.tokenizer(); })
      .def_prop_ro("chat_template",
                   [](const PyRunner& r) -> nb::object {
                     return r.runner.chat_template() ? nb::cast(*r.runner.chat_template()) : nb::none();
                   })
      .def("encode",
           [](const PyRunner& r, nb::handle text) {
             std::string s = text_arg(text, "prompt");
             nb::gil_scoped_release release;
             return r.runner.tokenizer().encode(s);
           })
      // begin(prompt ids, options...) -> the generation's id; next(id) and finish(id) refer to it.
      .def("begin",
           [](PyRunner& self, nb::handle prompt, nb::handle max_new_tokens, nb::handle temperature, nb::handle top_k,
              nb::handle top_p, nb::handle min_p, nb::handle repetition_penalty, nb::handle seed,
              nb::handle stop_strings, nb::handle stop_tokens, nb::handle ignore_eos) {
             std::vector<int32_t> ids = ids_arg(prompt, "prompt");
             llm::GenerateOptions o = make_options(max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                                                   seed, stop_strings, stop_tokens, ignore_eos);
             RunnerTurn turn(self);
             begin_in_turn(self.runner, std::move(ids), o);
             return self.runner.generation();
           })
      // next(id) -> (more, piece, outcome): outcome is (tokens, stats) once the
      // generation has finished, else None. Superseded when another generation
      // began since `id` did.
      .def("next",
           [](PyRunner& self, uint64_t id) {
             RunnerTurn turn(self);
             llm::Runner& r = self.runner;
             if (r.generation() != id) {
               nb::object cls = nb::module_::import_("kiln.errors").attr("Superseded");
               PyErr_SetString(cls.ptr(), kiln::format("this stream was superseded: another generation began on its "
                                                       "Runner while the stream was suspended (one Runner serves one "
                                                       "generation at a time; use one Runner per concurrent stream)")
                                              .c_str());
               throw nb::python_error();
             }
             std::string piece;
             kiln::Result<bool> more = false;
             {
               nb::gil_scoped_release release;
               more = r.next(&piece);
             }
             bool m = take(std::move(more));
             return nb::make_tuple(m, to_str(piece), m ? nb::object(nb::none()) : nb::object(outcome(r)));
           })
      // finish(id): ends generation `id` if it is still the runner's (a stream closed
      // early) and returns its outcome; None (and nothing is touched) if another began.
      .def("finish",
           [](PyRunner& self, uint64_t id) -> nb::object {
             RunnerTurn turn(self);
             if (self.runner.generation() != id) return nb::none();
             drain(self.runner);
             return outcome(self.runner);
           })
      // generate(prompt ids, options...) -> (text, tokens, stats): the whole
      // generation in one turn, so concurrent calls each get their own answer.
      .def("generate",
           [](PyRunner& self, nb::handle prompt, nb::handle max_new_tokens, nb::handle temperature, nb::handle top_k,
              nb::handle top_p, nb::handle min_p, nb::handle repetition_penalty, nb::handle seed,
              nb::handle stop_strings, nb::handle stop_tokens, nb::handle ignore_eos) {
             std::vector<int32_t> ids = ids_arg(prompt, "prompt");
             llm::GenerateOptions o = make_options(max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                                                   seed, stop_strings, stop_tokens, ignore_eos);
             RunnerTurn turn(self);
             llm::Runner& r = self.runner;
             begin_in_turn(r, std::move(ids), o);
             std::string text, piece;
             while (true) {
               kiln::Result<bool> more = false;
               {
                 nb::gil_scoped_release release;
                 more = r.next(&piece);
               }
               if (!more.ok()) raise(more.status());
               text += piece;
               if (!more.value()) break;
               // Ctrl-C between tokens: the generation ends (cancelled) before it propagates.
               if (PyErr_CheckSignals() != 0) {
                 nb::python_error interrupted;
                 drain(r);
                 throw interrupted;
               }
             }
             nb::tuple done = outcome(r);
             return nb::make_tuple(to_str(text), done[0], done[1]);
           })
      .def("cancel", [](PyRunner& self) { self.runner.cancel(); })
      .def_prop_ro("generation", [](const PyRunner& self) { return self.runner.generation(); })
      .def("chat_prompt",
           [](const PyRunner& self, nb::handle messages) {
             const llm::ChatTemplate* t = self.runner.chat_template();
             if (t == nullptr)
               raise(kiln::Status(kiln::Error::NotSupported, "this program has no chat template kiln knows"));
             return to_str(take(t->apply(messages_arg(messages), true)));
           })
      .def_prop_ro("stats",
                   [](PyRunner& self) {
                     RunnerTurn turn(self);
                     return stats_dict(self.runner.stats());
                   })
      .def_prop_ro("generated_tokens",
                   [](PyRunner& self) {
                     RunnerTurn turn(self);
                     return self.runner.generated_tokens();
                   })
      .def("reset", [](PyRunner& self) {
        RunnerTurn turn(self);
        self.runner.reset();
      });

  nb::class_<llm::TokenEvent>(m, "TokenEvent")
      .def_ro("request", &llm::TokenEvent::request)
      .def_ro("token", &llm::TokenEvent::token)
      .def_prop_ro("text", [](const llm::TokenEvent& e) { return to_str(e.text); })
      .def_ro("logprob", &llm::TokenEvent::logprob)
      .def_ro("top_logprobs", &llm::TokenEvent::top_logprobs)
      .def_ro("finished", &llm::TokenEvent::finished)
      .def_prop_ro("finish_reason", [](const llm::TokenEvent& e) { return to_str(e.stats.finish_reason); })
      .def_prop_ro("stats",
                   [](const llm::TokenEvent& e) -> nb::object {
                     return e.finished ? nb::object(stats_dict(e.stats)) : nb::object(nb::none());
                   })
      .def_prop_ro("error", [](const llm::TokenEvent& e) { return to_str(e.error); });

  // The methods that touch requests lock inside BatchRunner; step() runs with the GIL released.
  nb::class_<llm::BatchRunner>(m, "BatchRunner")
      .def_static(
          "load",
          [](nb::handle path, nb::handle max_memory_bytes, nb::handle kernels, nb::handle isa, nb::handle num_threads,
             nb::handle slots) {
            std::string p = path_arg(path, "path");
            llm::BatchOptions o;
            o.load = load_options_arg(max_memory_bytes, kernels, isa);
            o.num_threads = int32_arg(num_threads, "num_threads", 0, kiln::kMaxThreads);
            o.slots = int32_arg(slots, "slots", 0, llm::kMaxSlots);
            kiln::Result<llm::BatchRunner> r = [&] {
              nb::gil_scoped_release release;
              return llm::BatchRunner::load(p, o);
            }();
            return new llm::BatchRunner(take(std::move(r)));
          },
          nb::rv_policy::take_ownership)
      .def_prop_ro("config", [](const llm::BatchRunner& b) { return config_dict(b.config()); })
      .def_prop_ro("tokenizer", [](const llm::BatchRunner& b) { return b.tokenizer(); })
      .def_prop_ro("slots", &llm::BatchRunner::slots)
      .def_prop_ro("queued", &llm::BatchRunner::queued)
      .def_prop_ro("active", &llm::BatchRunner::active)
      .def_prop_ro("chat_template",
                   [](const llm::BatchRunner& b) -> nb::object {
                     return b.chat_template() ? nb::cast(*b.chat_template()) : nb::none();
                   })
      .def("encode",
           [](const llm::BatchRunner& b, nb::handle text) {
             std::string s = text_arg(text, "prompt");
             nb::gil_scoped_release release;
             return b.tokenizer().encode(s);
           })
      .def("chat_prompt",
           [](const llm::BatchRunner& self, nb::handle messages) {
             const llm::ChatTemplate* t = self.chat_template();
             if (t == nullptr)
               raise(kiln::Status(kiln::Error::NotSupported, "this program has no chat template kiln knows"));
             return to_str(take(t->apply(messages_arg(messages), true)));
           })
      .def_prop_ro("chat_stop_strings",
                   [](const llm::BatchRunner& self) {
                     std::vector<std::string> stops;
                     if (self.chat_template() != nullptr) stops = self.chat_template()->stop_strings();
                     return stops;
                   })
      .def("submit",
           [](llm::BatchRunner& self, nb::handle prompt, nb::handle max_new_tokens, nb::handle temperature,
              nb::handle top_k, nb::handle top_p, nb::handle min_p, nb::handle repetition_penalty, nb::handle seed,
              nb::handle stop_strings, nb::handle stop_tokens, nb::handle ignore_eos, nb::handle logprobs,
              nb::handle constrained) {
             llm::RequestOptions o;
             o.generate = make_options(max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed,
                                       stop_strings, stop_tokens, ignore_eos);
             o.logprobs = int32_arg(logprobs, "logprobs");
             o.constrained = bool_arg(constrained, "constrained");
             return take(self.submit(ids_arg(prompt, "prompt"), o));
           })
      .def("set_token_mask",
           [](llm::BatchRunner& self, uint64_t request, nb::handle mask) {
             std::vector<uint32_t> words;
             if (!mask.is_none()) {
               if (!nb::isinstance<nb::bytes>(mask))
                 raise(kiln::Status(kiln::Error::InvalidArgument, "the token mask must be bytes or None"));
               nb::bytes b = nb::borrow<nb::bytes>(mask);
               if (b.size() % 4 != 0 || b.size() == 0)
                 raise(kiln::Status(kiln::Error::InvalidArgument, "the token mask must be whole 32-bit words"));
               words.resize(b.size() / 4);
               std::memcpy(words.data(), b.c_str(), b.size());  // little-endian words (x86-64, aarch64)
             }
             kiln::Status st = self.set_token_mask(request, std::move(words));
             if (!st.is_ok()) raise(st);
           })
      .def("cancel", &llm::BatchRunner::cancel)
      .def("step", [](llm::BatchRunner& self) {
        std::vector<llm::TokenEvent> events;
        kiln::Status st;
        {
          nb::gil_scoped_release release;
          st = self.step(&events);
        }
        if (!st.is_ok()) raise(st);
        return events;
      });
}
