// LlmProgram: an LLM program loaded and checked once (metadata, tokenizer, chat template, the
// method), and its forward call over rows of sequences. Runner (one sequence) and BatchRunner
// (one sequence per KV cache slot) are built on it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/llm/runner.h"

namespace kiln::llm::internal {

// One row of a forward call: `n` tokens of the sequence in KV cache slot `slot`, at positions
// [pos, pos + n).
struct ForwardRow {
  int32_t slot = 0;
  const int32_t* ids = nullptr;
  int32_t pos = 0;
};

struct LlmProgram {
  std::string path;
  Program program;
  Method method;
  ModelConfig config;
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat;
  Status chat_error;  // why there is no chat template
  int32_t slots = 1;  // KV cache regions: rows one forward call takes
  // Ids from here to config.vocab_size have logits but no token: never sampled.
  int32_t tokenizer_vocab = 0;
  double load_ms = 0, load_program_ms = 0, load_metadata_ms = 0, load_method_ms = 0;  // GenerationStats's
  void fill_load_times(GenerationStats* stats) const {
    stats->load_ms = load_ms, stats->load_program_ms = load_program_ms;
    stats->load_metadata_ms = load_metadata_ms, stats->load_method_ms = load_method_ms;
  }

  // Runner::load's checks (InvalidProgram naming what is wrong) and the method loaded.
  static Result<std::unique_ptr<LlmProgram>> load(const std::string& path, const RunnerOptions& options);

  // Runs `rows` (distinct slots, each `n` tokens) in one call and leaves each row's last logits
  // in logits[row * vocab_size ...] (ids past the tokenizer's masked to -inf).
  Status forward(const std::vector<ForwardRow>& rows, int32_t n, std::vector<float>* logits);

  LlmProgram(Program p, Method m, Tokenizer t) : program(std::move(p)), method(std::move(m)), tokenizer(std::move(t)) {}

 private:
  std::vector<int64_t> tokens_, positions_, slot_ids_, arange_;
};

// `messages` rendered with the program's chat template (its error when there is none), and the
// template's end-of-turn strings (and their tokens) added to `options`' stops.
Result<std::string> chat_prompt(const LlmProgram& llm, const std::vector<ChatMessage>& messages,
                                GenerateOptions* options);

}  // namespace kiln::llm::internal
