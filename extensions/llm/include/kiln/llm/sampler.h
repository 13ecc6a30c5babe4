// Sampler: picks the next token from logits (greedy, temperature, top-k, top-p, min-p, repetition penalty).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kiln/error.h"
#include "kiln/llm/api.h"
#include "kiln/span.h"

namespace kiln::llm {

struct SamplingOptions {
  // 0: greedy (the highest logit; ties to the lowest id). Otherwise logits / temperature.
  float temperature = 0.8f;
  // Keep the k most likely tokens (0: all).
  int32_t top_k = 40;
  // Keep the most likely tokens whose probabilities add up to top_p (1: all).
  float top_p = 0.95f;
  // Drop tokens less likely than min_p times the most likely one (0: none).
  float min_p = 0.05f;
  // > 1 makes tokens already in the prompt or the output less likely (CTRL /
  // Hugging Face rule: a positive logit is divided by it, a negative one multiplied).
  float repetition_penalty = 1.0f;
  // Same seed, same options, same logits: same tokens. -1: seeded from the OS.
  int64_t seed = -1;
};

// InvalidArgument naming the option when a value is out of range (NaN,
// negative temperature, top_p outside (0, 1], ...).
KILN_LLM_API Status check_sampling_options(const SamplingOptions& options);

class KILN_LLM_API Sampler {
 public:
  // Precondition: check_sampling_options(options) is ok.
  explicit Sampler(const SamplingOptions& options);
  // The next token from `logits` (one per vocabulary entry, modified in place:
  // the repetition penalty is applied to it). `history` are the tokens the
  // repetition penalty looks at. NaN logits are never drawn; a +inf logit is
  // drawn with probability 1 (docs/llm.md, "Sampling").
  int32_t sample(Span<float> logits, Span<const int32_t> history);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused across calls
};

}  // namespace kiln::llm
