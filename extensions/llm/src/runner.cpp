// Runner: loads an LLM program with its metadata and generates text (prefill in chunks, then token by token).
#include "kiln/llm/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "llm_program.h"
#include "sequence.h"

namespace kiln::llm {

namespace internal {

struct RunnerState {
  std::unique_ptr<LlmProgram> llm;
  std::vector<int32_t> cached;  // tokens whose keys and values are in the cache (slot 0), positions 0..
  Sequence seq;                 // the generation in progress, or the last one
  std::vector<float> logits;
  int32_t next_token = -1;

  // The turn of runner.h's thread contract: held by Runner::lock(), or by one
  // call of a thread that does not hold it. `holder` is the thread that has it;
  // `in_call` (read and written only by that thread) marks a call in progress,
  // so that a call from its own TextCallback is refused instead of reentering.
  std::mutex turn;
  std::atomic<std::thread::id> holder{};
  bool in_call = false;
  std::atomic<uint64_t> generation{0};
  std::atomic<bool> cancel_requested{false};

  explicit RunnerState(std::unique_ptr<LlmProgram> p) : llm(std::move(p)) { llm->fill_load_times(&seq.stats); }

  // Runs ids at positions [pos, pos + n) of slot 0 and leaves the last position's logits in `logits`.
  Status forward(const int32_t* ids, int32_t n, int32_t pos) { return llm->forward({{0, ids, pos}}, n, &logits); }
};

}  // namespace internal

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

Runner::Runner(std::unique_ptr<internal::RunnerState> state) : s_(std::move(state)) {}
Runner::Runner(Runner&&) noexcept = default;
Runner& Runner::operator=(Runner&&) noexcept = default;
Runner::~Runner() = default;

Result<Runner> Runner::load(const std::string& path, const RunnerOptions& options) {
  auto llm = internal::LlmProgram::load(path, options);
  if (!llm.ok()) return llm.status();
  return Runner(std::make_unique<internal::RunnerState>(std::move(llm).value()));
}

const ModelConfig& Runner::config() const { return s_->llm->config; }
const Tokenizer& Runner::tokenizer() const { return s_->llm->tokenizer; }
const ChatTemplate* Runner::chat_template() const { return s_->llm->chat ? &*s_->llm->chat : nullptr; }
const std::vector<int32_t>& Runner::generated_tokens() const { return s_->seq.generated; }
const GenerationStats& Runner::stats() const { return s_->seq.stats; }

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
    if (s.seq.active) {  // a stream suspended between steps: it ends, as if cancelled
      std::string discarded;
      s.seq.finish("cancelled", false, &discarded);
    }
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
  s.seq.active = false;
  s.cancel_requested.store(false, std::memory_order_relaxed);
  const ModelConfig& config = s.llm->config;
  KILN_RETURN_IF_ERROR(internal::prepare_prompt(config, options, &prompt));
  const int32_t n = static_cast<int32_t>(prompt.size());
  s.seq.start(config, s.llm->tokenizer, prompt, options);
  s.llm->fill_load_times(&s.seq.stats);

  // Keep the cache entries of the longest common prefix with the last call;
  // at least the last prompt token is computed again, for its logits.
  size_t keep = 0;
  while (keep < s.cached.size() && keep < prompt.size() && s.cached[keep] == prompt[keep]) ++keep;
  keep = std::min(keep, prompt.size() - 1);
  s.seq.stats.reused_tokens = static_cast<int32_t>(keep);
  s.cached.resize(keep);
  for (int32_t pos = static_cast<int32_t>(keep); pos < n;) {
    int32_t chunk = std::min(config.max_tokens_per_call, n - pos);
    Status st = s.forward(prompt.data() + pos, chunk, pos);
    if (!st.is_ok()) {
      s.cached.clear();  // the cache is in an unknown state
      s.seq.active = false;
      return st;
    }
    s.cached.insert(s.cached.end(), prompt.begin() + pos, prompt.begin() + pos + chunk);
    pos += chunk;
  }
  GenerationStats& stats = s.seq.stats;
  stats.prefill_ms = ms_since(s.seq.started);
  const int32_t computed = n - static_cast<int32_t>(keep);
  stats.prefill_tokens_per_s = stats.prefill_ms > 0 ? computed / (stats.prefill_ms / 1000.0) : 0;
  s.next_token = s.seq.sampler->sample(Span<float>(s.logits.data(), s.logits.size()), s.seq.history);
  stats.time_to_first_token_ms = ms_since(s.seq.started);
  return Status::ok();
}

Result<bool> Runner::next_in_turn(std::string* piece) {
  internal::RunnerState& s = *s_;
  piece->clear();
  if (!s.seq.active) return false;
  if (s.cancel_requested.load(std::memory_order_relaxed) ||
      (s.seq.options.cancel != nullptr && s.seq.options.cancel->load())) {
    s.seq.finish("cancelled", true, piece);
    return true;
  }
  const int32_t token = s.next_token;
  const int32_t pos = static_cast<int32_t>(s.cached.size());
  auto finished = s.seq.accept(token, pos, s.llm->config.context_length, piece);
  if (!finished.ok()) return finished.status();
  if (finished.value()) return true;
  const auto t = Clock::now();
  Status st = s.forward(&token, 1, pos);
  if (!st.is_ok()) {
    s.cached.clear();
    s.seq.active = false;
    return st;
  }
  s.cached.push_back(token);
  s.seq.count_decode_step(ms_since(t));
  s.next_token = s.seq.sampler->sample(Span<float>(s.logits.data(), s.logits.size()), s.seq.history);
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
  return generate_in_turn(s_->llm->tokenizer.encode(prompt), options, on_text);
}

Result<std::string> Runner::chat(const std::vector<ChatMessage>& messages, const GenerateOptions& options,
                                 const TextCallback& on_text) {
  GenerateOptions o = options;
  auto prompt = internal::chat_prompt(*s_->llm, messages, &o);
  if (!prompt.ok()) return prompt.status();
  return generate(prompt.value(), o, on_text);
}

}  // namespace kiln::llm
