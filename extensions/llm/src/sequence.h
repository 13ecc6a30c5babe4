// Sequence: the text side of one generation, shared by Runner and BatchRunner: options, sampler,
// the streaming decoder, text held back while it may begin a stop string, the tokens, the stats.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/llm/runner.h"

namespace kiln::llm::internal {

// InvalidArgument naming what is wrong with `options` or `prompt` (empty, a token outside the
// vocabulary, no room left in the context); prepends BOS when the config says so.
Status prepare_prompt(const ModelConfig& config, const GenerateOptions& options, std::vector<int32_t>* prompt);

struct Sequence {
  GenerateOptions options;  // stop_tokens include the config's stop ids unless ignore_eos
  std::optional<Sampler> sampler;
  std::optional<StreamDecoder> decoder;
  std::string held;              // text held back while it may be the start of a stop string
  std::vector<int32_t> history;  // prompt + generated: what the repetition penalty sees
  std::vector<int32_t> generated;
  GenerationStats stats;
  int32_t decode_steps = 0;  // forward calls of one token
  std::chrono::steady_clock::time_point started;
  bool active = false;

  // A new generation after `prompt` (checked by prepare_prompt).
  void start(const ModelConfig& config, const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
             const GenerateOptions& generate_options);
  // Takes the sampled `token`, whose position in the cache would be `position`: appends the text
  // it completes to *piece and returns true when the generation ends there (stats.finish_reason:
  // a stop token, which is not emitted, a stop string, max_new_tokens, the end of the context).
  Result<bool> accept(int32_t token, int32_t position, int32_t context_length, std::string* piece);
  // Ends the generation for `reason`; flush: the held text and the decoder's rest go to *piece.
  void finish(const char* reason, bool flush, std::string* piece);
  // After a forward call of one token that took `ms`.
  void count_decode_step(double ms);
};

}  // namespace kiln::llm::internal
