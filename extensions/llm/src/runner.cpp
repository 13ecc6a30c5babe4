// Runner: loads an LLM program with its metadata and generates text (prefill in chunks, then token by token).
#include "kiln/llm/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "json.h"
#include "kiln/thread_pool.h"
#include "runner_metadata.h"

namespace kiln::llm {

namespace internal {

struct RunnerState {
  std::string path;
  Program program;
  Method method;
  ModelConfig config;
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat;
  Status chat_error;                   // why there is no chat template
  bool cache_positions_input = false;  // the method's third input: arange(L) of the cache slots in use
  std::vector<int64_t> arange;         // 0 .. context_length - 1
  std::vector<int64_t> tokens_buf;
  std::vector<int32_t> cached;  // tokens whose keys and values are in the cache, positions 0..
  GenerationStats stats;
  double load_ms = 0;
  // Ids from here to config.vocab_size have logits but no token: never sampled.
  int32_t tokenizer_vocab = 0;

  // The turn of runner.h's thread contract: held by Runner::lock(), or by one
  // call of a thread that does not hold it. `holder` is the thread that has it;
  // `in_call` (read and written only by that thread) marks a call in progress,
  // so that a call from its own TextCallback is refused instead of reentering.
  std::mutex turn;
  std::atomic<std::thread::id> holder{};
  bool in_call = false;
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> cancel_requested{false};

  // The generation in progress.
  bool active = false;
  GenerateOptions options;
  std::optional<Sampler> sampler;
  std::optional<StreamDecoder> decoder;
  std::string held;              // text held back while it may be the start of a stop string
  std::vector<int32_t> history;  // prompt + generated: what the repetition penalty sees
  std::vector<int32_t> generated;
  std::vector<float> logits;
  int32_t next_token = -1;
  int32_t decode_steps = 0;  // forward calls of one token
  std::chrono::steady_clock::time_point started;

  RunnerState(Program p, Method m, Tokenizer t)
      : program(std::move(p)), method(std::move(m)), tokenizer(std::move(t)) {}

  // Runs ids at positions [pos, pos + n) and leaves the last position's logits in `logits`.
  Status forward(const int32_t* ids, int32_t n, int32_t pos) {
    tokens_buf.assign(ids, ids + n);
    int64_t tok_sizes[2] = {1, n};
    int64_t pos_sizes[1] = {n};
    int64_t cache_sizes[1] = {pos + n};
    std::vector<Tensor> inputs = {
        Tensor::view(tokens_buf.data(), Span<const int64_t>(tok_sizes, 2), ScalarType::Int64),
        Tensor::view(arange.data() + pos, Span<const int64_t>(pos_sizes, 1), ScalarType::Int64)};
    if (cache_positions_input) {
      inputs.push_back(Tensor::view(arange.data(), Span<const int64_t>(cache_sizes, 1), ScalarType::Int64));
    }
    auto out = method.run(inputs);
    if (!out.ok()) return out.status();
    const Tensor& y = out.value()[0];
    const int64_t vocab = config.vocab_size;
    KILN_CHECK_OR_RETURN(y.dtype() == ScalarType::Float32 && y.numel() >= vocab && y.numel() % vocab == 0, Internal,
                         "the logits are %s, not rows of %lld", describe(y).c_str(), static_cast<long long>(vocab));
    const float* last = y.data_as<float>() + (y.numel() - vocab);
    logits.assign(last, last + vocab);
    std::fill(logits.begin() + tokenizer_vocab, logits.end(), -std::numeric_limits<float>::infinity());
    return Status::ok();
  }
};

}  // namespace internal

namespace {

using internal::Json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

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

// The method must be forward(tokens i64[1, T], input_pos i64[T] [, cache_positions i64[L]]) -> logits f32[1, *, vocab].
Status check_method(const std::string& path, const MethodSpec& spec, ModelConfig& config, bool* cache_positions) {
  auto fail = [&](const std::string& what) {
    return bad_program(path,
                       "method 'forward' does not have the LLM signature forward(tokens i64[1, T], "
                       "input_pos i64[T] [, cache_positions i64[L]]) -> logits f32[1, T or 1, vocab]: " +
                           what);
  };
  if (spec.inputs.size() != 2 && spec.inputs.size() != 3) return fail(format("it has %zu inputs", spec.inputs.size()));
  const TensorSpec& tokens = spec.inputs[0];
  const TensorSpec& pos = spec.inputs[1];
  if (tokens.dtype != ScalarType::Int64 || tokens.sizes.size() != 2 || tokens.sizes[0] != 1 ||
      pos.dtype != ScalarType::Int64 || pos.sizes.size() != 1 || pos.sizes[0] != tokens.sizes[1]) {
    return fail("inputs 0 and 1 are not tokens i64[1, T] and input_pos i64[T]");
  }
  const int64_t bound = tokens.sizes[1];
  // Prefill goes in chunks of min(bound, max_tokens_per_call) tokens: none would never end.
  if (bound < 1) return fail("the token dimension holds no token");
  const bool dynamic =
      std::find(tokens.dynamic_dims.begin(), tokens.dynamic_dims.end(), 1) != tokens.dynamic_dims.end();
  if (bound > 1 && (!dynamic || tokens.min_sizes[1] > 1)) return fail("the token dimension does not go down to 1");
  config.max_tokens_per_call = static_cast<int32_t>(std::min<int64_t>(bound, config.max_tokens_per_call));
  *cache_positions = spec.inputs.size() == 3;
  if (*cache_positions) {
    const TensorSpec& cp = spec.inputs[2];
    if (cp.dtype != ScalarType::Int64 || cp.sizes.size() != 1 || cp.sizes[0] < config.context_length ||
        std::find(cp.dynamic_dims.begin(), cp.dynamic_dims.end(), 0) == cp.dynamic_dims.end()) {
      return fail(format("input 2 is not cache_positions i64[<=%d]", config.context_length));
    }
  }
  if (spec.outputs.empty() || spec.outputs[0].dtype != ScalarType::Float32 || spec.outputs[0].sizes.empty() ||
      spec.outputs[0].sizes.back() != config.vocab_size) {
    return fail(format("output 0 is not f32 logits of %d", config.vocab_size));
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
  int64_t positions = spec.inputs[0].sizes[1];
  const char* bound = "the tokens one call takes";
  if (spec.inputs.size() == 3) {
    positions = spec.inputs[2].sizes[0];
    bound = "the bound of input cache_positions";
  }
  if (!spec.state.empty()) {
    int64_t largest = 0;
    for (const TensorSpec& state : spec.state) {
      for (int64_t size : state.sizes) largest = std::max(largest, size);
    }
    if (spec.inputs.size() != 3 || largest < positions) {
      positions = largest;
      bound = "the largest dimension of the method's state, its KV cache";
    }
  }
  if (config.context_length > positions) {
    return bad_program(path, format("kiln.llm.config 'context_length' is %d but the program holds %lld positions (%s)",
                                    config.context_length, static_cast<long long>(positions), bound));
  }
  const uint64_t table_bytes = static_cast<uint64_t>(config.context_length) * sizeof(int64_t);
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

namespace internal {

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
  bool cache_positions = false;
  KILN_RETURN_IF_ERROR(check_method(path, spec, config.value(), &cache_positions));
  KILN_RETURN_IF_ERROR(check_context(path, spec, config.value(), options));
  return LlmMetadata{std::move(config).value(), std::move(tokenizer).value(), cache_positions};
}

}  // namespace internal

Runner::Runner(std::unique_ptr<internal::RunnerState> state) : s_(std::move(state)) {}
Runner::Runner(Runner&&) noexcept = default;
Runner& Runner::operator=(Runner&&) noexcept = default;
Runner::~Runner() = default;

Result<Runner> Runner::load(const std::string& path, const RunnerOptions& options) {
  const auto start = Clock::now();
  if (options.num_threads > 0) set_num_threads(options.num_threads);
  auto program = Program::load(path, options.load);
  if (!program.ok()) return program.status();
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
  auto meta =
      internal::read_llm_metadata(path, config_text.value(), tokenizer_text.value(), spec.value(), options.load);
  if (!meta.ok()) return meta.status();
  auto method = program->load_method("forward");
  if (!method.ok()) return method.status();

  auto s = std::make_unique<internal::RunnerState>(std::move(program).value(), std::move(method).value(),
                                                   std::move(meta->tokenizer));
  s->path = path;
  s->config = std::move(meta->config);
  s->cache_positions_input = meta->cache_positions;
  s->tokenizer_vocab = s->tokenizer.vocab_size();
  s->arange.resize(static_cast<size_t>(s->config.context_length));
  for (size_t i = 0; i < s->arange.size(); ++i) s->arange[i] = static_cast<int64_t>(i);
  auto jinja = s->program.metadata(kChatTemplateKey);
  if (jinja.ok()) {
    auto chat = ChatTemplate::from_jinja(std::string_view(reinterpret_cast<const char*>(jinja->data()), jinja->size()));
    if (chat.ok())
      s->chat = std::move(chat).value();
    else
      s->chat_error = chat.status();
  } else {
    s->chat_error =
        Status(Error::NotSupported, "'" + path + "' has no chat template (metadata kiln.llm.chat_template)");
  }
  s->load_ms = ms_since(start);
  s->stats.load_ms = s->load_ms;
  return Runner(std::move(s));
}

const ModelConfig& Runner::config() const { return s_->config; }
const Tokenizer& Runner::tokenizer() const { return s_->tokenizer; }
const ChatTemplate* Runner::chat_template() const { return s_->chat ? &*s_->chat : nullptr; }
const std::vector<int32_t>& Runner::generated_tokens() const { return s_->generated; }
const GenerationStats& Runner::stats() const { return s_->stats; }

namespace {

bool held_here(const internal::RunnerState& s) {
  return s.holder.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

// The turn for one call (runner.h, Threads): inside this thread's lock() it is
// already there; otherwise it is taken if free. Refused (Busy) when another
// thread has it, or when this thread is inside a call of the Runner already.
class CallTurn {
 public:
  explicit CallTurn(internal::RunnerState& s) : s_(s) {
    if (held_here(s)) {
      if (s.in_call) return;  // from a TextCallback of this Runner's own call
    } else if (s.turn.try_lock()) {
      owned_ = true;
      s.holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
    } else {
      return;
    }
    s.in_call = true;
    entered_ = true;
  }
  ~CallTurn() {
    if (entered_) s_.in_call = false;
    if (owned_) {
      s_.holder.store(std::thread::id(), std::memory_order_relaxed);
      s_.turn.unlock();
    }
  }
  CallTurn(const CallTurn&) = delete;
  CallTurn& operator=(const CallTurn&) = delete;

  Status status() const {
    if (entered_) return Status::ok();
    if (held_here(s_)) {
      return Status(Error::Busy,
                    "the LLM runner was called from inside its own call (a text callback): return "
                    "false from the callback, or call cancel(), to stop the generation");
    }
    return Status(Error::Busy,
                  "the LLM runner is in use by another thread: share a Runner by holding it "
                  "(std::lock_guard<kiln::llm::Runner>) around each call, or load one per thread");
  }

 private:
  internal::RunnerState& s_;
  bool owned_ = false, entered_ = false;
};

}  // namespace

void Runner::reset() {
  auto forget = [&] {
    internal::RunnerState& s = *s_;
    s.cached.clear();
    if (s.active) {  // a stream suspended between steps: it ends, as if cancelled
      s.stats.finish_reason = "cancelled";
      s.stats.generated_tokens = static_cast<int32_t>(s.generated.size());
    }
    s.active = false;
  };
  if (held_here(*s_)) {
    forget();
    return;
  }
  std::lock_guard<std::mutex> lock(s_->turn);
  forget();
}

void Runner::cancel() { s_->cancel_requested.store(true, std::memory_order_relaxed); }

uint64_t Runner::generation() const { return s_->generation.load(std::memory_order_relaxed); }

void Runner::lock() {
  s_->turn.lock();
  s_->holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

bool Runner::try_lock() {
  if (!s_->turn.try_lock()) return false;
  s_->holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
  return true;
}

void Runner::unlock() {
  s_->holder.store(std::thread::id(), std::memory_order_relaxed);
  s_->turn.unlock();
}

Status Runner::begin(std::vector<int32_t> prompt, const GenerateOptions& options) {
  CallTurn turn(*s_);
  KILN_RETURN_IF_ERROR(turn.status());
  return begin_in_turn(std::move(prompt), options);
}

Result<bool> Runner::next(std::string* piece) {
  CallTurn turn(*s_);
  KILN_RETURN_IF_ERROR(turn.status());
  return next_in_turn(piece);
}

Status Runner::begin_in_turn(std::vector<int32_t> prompt, const GenerateOptions& options) {
  internal::RunnerState& s = *s_;
  // A new generation ends the one before, even when this one is refused below.
  s.generation.fetch_add(1, std::memory_order_relaxed);
  s.active = false;
  s.cancel_requested.store(false, std::memory_order_relaxed);
  KILN_RETURN_IF_ERROR(check_sampling_options(options.sampling));
  KILN_CHECK_OR_RETURN(options.max_new_tokens >= 1, InvalidArgument, "max_new_tokens must be at least 1, got %d",
                       options.max_new_tokens);
  KILN_CHECK_OR_RETURN(!prompt.empty(), InvalidArgument, "the prompt is empty");
  for (const std::string& stop : options.stop_strings) {
    KILN_CHECK_OR_RETURN(!stop.empty(), InvalidArgument, "a stop string is empty");
  }
  if (s.config.add_bos && prompt[0] != s.config.bos_id) prompt.insert(prompt.begin(), s.config.bos_id);
  for (int32_t id : prompt) {
    KILN_CHECK_OR_RETURN(id >= 0 && id < s.config.vocab_size, InvalidArgument,
                         "prompt token %d is outside the vocabulary of %d", id, s.config.vocab_size);
  }
  const int32_t n = static_cast<int32_t>(std::min<size_t>(prompt.size(), INT32_MAX));
  KILN_CHECK_OR_RETURN(prompt.size() < static_cast<size_t>(s.config.context_length), InvalidArgument,
                       "the prompt is %zu tokens but the model's context holds %d (export with a larger --context, "
                       "or shorten the prompt)",
                       prompt.size(), s.config.context_length);

  s.started = Clock::now();
  s.stats = GenerationStats();
  s.stats.load_ms = s.load_ms;
  s.stats.prompt_tokens = n;
  s.options = options;
  if (!options.ignore_eos) {
    for (int32_t id : s.config.stop_ids) s.options.stop_tokens.push_back(id);
  }
  s.sampler.emplace(options.sampling);
  s.decoder.emplace(s.tokenizer, /*skip_special=*/true);
  s.held.clear();
  s.generated.clear();
  s.history = prompt;
  s.decode_steps = 0;

  // Keep the cache entries of the longest common prefix with the last call;
  // at least the last prompt token is computed again, for its logits.
  size_t keep = 0;
  while (keep < s.cached.size() && keep < prompt.size() && s.cached[keep] == prompt[keep]) ++keep;
  keep = std::min(keep, prompt.size() - 1);
  s.stats.reused_tokens = static_cast<int32_t>(keep);
  s.cached.resize(keep);
  for (int32_t pos = static_cast<int32_t>(keep); pos < n;) {
    int32_t chunk = std::min(s.config.max_tokens_per_call, n - pos);
    Status st = s.forward(prompt.data() + pos, chunk, pos);
    if (!st.is_ok()) {
      s.cached.clear();  // the cache is in an unknown state
      return st;
    }
    s.cached.insert(s.cached.end(), prompt.begin() + pos, prompt.begin() + pos + chunk);
    pos += chunk;
  }
  s.stats.prefill_ms = ms_since(s.started);
  const int32_t computed = n - static_cast<int32_t>(keep);
  s.stats.prefill_tokens_per_s = s.stats.prefill_ms > 0 ? computed / (s.stats.prefill_ms / 1000.0) : 0;
  s.next_token = s.sampler->sample(Span<float>(s.logits.data(), s.logits.size()), s.history);
  s.stats.time_to_first_token_ms = ms_since(s.started);
  s.active = true;
  return Status::ok();
}

Result<bool> Runner::next_in_turn(std::string* piece) {
  internal::RunnerState& s = *s_;
  piece->clear();
  if (!s.active) return false;
  auto finish = [&](const char* reason, bool flush) {
    if (flush) *piece += s.held + s.decoder->flush();
    s.held.clear();
    s.stats.finish_reason = reason;
    s.stats.generated_tokens = static_cast<int32_t>(s.generated.size());
    s.active = false;
    return true;
  };
  if (s.cancel_requested.load(std::memory_order_relaxed) || (s.options.cancel != nullptr && s.options.cancel->load()))
    return finish("cancelled", true);
  const int32_t token = s.next_token;
  if (std::find(s.options.stop_tokens.begin(), s.options.stop_tokens.end(), token) != s.options.stop_tokens.end()) {
    return finish("stop_token", true);
  }
  s.generated.push_back(token);
  s.history.push_back(token);
  auto text = s.decoder->push(token);
  if (!text.ok()) return text.status();
  s.held += text.value();
  // A stop string ends the text where it starts; otherwise hold back only what
  // could still become one.
  size_t cut = std::string::npos;
  for (const std::string& stop : s.options.stop_strings) cut = std::min(cut, s.held.find(stop));
  if (cut != std::string::npos) {
    *piece = s.held.substr(0, cut);
    s.held.clear();
    return finish("stop_string", false);
  }
  size_t hold = 0;
  for (const std::string& stop : s.options.stop_strings) {
    for (size_t len = std::min(stop.size() - 1, s.held.size()); len > hold; --len) {
      if (s.held.compare(s.held.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  *piece = s.held.substr(0, s.held.size() - hold);
  s.held.erase(0, s.held.size() - hold);

  if (static_cast<int32_t>(s.generated.size()) >= s.options.max_new_tokens) return finish("max_new_tokens", true);
  const int32_t pos = static_cast<int32_t>(s.cached.size());
  if (pos >= s.config.context_length) return finish("context_full", true);
  const auto t = Clock::now();
  Status st = s.forward(&token, 1, pos);
  if (!st.is_ok()) {
    s.cached.clear();
    s.active = false;
    return st;
  }
  s.cached.push_back(token);
  s.stats.decode_ms += ms_since(t);
  s.stats.generated_tokens = static_cast<int32_t>(s.generated.size());
  ++s.decode_steps;
  s.stats.decode_tokens_per_s = s.stats.decode_ms > 0 ? s.decode_steps / (s.stats.decode_ms / 1000.0) : 0;
  s.next_token = s.sampler->sample(Span<float>(s.logits.data(), s.logits.size()), s.history);
  return true;
}

Result<std::string> Runner::generate_from_tokens(std::vector<int32_t> prompt, const GenerateOptions& options,
                                                 const TextCallback& on_text) {
  CallTurn turn(*s_);
  KILN_RETURN_IF_ERROR(turn.status());
  return generate_in_turn(std::move(prompt), options, on_text);
}

Result<std::string> Runner::generate_in_turn(std::vector<int32_t> prompt, const GenerateOptions& options,
                                             const TextCallback& on_text) {
  KILN_RETURN_IF_ERROR(begin_in_turn(std::move(prompt), options));
  std::string all, piece;
  while (true) {
    auto more = next_in_turn(&piece);
    if (!more.ok()) return more.status();
    if (!piece.empty()) {
      all += piece;
      if (on_text && !on_text(piece)) cancel();
    }
    if (!more.value()) break;
  }
  return all;
}

Result<std::string> Runner::generate(std::string_view prompt, const GenerateOptions& options,
                                     const TextCallback& on_text) {
  KILN_CHECK_OR_RETURN(!prompt.empty(), InvalidArgument, "the prompt is empty");
  CallTurn turn(*s_);
  KILN_RETURN_IF_ERROR(turn.status());
  return generate_in_turn(s_->tokenizer.encode(prompt), options, on_text);
}

Result<std::string> Runner::chat(const std::vector<ChatMessage>& messages, const GenerateOptions& options,
                                 const TextCallback& on_text) {
  if (!s_->chat) return s_->chat_error;
  auto prompt = s_->chat->apply(messages, true);
  if (!prompt.ok()) return prompt.status();
  GenerateOptions o = options;
  for (const std::string& stop : s_->chat->stop_strings()) {
    o.stop_strings.push_back(stop);
    int32_t id = s_->tokenizer.token_to_id(stop);
    if (id >= 0) o.stop_tokens.push_back(id);
  }
  return generate(prompt.value(), o, on_text);
}

}  // namespace kiln::llm
