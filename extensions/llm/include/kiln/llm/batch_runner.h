// BatchRunner: many generations at once from one .kiln LLM program, one per KV cache slot,
// their next tokens computed together in one forward call (continuous batching).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/llm/runner.h"

namespace kiln::llm {

struct BatchOptions {
  LoadOptions load;
  // > 0: the runtime's thread pool size (kiln::set_num_threads); 0 leaves it.
  int num_threads = 0;
  // Slots to use, at most the program's (kiln llm export --slots N); 0: all of them.
  int slots = 0;
};

// The most alternatives a request's logprobs may ask for.
inline constexpr int kMaxTopLogprobs = 20;

struct RequestOptions {
  // What Runner::generate takes; `cancel` is not read (BatchRunner::cancel ends a request).
  GenerateOptions generate;
  // -1: none. n >= 0: every token event carries the token's log-probability and the n most
  // likely tokens' (n <= kMaxTopLogprobs), from the model's logits before sampling options.
  int32_t logprobs = -1;
  // A constrained request is sampled only with a token mask (set_token_mask): without one it
  // waits in its slot.
  bool constrained = false;
};

struct TokenEvent {
  uint64_t request = 0;
  int32_t token = -1;  // -1: the event carries no token (a cancellation; a stop token is not emitted)
  std::string text;    // the new text: never half a UTF-8 character, never a possible stop string's start
  float logprob = 0;   // with logprobs >= 0
  std::vector<std::pair<int32_t, float>> top_logprobs;  // most likely first
  bool finished = false;
  GenerationStats stats;  // the request's; when finished, finish_reason as Runner's or "error"
  std::string error;      // with finish_reason "error": what failed (the request's forward call)
};

namespace internal {
struct BatchState;
}

// How it schedules (docs/llm.md, "Batched generation"):
//  - submit() queues a request (FIFO); a step admits queued requests into free slots. A free slot
//    keeps the tokens of the request it served, so a new request goes to the free slot whose
//    tokens share the longest prefix with its prompt (a conversation's earlier turns, a common
//    system prompt) and computes only the rest; with none in common, to the least recently used.
//  - step() runs one forward call: the next token of every active request ready for it (M rows in
//    every linear), or a chunk of one request's prompt. While requests are decoding, prompt chunks
//    and decode steps alternate, so a long prompt delays each decoding request by one chunk at a time.
//  - Each request samples with its own options and seed: the same seed gives the same text
//    whatever else is in the batch, and greedy requests get what Runner::generate gives them.
//
// Threads: step() is called from one thread at a time (a worker); submit(), set_token_mask() and
// cancel() from any thread, also while step() runs.
class KILN_LLM_API BatchRunner {
 public:
  // What Runner::load checks, and InvalidArgument for more slots than the program has.
  static Result<BatchRunner> load(const std::string& path, const BatchOptions& options = {});

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const ChatTemplate* chat_template() const;  // nullptr: none known
  int slots() const;

  // Queues a request and returns its id. InvalidArgument (nothing queued) for options out of
  // range, an empty prompt or one that leaves no room in the context.
  Result<uint64_t> submit(std::vector<int32_t> prompt, const RequestOptions& options);
  // The chat template's prompt for `messages`, its end-of-turn strings added to `options`.
  Result<std::vector<int32_t>> chat_prompt(const std::vector<ChatMessage>& messages, RequestOptions* options) const;
  // The tokens allowed for the next token sampled for `request` only: ceil(vocab_size / 32)
  // words, token i allowed iff bit i % 32 of word i / 32 is set. InvalidArgument for another
  // length or a mask that allows no token; an empty mask clears it; no effect for a request that
  // is not queued or running.
  Status set_token_mask(uint64_t request, std::vector<uint32_t> mask);
  // Ends `request` at the next step (finish_reason "cancelled") and frees its slot.
  void cancel(uint64_t request);

  // One forward call (or none when nothing is ready); appends this step's events to *events.
  Status step(std::vector<TokenEvent>* events);
  int queued() const;
  int active() const;

  BatchRunner(BatchRunner&&) noexcept;
  BatchRunner& operator=(BatchRunner&&) noexcept;
  ~BatchRunner();

 private:
  explicit BatchRunner(std::unique_ptr<internal::BatchState> state);
  std::unique_ptr<internal::BatchState> s_;
};

}  // namespace kiln::llm
