// The LLM runner's C API (kiln/llm/c_api.h): a versioned table over kiln::llm::Runner, with the
// core C API's statuses (c_api/c_api_internal.h) and a catch-all in every entry point.
#include "kiln/llm/c_api.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "c_api/c_api_internal.h"
#include "kiln/llm/runner.h"
#include "kiln/version.h"

namespace {

constexpr uint32_t kRunnerMagic = 0x4b4c4c4du;  // "KLLM"
constexpr uint32_t kFreedMagic = 0x4b444541u;   // the core's mark of a freed handle

}  // namespace

struct kiln_llm_runner {
  explicit kiln_llm_runner(kiln::llm::Runner r) : held(std::move(r)) {}
  kiln::llm::Runner& runner() { return *held; }  // engaged while the magic says live
  const kiln::llm::Runner& runner() const { return *held; }
  uint32_t magic = kRunnerMagic;
  std::optional<kiln::llm::Runner> held;  // released at free; the husk waits in the core's quarantine
  std::string finish_reason;              // what stats() hands out, kept until the next generation
};

namespace {

kiln_status* status(kiln::Error code, std::string message) {
  return kiln::c_internal::make_status(kiln::Status(code, std::move(message)));
}

using kiln::c_internal::copy_prefix;
using kiln::c_internal::guarded;

// A live runner handle, or the status that says why `runner` is not one.
kiln_status* check_runner(const kiln_llm_runner* runner, const char* function) {
  if (runner == nullptr) return status(kiln::Error::InvalidArgument, std::string(function) + ": runner is NULL");
  if (runner->magic == kRunnerMagic) return nullptr;
  return status(kiln::Error::InvalidArgument,
                std::string(function) + (runner->magic == kFreedMagic ? ": runner was already freed"
                                                                      : ": runner is not a kiln_llm_runner"));
}

#define KILN_LLM_C_CHECK(runner)                                 \
  do {                                                           \
    if (kiln_status* bad_ = check_runner((runner), function_)) { \
      return bad_;                                               \
    }                                                            \
  } while (0)

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

kiln_status* generate_options_init(kiln_llm_generate_options* options) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    kiln::llm::GenerateOptions defaults;
    kiln_llm_generate_options filled{};
    filled.max_new_tokens = defaults.max_new_tokens;
    filled.temperature = defaults.sampling.temperature;
    filled.top_k = defaults.sampling.top_k;
    filled.top_p = defaults.sampling.top_p;
    filled.min_p = defaults.sampling.min_p;
    filled.repetition_penalty = defaults.sampling.repetition_penalty;
    filled.seed = defaults.sampling.seed;
    filled.ignore_eos = defaults.ignore_eos ? 1 : 0;
    return copy_prefix(function_, filled, options);
  });
}

// The C++ options of a caller's struct: fields beyond its struct_size keep their defaults.
kiln_status* to_options(const kiln_llm_generate_options* in, kiln::llm::GenerateOptions* out) {
  if (in == nullptr) return nullptr;
  if (in->struct_size < sizeof(size_t)) {
    return status(kiln::Error::InvalidArgument, "generate: options->struct_size is not set");
  }
  kiln_llm_generate_options o{};
  o.struct_size = sizeof(o);
  if (kiln_status* bad = generate_options_init(&o)) return bad;
  std::memcpy(static_cast<void*>(&o), in, std::min(in->struct_size, sizeof(o)));
  if (o.max_new_tokens < 0) return status(kiln::Error::InvalidArgument, "generate: max_new_tokens is negative");
  out->max_new_tokens = o.max_new_tokens;
  out->sampling.temperature = o.temperature;
  out->sampling.top_k = o.top_k;
  out->sampling.top_p = o.top_p;
  out->sampling.min_p = o.min_p;
  out->sampling.repetition_penalty = o.repetition_penalty;
  out->sampling.seed = o.seed;
  out->ignore_eos = o.ignore_eos != 0;
  return nullptr;
}

kiln_status* runner_load(const char* path, const kiln_load_options* options, int32_t num_threads,
                         kiln_llm_runner** out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    if (path == nullptr || out == nullptr) {
      return status(kiln::Error::InvalidArgument, "runner_load: path or out is NULL");
    }
    *out = nullptr;
    kiln::llm::RunnerOptions o;
    if (kiln_status* bad = kiln::c_internal::read_load_options(options, "runner_load", &o.load)) return bad;
    o.num_threads = std::max(num_threads, 0);
    auto runner = kiln::llm::Runner::load(path, o);
    if (!runner.ok()) return kiln::c_internal::make_status(runner.status());
    *out = new kiln_llm_runner(std::move(runner).value());
    return nullptr;
  });
}

void runner_free(kiln_llm_runner* runner) {
  if (runner == nullptr || runner->magic != kRunnerMagic) return;
  runner->magic = kFreedMagic;
  runner->held.reset();  // the program, its KV cache and tokenizer go now
  std::string().swap(runner->finish_reason);
  kiln::c_internal::retire(runner, [](void* husk) { delete static_cast<kiln_llm_runner*>(husk); });
}

kiln_status* generate(kiln_llm_runner* runner, const char* prompt, const kiln_llm_generate_options* options,
                      kiln_llm_text_callback on_text, void* user_data, char** text) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_LLM_C_CHECK(runner);
    if (prompt == nullptr) return status(kiln::Error::InvalidArgument, "generate: prompt is NULL");
    if (text != nullptr) *text = nullptr;
    kiln::llm::GenerateOptions o;
    if (kiln_status* bad = to_options(options, &o)) return bad;
    kiln::llm::TextCallback callback;
    if (on_text != nullptr) {
      callback = [on_text, user_data](std::string_view piece) {
        return on_text(user_data, piece.data(), piece.size()) != 0;
      };
    }
    auto result = runner->runner().generate(prompt, o, callback);
    if (!result.ok()) return kiln::c_internal::make_status(result.status());
    if (text != nullptr) *text = copy_string(*result);
    return nullptr;
  });
}

kiln_status* cancel(kiln_llm_runner* runner) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_LLM_C_CHECK(runner);
    runner->runner().cancel();
    return nullptr;
  });
}

kiln_status* reset(kiln_llm_runner* runner) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_LLM_C_CHECK(runner);
    runner->runner().reset();
    return nullptr;
  });
}

kiln_status* encode(const kiln_llm_runner* runner, const char* text, size_t size, int32_t parse_special, int32_t* ids,
                    size_t capacity, size_t* count) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_LLM_C_CHECK(runner);
    if ((text == nullptr && size > 0) || count == nullptr || (ids == nullptr && capacity > 0)) {
      return status(kiln::Error::InvalidArgument, "encode: text, ids or count is NULL");
    }
    std::vector<int32_t> tokens =
        runner->runner().tokenizer().encode(std::string_view(text == nullptr ? "" : text, size), parse_special != 0);
    *count = tokens.size();
    std::copy_n(tokens.begin(), std::min(capacity, tokens.size()), ids);
    return nullptr;
  });
}

kiln_status* decode(const kiln_llm_runner* runner, const int32_t* ids, size_t count, int32_t skip_special,
                    char** text) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_LLM_C_CHECK(runner);
    if ((ids == nullptr && count > 0) || text == nullptr) {
      return status(kiln::Error::InvalidArgument, "decode: ids or text is NULL");
    }
    *text = nullptr;
    auto decoded = runner->runner().tokenizer().decode(kiln::Span<const int32_t>(ids, count), skip_special != 0);
    if (!decoded.ok()) return kiln::c_internal::make_status(decoded.status());
    *text = copy_string(*decoded);
    return nullptr;
  });
}

kiln_status* stats(const kiln_llm_runner* runner, kiln_llm_stats* out) {
  const char* function_ = __func__;  // inside the lambda, __func__ is "operator()"
  return guarded(function_, [&]() -> kiln_status* {
    KILN_LLM_C_CHECK(runner);
    auto* r = const_cast<kiln_llm_runner*>(runner);  // finish_reason is the handle's own storage
    const kiln::llm::GenerationStats& s = r->runner().stats();
    r->finish_reason = s.finish_reason;
    kiln_llm_stats filled{};
    filled.prompt_tokens = s.prompt_tokens;
    filled.reused_tokens = s.reused_tokens;
    filled.generated_tokens = s.generated_tokens;
    filled.load_ms = s.load_ms;
    filled.time_to_first_token_ms = s.time_to_first_token_ms;
    filled.prefill_ms = s.prefill_ms;
    filled.decode_ms = s.decode_ms;
    filled.prefill_tokens_per_s = s.prefill_tokens_per_s;
    filled.decode_tokens_per_s = s.decode_tokens_per_s;
    filled.finish_reason = r->finish_reason.c_str();
    return copy_prefix(function_, filled, out);
  });
}

void string_free(char* text) { std::free(text); }

kiln_llm_api make_api() {
  kiln_llm_api t{};
  t.version = KILN_LLM_C_API_VERSION;
  t.struct_size = sizeof(kiln_llm_api);
  t.generate_options_init = generate_options_init;
  t.runner_load = runner_load;
  t.runner_free = runner_free;
  t.generate = generate;
  t.cancel = cancel;
  t.reset = reset;
  t.encode = encode;
  t.decode = decode;
  t.stats = stats;
  t.string_free = string_free;
  return t;
}

}  // namespace

extern "C" KILN_C_EXPORT const kiln_llm_api* kiln_llm_get_api(uint32_t version, kiln_status** out) {
  if (out != nullptr) *out = nullptr;
  if (version >= 1 && version <= KILN_LLM_C_API_VERSION) {
    static const kiln_llm_api table = make_api();
    return &table;
  }
  if (out != nullptr) {
    *out = guarded("kiln_llm_get_api", [&] {
      return status(kiln::Error::AbiMismatch,
                    kiln::format("this libkiln_llm.so.0 (kiln %s) serves kiln LLM C API versions 1 to %d, and version "
                                 "%u was asked for: install a kiln whose LLM C API version is at least %u",
                                 KILN_VERSION_STRING, KILN_LLM_C_API_VERSION, version, version));
    });
  }
  return nullptr;
}
