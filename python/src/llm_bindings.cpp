// kiln._kiln.llm: bindings of libkiln_llm.so.0 (tokenizer, chat template, GGUF
// reader, runner). The Python API is python/kiln/llm/; this is its native layer.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
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
    case T::Float32: case T::Float64: return nb::float_(v.f);
    case T::Array: {
      nb::list out;
      if (v.array_type == T::String) for (const auto& s : v.strings) out.append(to_str(s));
      else if (v.array_type == T::Float32 || v.array_type == T::Float64) for (double f : v.floats) out.append(f);
      else if (v.array_type == T::Bool) for (int64_t i : v.ints) out.append(nb::bool_(i != 0));
      else for (int64_t i : v.ints) out.append(i);
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

llm::GenerateOptions make_options(int32_t max_new_tokens, float temperature, int32_t top_k, float top_p, float min_p,
                                  float repetition_penalty, int64_t seed, std::vector<std::string> stop_strings,
                                  std::vector<int32_t> stop_tokens, bool ignore_eos) {
  llm::GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.sampling.temperature = temperature;
  o.sampling.top_k = top_k;
  o.sampling.top_p = top_p;
  o.sampling.min_p = min_p;
  o.sampling.repetition_penalty = repetition_penalty;
  o.sampling.seed = seed;
  o.stop_strings = std::move(stop_strings);
  o.stop_tokens = std::move(stop_tokens);
  o.ignore_eos = ignore_eos;
  return o;
}

nb::dict stats_dict(const llm::GenerationStats& s) {
  nb::dict d;
  d["load_ms"] = s.load_ms;
  d["prompt_tokens"] = s.prompt_tokens;
  d["reused_tokens"] = s.reused_tokens;
  d["generated_tokens"] = s.generated_tokens;
  d["time_to_first_token_ms"] = s.time_to_first_token_ms;
  d["prefill_ms"] = s.prefill_ms;
  d["decode_ms"] = s.decode_ms;
  d["prefill_tokens_per_s"] = s.prefill_tokens_per_s;
  d["decode_tokens_per_s"] = s.decode_tokens_per_s;
  d["finish_reason"] = s.finish_reason;
  return d;
}

nb::dict config_dict(const llm::ModelConfig& c) {
  nb::dict d;
  d["architecture"] = c.architecture;
  d["name"] = to_str(c.name);
  d["vocab_size"] = c.vocab_size;
  d["context_length"] = c.context_length;
  d["max_tokens_per_call"] = c.max_tokens_per_call;
  d["bos_id"] = c.bos_id;
  d["eos_id"] = c.eos_id;
  d["add_bos"] = c.add_bos;
  d["stop_ids"] = nb::cast(c.stop_ids);
  d["weights"] = c.weights;
  return d;
}

std::vector<llm::ChatMessage> to_messages(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::vector<llm::ChatMessage> out;
  for (const auto& m : messages) out.push_back({m.first, m.second});
  return out;
}

}  // namespace

void bind_llm(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("llm", "Native layer of kiln.llm (libkiln_llm.so.0)");

  nb::class_<llm::Tokenizer>(m, "Tokenizer")
      .def_static("from_json", [](const std::string& text) { return take(llm::Tokenizer::from_json(text)); })
      .def_static("from_json_file", [](const std::string& path) { return take(llm::Tokenizer::from_json_file(path)); })
      .def_static("from_gguf", [](const std::string& path) { return take(llm::Tokenizer::from_gguf_file(path)); })
      .def("to_json", &llm::Tokenizer::to_json)
      .def("encode", [](const llm::Tokenizer& t, const std::string& text, bool parse_special) {
        nb::gil_scoped_release release;
        return t.encode(text, parse_special);
      }, nb::arg("text"), nb::arg("parse_special") = true)
      .def("decode", [](const llm::Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
        return to_str(take(t.decode(ids, skip_special)));
      }, nb::arg("ids"), nb::arg("skip_special") = false)
      .def_prop_ro("vocab_size", &llm::Tokenizer::vocab_size)
      .def("id_to_token", [](const llm::Tokenizer& t, int32_t id) { return to_str(t.id_to_token(id)); })
      .def("token_to_id", [](const llm::Tokenizer& t, const std::string& s) { return t.token_to_id(s); })
      .def("token_bytes", [](const llm::Tokenizer& t, int32_t id) {
        std::string b = t.token_bytes(id);
        return nb::bytes(b.data(), b.size());
      })
      .def("is_special", &llm::Tokenizer::is_special)
      .def_prop_ro("special_ids", &llm::Tokenizer::special_ids)
      .def_prop_ro("bos_id", &llm::Tokenizer::bos_id)
      .def_prop_ro("eos_id", &llm::Tokenizer::eos_id);

  nb::class_<llm::StreamDecoder>(m, "StreamDecoder")
      .def(nb::init<const llm::Tokenizer&, bool>(), nb::arg("tokenizer"), nb::arg("skip_special") = false)
      .def("push", [](llm::StreamDecoder& d, int32_t id) { return to_str(take(d.push(id))); })
      .def("flush", [](llm::StreamDecoder& d) { return to_str(d.flush()); });

  nb::class_<llm::ChatTemplate>(m, "ChatTemplate")
      .def_static("from_jinja", [](const std::string& jinja) { return take(llm::ChatTemplate::from_jinja(jinja)); })
      .def_prop_ro("format", &llm::ChatTemplate::format)
      .def_prop_ro("default_system", &llm::ChatTemplate::default_system)
      .def("apply", [](const llm::ChatTemplate& t, const std::vector<std::pair<std::string, std::string>>& messages,
                       bool add_generation_prompt) {
        return take(t.apply(to_messages(messages), add_generation_prompt));
      }, nb::arg("messages"), nb::arg("add_generation_prompt") = true);

  // The runner's sampler on its own, for a caller's own decoding loop (and for testing it on logits
  // no model would produce).
  nb::class_<llm::Sampler>(m, "Sampler")
      .def("__init__", [](llm::Sampler* self, float temperature, int32_t top_k, float top_p, float min_p,
                          float repetition_penalty, int64_t seed) {
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
      }, nb::arg("temperature") = 0.8f, nb::arg("top_k") = 40, nb::arg("top_p") = 0.95f, nb::arg("min_p") = 0.05f,
         nb::arg("repetition_penalty") = 1.0f, nb::arg("seed") = -1)
      .def("sample", [](llm::Sampler& s, std::vector<float> logits, const std::vector<int32_t>& history) {
        if (logits.empty()) raise(kiln::Status(kiln::Error::InvalidArgument, "Sampler.sample: no logits"));
        return s.sample(kiln::Span<float>(logits.data(), logits.size()),
                        kiln::Span<const int32_t>(history.data(), history.size()));
      }, nb::arg("logits"), nb::arg("history") = std::vector<int32_t>{});

  m.def("read_gguf", &read_gguf);
  m.def("ggml_type_name", &llm::ggml_type_name);

  nb::class_<llm::Runner>(m, "Runner")
      .def_static("load", [](const std::string& path, uint64_t max_memory_bytes, const std::string& kernels,
                             const std::string& isa, int num_threads) {
        llm::RunnerOptions o;
        o.load.max_memory_bytes = max_memory_bytes;
        o.load.kernels = kernels;
        o.load.isa = isa;
        o.num_threads = num_threads;
        nb::gil_scoped_release release;
        auto r = llm::Runner::load(path, o);
        nb::gil_scoped_acquire acquire;
        return take(std::move(r));
      })
      .def_prop_ro("config", [](const llm::Runner& r) { return config_dict(r.config()); })
      .def_prop_ro("tokenizer", [](const llm::Runner& r) { return r.tokenizer(); })
      .def_prop_ro("chat_template", [](const llm::Runner& r) -> nb::object {
        return r.chat_template() ? nb::cast(*r.chat_template()) : nb::none();
      })
      .def("begin", [](llm::Runner& r, std::vector<int32_t> prompt, int32_t max_new_tokens, float temperature,
                       int32_t top_k, float top_p, float min_p, float repetition_penalty, int64_t seed,
                       std::vector<std::string> stop_strings, std::vector<int32_t> stop_tokens, bool ignore_eos) {
        llm::GenerateOptions o = make_options(max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                                              seed, std::move(stop_strings), std::move(stop_tokens), ignore_eos);
        kiln::Status st;
        {
          nb::gil_scoped_release release;
          st = r.begin(std::move(prompt), o);
        }
        if (!st.is_ok()) raise(st);
      })
      .def("next", [](llm::Runner& r) {
        std::string piece;
        kiln::Result<bool> more = false;
        {
          nb::gil_scoped_release release;
          more = r.next(&piece);
        }
        bool m = take(std::move(more));
        return nb::make_tuple(m, to_str(piece));
      })
      .def("cancel", &llm::Runner::cancel)
      .def("chat_prompt", [](const llm::Runner& r, const std::vector<std::pair<std::string, std::string>>& messages) {
        if (r.chat_template() == nullptr) {
          raise(kiln::Status(kiln::Error::NotSupported, "this program has no chat template kiln knows"));
        }
        return take(r.chat_template()->apply(to_messages(messages), true));
      })
      .def_prop_ro("stats", [](const llm::Runner& r) { return stats_dict(r.stats()); })
      .def_prop_ro("generated_tokens", [](const llm::Runner& r) { return r.generated_tokens(); })
      .def("reset", &llm::Runner::reset);
}
