// Runner: text generation from one .kiln LLM program (weights, tokenizer, chat
// template and config all come from the file).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.h"
#include "kiln/llm/api.h"
#include "kiln/llm/chat.h"
#include "kiln/llm/sampler.h"
#include "kiln/llm/tokenizer.h"
#include "kiln/program.h"

namespace kiln::llm {

// The model config the exporter stores as metadata kConfigKey (JSON; docs/llm.md).
struct ModelConfig {
  std::string architecture;         // "llama"
  std::string name;                 // the model's name, informational
  int32_t vocab_size = 0;           // logits per token
  int32_t context_length = 0;       // positions the program's KV cache holds
  int32_t max_tokens_per_call = 0;  // largest token count one call takes (the prefill chunk)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;           // prepend bos_id to every prompt
  std::vector<int32_t> stop_ids;  // tokens that end generation (eos and end-of-turn)
  std::string weights;            // "float32", "q4_1", ... informational
};

struct GenerateOptions {
  int32_t max_new_tokens = 256;
  SamplingOptions sampling;
  // Generation stops after any of these strings (not part of the returned
  // text) or tokens (in addition to the config's stop_ids).
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_tokens;
  // Do not stop at the model's own stop tokens (ModelConfig::stop_ids): benchmarks.
  bool ignore_eos = false;
  // Set to true (from any thread) to stop at the next token: finish_reason "cancelled".
  const std::atomic<bool>* cancel = nullptr;
};

struct GenerationStats {
  double load_ms = 0;  // Runner::load: program, tokenizer, method
  // Its parts: the file mapped and verified (Program::load), the config, tokenizer and chat template
  // read, and the method loaded (kernels chosen, weights packed or mapped from the packed cache).
  double load_program_ms = 0;
  double load_metadata_ms = 0;
  double load_method_ms = 0;
  double queue_ms = 0;  // BatchRunner: from submit() to a slot
  int32_t prompt_tokens = 0;
  int32_t reused_tokens = 0;  // prompt tokens whose KV cache entries were kept from the last call
  int32_t generated_tokens = 0;
  double time_to_first_token_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  double prefill_tokens_per_s = 0;  // prompt tokens computed / prefill time
  double decode_tokens_per_s = 0;   // tokens after the first / decode time
  // "stop_token", "stop_string", "max_new_tokens", "context_full", "cancelled"
  std::string finish_reason;
};

// Called with each new piece of text (never half a UTF-8 character); return
// false to stop generating (finish_reason "cancelled").
using TextCallback = std::function<bool(std::string_view piece)>;

struct RunnerOptions {
  LoadOptions load;
  // > 0: the runtime's thread pool size (kiln::set_num_threads); 0 leaves it.
  int num_threads = 0;
};

namespace internal {
struct RunnerState;
}

// The KV cache persists across calls: a prompt that starts with the tokens of
// the last call (a chat's history) computes only what is new.
//
// Threads (docs/threads-and-files.md). A Runner is one KV cache and one
// generation at a time; calls on it take turns as a Method's do:
//  - Runner is Lockable (lock, try_lock, unlock). A thread that holds it may
//    call everything; what stats() and generated_tokens() return is its own
//    until it unlocks:
//        { std::lock_guard<kiln::llm::Runner> turn(runner);
//          auto text = runner.generate(prompt, options);
//          auto tokens = runner.generated_tokens();
//        }
//  - A thread that does not hold the Runner may still call it alone. A call
//    (begin, next, generate, generate_from_tokens, chat) that overlaps another
//    thread's call or turn is refused with Error::Busy before it touches
//    anything, and so is a call made from inside a call of the same Runner
//    (from a TextCallback): a generation in progress is never disturbed.
//  - cancel() may be called from any thread at any time, without the turn.
//  - reset() waits for the turn another thread holds, so it lands between calls.
//  - Each begin() starts a new generation with a new generation() id and ends
//    the one before it. A pull-style caller that lets go of the turn between
//    next() calls checks generation() when it takes the turn again: another
//    id means another caller's generation superseded its own.
//  - A Runner must not be moved or destroyed while a thread holds or calls it.
class KILN_LLM_API Runner {
 public:
  // InvalidProgram when the file lacks kiln.llm metadata or it does not match
  // the program. A tokenizer with fewer tokens than the program has logits (a
  // padded output layer) is accepted: the extra ids are never sampled (their
  // logits are masked). A tokenizer with more tokens than logits is refused.
  static Result<Runner> load(const std::string& path, const RunnerOptions& options = {});

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  // nullptr when the program's chat template is missing or not recognized.
  const ChatTemplate* chat_template() const;

  // Generates after `prompt` (encoded with special tokens parsed) and returns the
  // new text; streams it to `on_text` as it comes. InvalidArgument for an empty
  // prompt or one that leaves no room in the context.
  Result<std::string> generate(std::string_view prompt, const GenerateOptions& options = {},
                               const TextCallback& on_text = {});
  Result<std::string> generate_from_tokens(std::vector<int32_t> prompt, const GenerateOptions& options = {},
                                           const TextCallback& on_text = {});
  // Renders `messages` with the chat template (NotSupported without one), stops
  // at the end of the assistant's turn too, and generates the answer.
  Result<std::string> chat(const std::vector<ChatMessage>& messages, const GenerateOptions& options = {},
                           const TextCallback& on_text = {});

  // Step by step (what generate() does, for pull-style streaming): begin() runs
  // the prefill, each next() returns the next piece of text ("" when a token
  // completed no character yet) and false once generation has finished.
  Status begin(std::vector<int32_t> prompt, const GenerateOptions& options);
  Result<bool> next(std::string* piece);
  // Ends the generation in progress at its next token (finish_reason
  // "cancelled"); from any thread, without the turn. No effect when none is
  // in progress; the next begin() starts afresh.
  void cancel();
  // The id of the latest begin() (0 before the first): see Threads above.
  uint64_t generation() const;

  // Tokens of the last generation (prompt excluded) and its stats.
  const std::vector<int32_t>& generated_tokens() const;
  const GenerationStats& stats() const;
  // Forgets the KV cache, and ends a generation in progress (finish_reason
  // "cancelled"): the next prompt is computed from scratch.
  void reset();

  // The turn (see Threads above): waits for it, takes it if free, gives it back.
  void lock();
  bool try_lock();
  void unlock();

  Runner(Runner&&) noexcept;
  Runner& operator=(Runner&&) noexcept;
  ~Runner();

 private:
  explicit Runner(std::unique_ptr<internal::RunnerState> state);
  // The calls above, for a caller that has the turn.
  Status begin_in_turn(std::vector<int32_t> prompt, const GenerateOptions& options);
  Result<bool> next_in_turn(std::string* piece);
  Result<std::string> generate_in_turn(std::vector<int32_t> prompt, const GenerateOptions& options,
                                       const TextCallback& on_text);
  std::unique_ptr<internal::RunnerState> s_;
};

}  // namespace kiln::llm
