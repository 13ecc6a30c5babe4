// LlmProgram: loading and checking an LLM program (llm_program.h), and its forward call.
#include "llm_program.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "json.h"
#include "kiln/thread_pool.h"
#include "runner_metadata.h"

namespace kiln::llm::internal {

namespace {

using Clock = std::chrono::steady_clock;

Status bad_program(const std::string& path, const std::string& what) {
  return Status(Error::InvalidProgram, "'" + path + "': " + what);
}

Result<ModelConfig> parse_config(const std::string& path, std::string_view text) {
  auto parsed = internal::parse_json(text, "kiln.llm.config");
  if (!parsed.ok()) return bad_program(path, parsed.status().message());
  const Json& j = parsed->root();
  if (!j.is_object()) return bad_program(path, "kiln.llm.config is not a JSON object");
  ModelConfig c;
  auto str = [&](const char* key, std::string* out) {
    const Json* v = j.get(key);
    if (v && v->is_string()) *out = std::string(v->str());
  };
  auto int32 = [&](const char* key, int32_t* out, bool required) -> Status {
    const Json* v = j.get(key);
    int64_t i;
    if (v == nullptr || v->is_null()) {
      return required ? bad_program(path, format("kiln.llm.config has no '%s'", key)) : Status::ok();
    }
    if (!v->as_int(&i) || i < -1 || i > INT32_MAX) {
      return bad_program(path, format("kiln.llm.config '%s' is not an integer in range", key));
    }
    *out = static_cast<int32_t>(i);
    return Status::ok();
  };
  str("architecture", &c.architecture);
  str("name", &c.name);
  str("weights", &c.weights);
  KILN_RETURN_IF_ERROR(int32("vocab_size", &c.vocab_size, true));
  KILN_RETURN_IF_ERROR(int32("context_length", &c.context_length, true));
  KILN_RETURN_IF_ERROR(int32("max_tokens_per_call", &c.max_tokens_per_call, true));
  KILN_RETURN_IF_ERROR(int32("bos_id", &c.bos_id, false));
  KILN_RETURN_IF_ERROR(int32("eos_id", &c.eos_id, false));
  if (const Json* v = j.get("add_bos"); v && v->is_bool()) c.add_bos = v->b();
  if (const Json* v = j.get("stop_ids"); v && v->is_array()) {
    for (const Json& item : v->items()) {
      int64_t i;
      if (!item.as_int(&i) || i < 0 || i >= c.vocab_size)
        return bad_program(path, "kiln.llm.config stop_ids are out of range");
      c.stop_ids.push_back(static_cast<int32_t>(i));
    }
  }
  if (c.vocab_size < 1 || c.context_length < 2 || c.max_tokens_per_call < 1 || c.bos_id >= c.vocab_size ||
      c.eos_id >= c.vocab_size || (c.add_bos && c.bos_id < 0)) {
    return bad_program(path, "kiln.llm.config has sizes or token ids out of range");
  }
  return c;
}

// The method must be forward(tokens i64[B, T], input_pos i64[B, T], slots i64[B],
// cache_positions i64[L]) -> logits f32[B, 1 or T, vocab] (kiln.llm.model); B's bound is the
// number of KV cache slots.
Status check_method(const std::string& path, const MethodSpec& spec, ModelConfig& config, int32_t* slots) {
  auto fail = [&](const std::string& what) {
    return bad_program(path,
                       "method 'forward' does not have the LLM signature forward(tokens i64[B, T], "
                       "input_pos i64[B, T], slots i64[B], cache_positions i64[L]) -> logits f32[B, T or 1, vocab] "
                       "(a program exported by an older kiln: export it again with `kiln llm export`): " +
                           what);
  };
  auto dynamic = [](const TensorSpec& t, int dim) {
    return std::find(t.dynamic_dims.begin(), t.dynamic_dims.end(), dim) != t.dynamic_dims.end() &&
           t.min_sizes.size() == t.sizes.size() && t.min_sizes[static_cast<size_t>(dim)] <= 1;
  };
  if (spec.inputs.size() != 4) return fail(format("it has %zu inputs", spec.inputs.size()));
  const TensorSpec& tokens = spec.inputs[0];
  const TensorSpec& pos = spec.inputs[1];
  const TensorSpec& slot_ids = spec.inputs[2];
  const TensorSpec& cp = spec.inputs[3];
  if (tokens.dtype != ScalarType::Int64 || tokens.sizes.size() != 2 || pos.dtype != ScalarType::Int64 ||
      pos.sizes != tokens.sizes || slot_ids.dtype != ScalarType::Int64 || slot_ids.sizes.size() != 1 ||
      slot_ids.sizes[0] != tokens.sizes[0]) {
    return fail("inputs 0 to 2 are not tokens i64[B, T], input_pos i64[B, T] and slots i64[B]");
  }
  const int64_t rows = tokens.sizes[0], bound = tokens.sizes[1];
  // Prefill goes in chunks of min(bound, max_tokens_per_call) tokens: none would never end.
  if (bound < 1 || rows < 1) return fail("the token or row dimension holds nothing");
  if (rows > kMaxSlots)
    return fail(format("it takes %lld rows, more than %d", static_cast<long long>(rows), kMaxSlots));
  if (bound > 1 && !dynamic(tokens, 1)) return fail("the token dimension does not go down to 1");
  if (rows > 1 && !dynamic(tokens, 0)) return fail("the row dimension does not go down to 1");
  config.max_tokens_per_call = static_cast<int32_t>(std::min<int64_t>(bound, config.max_tokens_per_call));
  *slots = static_cast<int32_t>(rows);
  // Its bound is checked against the config's context_length by check_context.
  if (cp.dtype != ScalarType::Int64 || cp.sizes.size() != 1 || !dynamic(cp, 0)) {
    return fail("input 3 is not cache_positions i64[L], L dynamic");
  }
  if (spec.outputs.empty() || spec.outputs[0].dtype != ScalarType::Float32 || spec.outputs[0].sizes.size() < 2 ||
      spec.outputs[0].sizes[0] != rows || spec.outputs[0].sizes.back() != config.vocab_size) {
    return fail(format("output 0 is not f32 logits [%lld, *, %d]", static_cast<long long>(rows), config.vocab_size));
  }
  return Status::ok();
}

// What the config says about sizes is checked against what the program holds
// before anything is sized by it: the context must fit the positions the
// method takes (the bound of cache_positions and the largest dimension of its
// state, the KV cache; without either, one call's tokens), and the runner's
// table of positions must fit the memory limit.
Status check_context(const std::string& path, const MethodSpec& spec, const ModelConfig& config,
                     const LoadOptions& options) {
  int64_t positions = spec.inputs[3].sizes[0];
  const char* bound = "the bound of input cache_positions";
  if (!spec.state.empty()) {
    int64_t largest = 0;
    for (const TensorSpec& state : spec.state) {
      for (int64_t size : state.sizes) largest = std::max(largest, size);
    }
    if (largest < positions) {
      positions = largest;
      bound = "the largest dimension of the method's state, its KV cache";
    }
  }
  if (config.context_length > positions) {
    return bad_program(path, format("kiln.llm.config 'context_length' is %d but the program holds %lld positions (%s)",
                                    config.context_length, static_cast<long long>(positions), bound));
  }
  // The runner's input tables: positions, and a row of tokens and positions per slot.
  const uint64_t table_bytes = static_cast<uint64_t>(config.context_length) * sizeof(int64_t) * 3;
  if (table_bytes > options.max_memory_bytes) {
    return Status(Error::OutOfMemory,
                  format("'%s': kiln.llm.config 'context_length' %d needs %llu bytes of positions, more than "
                         "max_memory_bytes (%llu)",
                         path.c_str(), config.context_length, static_cast<unsigned long long>(table_bytes),
                         static_cast<unsigned long long>(options.max_memory_bytes)));
  }
  return Status::ok();
}

}  // namespace

Result<LlmMetadata> read_llm_metadata(const std::string& path, std::string_view config_text,
                                      std::string_view tokenizer_text, const MethodSpec& spec,
                                      const LoadOptions& options) {
  auto config = parse_config(path, config_text);
  if (!config.ok()) return config.status();
  auto tokenizer = Tokenizer::from_json(tokenizer_text);
  if (!tokenizer.ok()) return Status(tokenizer.status()).with_context("'" + path + "': the tokenizer");
  // More logits than tokens is allowed (padded vocabularies): the runner never samples the extra ids.
  if (tokenizer->vocab_size() > config->vocab_size) {
    return bad_program(path, format("the tokenizer has %d tokens but the model only %d logits (kiln.llm.config "
                                    "vocab_size): ids past %d could not be computed",
                                    tokenizer->vocab_size(), config->vocab_size, config->vocab_size));
  }
  if (tokenizer->vocab_size() < 1) return bad_program(path, "the tokenizer has no tokens");
  int32_t slots = 1;
  KILN_RETURN_IF_ERROR(check_method(path, spec, config.value(), &slots));
  KILN_RETURN_IF_ERROR(check_context(path, spec, config.value(), options));
  return LlmMetadata{std::move(config).value(), std::move(tokenizer).value(), slots};
}

Result<std::unique_ptr<LlmProgram>> LlmProgram::load(const std::string& path, const RunnerOptions& options) {
  const auto start = Clock::now();
  if (options.num_threads > 0) set_num_threads(options.num_threads);
  const auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  auto program = Program::load(path, options.load);
  if (!program.ok()) return program.status();
  const double program_ms = ms_since(start);
  const auto metadata_start = Clock::now();
  auto text = [&](const char* key) -> Result<std::string_view> {
    auto bytes = program->metadata(key);
    if (!bytes.ok()) {
      return bad_program(path, format("it is not an LLM program: there is no '%s' metadata (make one with "
                                      "`kiln llm export model.gguf -o model.kiln`)",
                                      key));
    }
    return std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  };
  auto config_text = text(kConfigKey);
  if (!config_text.ok()) return config_text.status();
  auto tokenizer_text = text(kTokenizerKey);
  if (!tokenizer_text.ok()) return tokenizer_text.status();
  auto spec = program->method_spec("forward");
  if (!spec.ok()) return bad_program(path, "it has no method 'forward'");
  auto meta = read_llm_metadata(path, config_text.value(), tokenizer_text.value(), spec.value(), options.load);
  if (!meta.ok()) return meta.status();
  double metadata_ms = ms_since(metadata_start);
  const auto method_start = Clock::now();
  auto method = program->load_method("forward");
  if (!method.ok()) return method.status();
  const double method_ms = ms_since(method_start);
  const auto chat_start = Clock::now();

  auto p =
      std::make_unique<LlmProgram>(std::move(program).value(), std::move(method).value(), std::move(meta->tokenizer));
  p->path = path;
  p->config = std::move(meta->config);
  p->slots = meta->slots;
  p->tokenizer_vocab = p->tokenizer.vocab_size();
  p->arange_.resize(static_cast<size_t>(p->config.context_length));
  for (size_t i = 0; i < p->arange_.size(); ++i) p->arange_[i] = static_cast<int64_t>(i);
  auto jinja = p->program.metadata(kChatTemplateKey);
  if (jinja.ok()) {
    auto chat = ChatTemplate::from_jinja(std::string_view(reinterpret_cast<const char*>(jinja->data()), jinja->size()));
    if (chat.ok())
      p->chat = std::move(chat).value();
    else
      p->chat_error = chat.status();
  } else {
    p->chat_error =
        Status(Error::NotSupported, "'" + path + "' has no chat template (metadata kiln.llm.chat_template)");
  }
  metadata_ms += ms_since(chat_start);
  p->load_ms = ms_since(start);
  p->load_program_ms = program_ms, p->load_metadata_ms = metadata_ms, p->load_method_ms = method_ms;
  return p;
}

Status LlmProgram::forward(const std::vector<ForwardRow>& rows, int32_t n, std::vector<float>* logits) {
  const int64_t b = static_cast<int64_t>(rows.size());
  KILN_CHECK_OR_RETURN(b >= 1 && b <= slots && n >= 1 && n <= config.max_tokens_per_call, Internal,
                       "a forward call of %lld rows of %d tokens", static_cast<long long>(b), n);
  tokens_.clear();
  positions_.clear();
  slot_ids_.clear();
  int32_t end = 0;
  for (const ForwardRow& row : rows) {
    KILN_CHECK_OR_RETURN(row.slot >= 0 && row.slot < slots && row.pos >= 0 && row.pos + n <= config.context_length,
                         Internal, "a forward row in slot %d at positions %d + %d", row.slot, row.pos, n);
    tokens_.insert(tokens_.end(), row.ids, row.ids + n);
    positions_.insert(positions_.end(), arange_.begin() + row.pos, arange_.begin() + row.pos + n);
    slot_ids_.push_back(row.slot);
    end = std::max(end, row.pos + n);
  }
  int64_t token_sizes[2] = {b, n};
  int64_t slot_sizes[1] = {b};
  int64_t cache_sizes[1] = {end};
  std::vector<Tensor> inputs = {Tensor::view(tokens_.data(), Span<const int64_t>(token_sizes, 2), ScalarType::Int64),
                                Tensor::view(positions_.data(), Span<const int64_t>(token_sizes, 2), ScalarType::Int64),
                                Tensor::view(slot_ids_.data(), Span<const int64_t>(slot_sizes, 1), ScalarType::Int64),
                                Tensor::view(arange_.data(), Span<const int64_t>(cache_sizes, 1), ScalarType::Int64)};
  auto out = method.run(inputs);
  if (!out.ok()) return out.status();
  const Tensor& y = out.value()[0];
  const int64_t vocab = config.vocab_size;
  KILN_CHECK_OR_RETURN(y.dtype() == ScalarType::Float32 && y.numel() >= b * vocab && y.numel() % (b * vocab) == 0,
                       Internal, "the logits are %s, not %lld rows of %lld", describe(y).c_str(),
                       static_cast<long long>(b), static_cast<long long>(vocab));
  const int64_t per_row = y.numel() / b;  // [1 or n, vocab]: the last token's are at the end
  logits->resize(static_cast<size_t>(b * vocab));
  for (int64_t r = 0; r < b; ++r) {
    const float* last = y.data_as<float>() + r * per_row + (per_row - vocab);
    float* dst = logits->data() + r * vocab;
    std::copy(last, last + vocab, dst);
    std::fill(dst + tokenizer_vocab, dst + vocab, -std::numeric_limits<float>::infinity());
  }
  return Status::ok();
}

Result<std::string> chat_prompt(const LlmProgram& llm, const std::vector<ChatMessage>& messages,
                                GenerateOptions* options) {
  if (!llm.chat) return llm.chat_error;
  auto prompt = llm.chat->apply(messages, true);
  if (!prompt.ok()) return prompt.status();
  for (const std::string& stop : llm.chat->stop_strings()) {
    options->stop_strings.push_back(stop);
    int32_t id = llm.tokenizer.token_to_id(stop);
    if (id >= 0) options->stop_tokens.push_back(id);
  }
  return prompt;
}

}  // namespace kiln::llm::internal
