// BatchRunner (batch_runner.h): requests in KV cache slots, one forward call per step.
#include "kiln/llm/batch_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <mutex>
#include <numeric>

#include "llm_program.h"
#include "sequence.h"

namespace kiln::llm {

namespace {
using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

namespace internal {

struct BatchRequest {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  RequestOptions options;
  Sequence seq;
  int32_t slot = -1;
  int32_t computed = 0;  // prompt tokens whose keys and values are in the slot
  int32_t pending = -1;  // a token accepted but not in the cache yet: the next decode step's input
  Clock::time_point admitted;
  // Set by other threads, under BatchState::mutex.
  bool cancelled = false;
  bool has_mask = false;
  std::vector<uint32_t> mask;
};

struct Slot {
  std::vector<int32_t> tokens;  // whose keys and values the slot's cache region holds, positions 0..
  BatchRequest* request = nullptr;
  uint64_t last_used = 0;
};

struct BatchState {
  std::unique_ptr<LlmProgram> llm;
  std::vector<Slot> slots;
  // Guards the queue, the running list and the requests' cancelled / mask fields.
  mutable std::mutex mutex;
  std::deque<std::unique_ptr<BatchRequest>> queue;
  std::vector<std::unique_ptr<BatchRequest>> running;
  uint64_t next_id = 1;
  uint64_t clock = 0;
  bool prefill_turn = false;  // the next step takes a prompt chunk if one is waiting
  std::vector<float> logits, row;
  std::vector<int32_t> order;  // token ids sorted for top_logprobs

  explicit BatchState(std::unique_ptr<LlmProgram> p) : llm(std::move(p)) {}

  BatchRequest* find(uint64_t id) {
    for (auto& r : running)
      if (r->id == id) return r.get();
    for (auto& r : queue)
      if (r->id == id) return r.get();
    return nullptr;
  }

  // The free slot that shares the longest prefix with `prompt` (ties and no prefix: the least
  // recently used) and that prefix, at most all but the prompt's last token (its logits are needed).
  std::pair<int32_t, int32_t> pick_slot(const std::vector<int32_t>& prompt) const {
    int32_t best = -1, best_keep = -1;
    for (int32_t i = 0; i < static_cast<int32_t>(slots.size()); ++i) {
      const Slot& slot = slots[static_cast<size_t>(i)];
      if (slot.request != nullptr) continue;
      size_t keep = 0;
      while (keep < slot.tokens.size() && keep < prompt.size() && slot.tokens[keep] == prompt[keep]) ++keep;
      const int32_t k = static_cast<int32_t>(std::min(keep, prompt.size() - 1));
      if (best < 0 || k > best_keep ||
          (k == best_keep && slot.last_used < slots[static_cast<size_t>(best)].last_used)) {
        best = i, best_keep = k;
      }
    }
    return {best, best_keep};
  }

  void admit(Clock::time_point now) {
    while (!queue.empty()) {
      auto [slot, keep] = pick_slot(queue.front()->prompt);
      if (slot < 0) return;
      std::unique_ptr<BatchRequest> r = std::move(queue.front());
      queue.pop_front();
      Slot& s = slots[static_cast<size_t>(slot)];
      s.tokens.resize(static_cast<size_t>(keep));
      s.request = r.get();
      r->slot = slot;
      r->computed = keep;
      r->admitted = now;
      r->seq.stats.reused_tokens = keep;
      r->seq.stats.queue_ms = ms_between(r->seq.started, now);
      running.push_back(std::move(r));
    }
  }

  void release(BatchRequest* r) {
    Slot& s = slots[static_cast<size_t>(r->slot)];
    s.request = nullptr;
    s.last_used = ++clock;
    running.erase(std::find_if(running.begin(), running.end(), [&](auto& p) { return p.get() == r; }));
  }

  TokenEvent finished_event(const BatchRequest& r, std::string text) {
    TokenEvent e;
    e.request = r.id;
    e.text = std::move(text);
    e.finished = true;
    e.stats = r.seq.stats;
    return e;
  }

  // A request needs a mask before sampling when it is constrained.
  static bool can_sample(const BatchRequest& r) { return !r.options.constrained || r.has_mask; }

  // Samples the next token of `r` from logits row `row_index`, accepts it and appends the event;
  // true when the request has finished.
  Result<bool> sample_and_accept(BatchRequest& r, size_t row_index, std::vector<uint32_t> mask, bool masked,
                                 std::vector<TokenEvent>* events) {
    const int32_t vocab = llm->config.vocab_size;
    const float* src = logits.data() + row_index * static_cast<size_t>(vocab);
    row.assign(src, src + vocab);
    TokenEvent e;
    e.request = r.id;
    const int32_t n_top = r.options.logprobs;
    double log_sum = 0;
    if (n_top >= 0) {
      const float top = *std::max_element(row.begin(), row.end());
      double sum = 0;
      for (float l : row) sum += std::exp(static_cast<double>(l) - top);
      log_sum = top + std::log(sum);
      std::vector<int32_t>& ids = order;  // reused: no allocation per row and step
      ids.resize(static_cast<size_t>(vocab));
      std::iota(ids.begin(), ids.end(), 0);
      const size_t n = std::min<size_t>(static_cast<size_t>(n_top), ids.size());
      std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (size_t i = 0; i < n; ++i) e.top_logprobs.emplace_back(ids[i], static_cast<float>(row[ids[i]] - log_sum));
    }
    if (masked) {
      for (int32_t i = 0; i < vocab; ++i) {
        if (((mask[static_cast<size_t>(i / 32)] >> (i % 32)) & 1u) == 0)
          row[i] = -std::numeric_limits<float>::infinity();
      }
    }
    const int32_t token = r.seq.sampler->sample(Span<float>(row.data(), row.size()), r.seq.history);
    if (n_top >= 0) e.logprob = static_cast<float>(src[token] - log_sum);
    const int32_t position = static_cast<int32_t>(slots[static_cast<size_t>(r.slot)].tokens.size());
    auto finished = r.seq.accept(token, position, llm->config.context_length, &e.text);
    if (!finished.ok()) return finished.status();
    e.finished = finished.value();
    if (!(e.finished && r.seq.stats.finish_reason == "stop_token")) e.token = token;
    e.stats = r.seq.stats;
    events->push_back(std::move(e));
    r.pending = finished.value() ? -1 : token;
    return finished.value();
  }
};

}  // namespace internal

BatchRunner::BatchRunner(std::unique_ptr<internal::BatchState> state) : s_(std::move(state)) {}
BatchRunner::BatchRunner(BatchRunner&&) noexcept = default;
BatchRunner& BatchRunner::operator=(BatchRunner&&) noexcept = default;
BatchRunner::~BatchRunner() = default;

Result<BatchRunner> BatchRunner::load(const std::string& path, const BatchOptions& options) {
  RunnerOptions o;
  o.load = options.load;
  o.num_threads = options.num_threads;
  auto llm = internal::LlmProgram::load(path, o);
  if (!llm.ok()) return llm.status();
  const int32_t available = llm.value()->slots;
  KILN_CHECK_OR_RETURN(options.slots >= 0 && options.slots <= available, InvalidArgument,
                       "'%s' has %d KV cache slots (kiln llm export --slots N), %d were asked for", path.c_str(),
                       available, options.slots);
  auto s = std::make_unique<internal::BatchState>(std::move(llm).value());
  s->slots.resize(static_cast<size_t>(options.slots > 0 ? options.slots : available));
  return BatchRunner(std::move(s));
}

const ModelConfig& BatchRunner::config() const { return s_->llm->config; }
const Tokenizer& BatchRunner::tokenizer() const { return s_->llm->tokenizer; }
const ChatTemplate* BatchRunner::chat_template() const { return s_->llm->chat ? &*s_->llm->chat : nullptr; }
int BatchRunner::slots() const { return static_cast<int>(s_->slots.size()); }

int BatchRunner::queued() const {
  std::lock_guard<std::mutex> lock(s_->mutex);
  return static_cast<int>(s_->queue.size());
}

int BatchRunner::active() const {
  std::lock_guard<std::mutex> lock(s_->mutex);
  return static_cast<int>(s_->running.size());
}

Result<std::vector<int32_t>> BatchRunner::chat_prompt(const std::vector<ChatMessage>& messages,
                                                      RequestOptions* options) const {
  auto text = internal::chat_prompt(*s_->llm, messages, &options->generate);
  if (!text.ok()) return text.status();
  return s_->llm->tokenizer.encode(text.value());
}

Result<uint64_t> BatchRunner::submit(std::vector<int32_t> prompt, const RequestOptions& options) {
  KILN_RETURN_IF_ERROR(internal::prepare_prompt(s_->llm->config, options.generate, &prompt));
  KILN_CHECK_OR_RETURN(options.logprobs >= -1 && options.logprobs <= kMaxTopLogprobs, InvalidArgument,
                       "logprobs must be -1 (none) or 0 to %d, got %d", kMaxTopLogprobs, options.logprobs);
  auto r = std::make_unique<internal::BatchRequest>();
  r->options = options;
  r->options.generate.cancel = nullptr;
  r->seq.start(s_->llm->config, s_->llm->tokenizer, prompt, options.generate);
  s_->llm->fill_load_times(&r->seq.stats);
  r->prompt = std::move(prompt);
  std::lock_guard<std::mutex> lock(s_->mutex);
  r->id = s_->next_id++;
  const uint64_t id = r->id;
  s_->queue.push_back(std::move(r));
  return id;
}

Status BatchRunner::set_token_mask(uint64_t request, std::vector<uint32_t> mask) {
  if (mask.empty()) {
    std::lock_guard<std::mutex> lock(s_->mutex);
    if (internal::BatchRequest* r = s_->find(request)) r->has_mask = false;
    return Status::ok();
  }
  const int32_t vocab = s_->llm->config.vocab_size;
  const size_t words = (static_cast<size_t>(vocab) + 31) / 32;
  KILN_CHECK_OR_RETURN(mask.size() == words, InvalidArgument, "a token mask of %zu words, not %zu (vocabulary %d)",
                       mask.size(), words, vocab);
  bool any = false;
  for (int32_t i = 0; i < s_->llm->tokenizer_vocab && !any; ++i)
    any = (mask[static_cast<size_t>(i / 32)] >> (i % 32)) & 1u;
  KILN_CHECK_OR_RETURN(any, InvalidArgument, "the token mask allows no token");
  std::lock_guard<std::mutex> lock(s_->mutex);
  internal::BatchRequest* r = s_->find(request);
  if (r == nullptr) return Status::ok();
  r->mask = std::move(mask);
  r->has_mask = true;
  return Status::ok();
}

void BatchRunner::cancel(uint64_t request) {
  std::lock_guard<std::mutex> lock(s_->mutex);
  internal::BatchRequest* r = s_->find(request);
  if (r != nullptr) r->cancelled = true;
}

Status BatchRunner::step(std::vector<TokenEvent>* events) {
  internal::BatchState& s = *s_;
  std::unique_lock<std::mutex> lock(s.mutex);
  const auto now = Clock::now();
  // Cancellations first: their slots take queued requests below.
  for (auto it = s.queue.begin(); it != s.queue.end();) {
    if ((*it)->cancelled) {
      std::string text;
      (*it)->seq.finish("cancelled", false, &text);
      events->push_back(s.finished_event(**it, ""));
      it = s.queue.erase(it);
    } else {
      ++it;
    }
  }
  for (size_t i = 0; i < s.running.size();) {
    internal::BatchRequest* r = s.running[i].get();
    if (!r->cancelled) {
      ++i;
      continue;
    }
    std::string text;
    r->seq.finish("cancelled", true, &text);
    events->push_back(s.finished_event(*r, std::move(text)));
    s.release(r);
  }
  s.admit(now);

  // One forward call: a prompt chunk of the oldest request still prefilling, or the next token
  // of every request that has one; they alternate while both are waiting.
  internal::BatchRequest* prefill = nullptr;
  std::vector<internal::BatchRequest*> decode;
  for (auto& r : s.running) {
    const bool last_chunk = static_cast<int32_t>(r->prompt.size()) - r->computed <= s.llm->config.max_tokens_per_call;
    if (r->computed < static_cast<int32_t>(r->prompt.size())) {
      if (prefill == nullptr && (!last_chunk || internal::BatchState::can_sample(*r))) prefill = r.get();
    } else if (r->pending >= 0 && internal::BatchState::can_sample(*r)) {
      decode.push_back(r.get());
    }
  }
  if (prefill != nullptr && !decode.empty() && !s.prefill_turn) prefill = nullptr;
  if (prefill == nullptr && decode.empty()) return Status::ok();
  s.prefill_turn = prefill == nullptr;

  std::vector<internal::ForwardRow> rows;
  std::vector<internal::BatchRequest*> sampled;  // rows whose logits are sampled, in row order
  std::vector<std::vector<uint32_t>> masks;
  std::vector<bool> masked;
  auto take_mask = [&](internal::BatchRequest* r) {
    masked.push_back(r->has_mask);
    masks.push_back(std::move(r->mask));
    r->mask.clear();
    r->has_mask = false;
  };
  int32_t n = 1;
  if (prefill != nullptr) {
    const int32_t remaining = static_cast<int32_t>(prefill->prompt.size()) - prefill->computed;
    n = std::min(remaining, s.llm->config.max_tokens_per_call);
    rows.push_back({prefill->slot, prefill->prompt.data() + prefill->computed, prefill->computed});
    if (n == remaining) {
      sampled.push_back(prefill);
      take_mask(prefill);
    }
  } else {
    for (internal::BatchRequest* r : decode) {
      rows.push_back({r->slot, &r->pending, r->computed});
      sampled.push_back(r);
      take_mask(r);
    }
  }
  lock.unlock();

  const auto start = Clock::now();
  Status st = s.llm->forward(rows, n, &s.logits);
  const auto end = Clock::now();

  lock.lock();
  if (!st.is_ok()) {
    // The slots' caches are in an unknown state: those requests end with the error.
    auto fail = [&](internal::BatchRequest* r) {
      s.slots[static_cast<size_t>(r->slot)].tokens.clear();
      std::string text;
      r->seq.finish("error", true, &text);
      TokenEvent e = s.finished_event(*r, std::move(text));
      e.error = st.message();
      events->push_back(std::move(e));
      s.release(r);
    };
    if (prefill != nullptr) fail(prefill);
    for (internal::BatchRequest* r : decode) fail(r);
    return Status::ok();
  }
  if (prefill != nullptr) {
    std::vector<int32_t>& tokens = s.slots[static_cast<size_t>(prefill->slot)].tokens;
    tokens.insert(tokens.end(), prefill->prompt.begin() + prefill->computed,
                  prefill->prompt.begin() + prefill->computed + n);
    prefill->computed += n;
    if (!sampled.empty()) {
      GenerationStats& stats = prefill->seq.stats;
      stats.prefill_ms = ms_between(prefill->admitted, end);
      const int32_t computed = stats.prompt_tokens - stats.reused_tokens;
      stats.prefill_tokens_per_s = stats.prefill_ms > 0 ? computed / (stats.prefill_ms / 1000.0) : 0;
      stats.time_to_first_token_ms = ms_between(prefill->seq.started, end);
    }
  } else {
    for (internal::BatchRequest* r : decode) {
      s.slots[static_cast<size_t>(r->slot)].tokens.push_back(r->pending);
      r->computed = static_cast<int32_t>(s.slots[static_cast<size_t>(r->slot)].tokens.size());
      r->seq.count_decode_step(ms_between(start, end));
    }
  }
  for (size_t i = 0; i < sampled.size(); ++i) {
    internal::BatchRequest* r = sampled[i];
    auto finished = s.sample_and_accept(*r, prefill != nullptr ? 0 : i, std::move(masks[i]), masked[i], events);
    if (!finished.ok()) {
      std::string text;
      r->seq.finish("error", false, &text);
      TokenEvent e = s.finished_event(*r, "");
      e.error = finished.status().message();
      events->push_back(std::move(e));
      s.release(r);
    } else if (finished.value()) {
      s.release(r);
    }
  }
  return Status::ok();
}

}  // namespace kiln::llm
