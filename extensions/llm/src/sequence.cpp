// Sequence (sequence.h): what a generation does with each sampled token.
#include "sequence.h"

#include <algorithm>

namespace kiln::llm::internal {

Status prepare_prompt(const ModelConfig& config, const GenerateOptions& options, std::vector<int32_t>* prompt) {
  KILN_RETURN_IF_ERROR(check_sampling_options(options.sampling));
  KILN_CHECK_OR_RETURN(options.max_new_tokens >= 1, InvalidArgument, "max_new_tokens must be at least 1, got %d",
                       options.max_new_tokens);
  KILN_CHECK_OR_RETURN(!prompt->empty(), InvalidArgument, "the prompt is empty");
  for (const std::string& stop : options.stop_strings) {
    KILN_CHECK_OR_RETURN(!stop.empty(), InvalidArgument, "a stop string is empty");
  }
  if (config.add_bos && (*prompt)[0] != config.bos_id) prompt->insert(prompt->begin(), config.bos_id);
  for (int32_t id : *prompt) {
    KILN_CHECK_OR_RETURN(id >= 0 && id < config.vocab_size, InvalidArgument,
                         "prompt token %d is outside the vocabulary of %d", id, config.vocab_size);
  }
  KILN_CHECK_OR_RETURN(prompt->size() < static_cast<size_t>(config.context_length), InvalidArgument,
                       "the prompt is %zu tokens but the model's context holds %d (export with a larger --context, "
                       "or shorten the prompt)",
                       prompt->size(), config.context_length);
  return Status::ok();
}

void Sequence::start(const ModelConfig& config, const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                     const GenerateOptions& generate_options) {
  started = std::chrono::steady_clock::now();
  stats = GenerationStats();
  stats.prompt_tokens = static_cast<int32_t>(prompt.size());
  options = generate_options;
  if (!options.ignore_eos) {
    for (int32_t id : config.stop_ids) options.stop_tokens.push_back(id);
  }
  sampler.emplace(options.sampling);
  decoder.emplace(tokenizer, /*skip_special=*/true);
  held.clear();
  generated.clear();
  history = prompt;
  decode_steps = 0;
  active = true;
}

void Sequence::finish(const char* reason, bool flush, std::string* piece) {
  if (flush) *piece += held + decoder->flush();
  held.clear();
  stats.finish_reason = reason;
  stats.generated_tokens = static_cast<int32_t>(generated.size());
  active = false;
}

Result<bool> Sequence::accept(int32_t token, int32_t position, int32_t context_length, std::string* piece) {
  if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) != options.stop_tokens.end()) {
    finish("stop_token", true, piece);
    return true;
  }
  generated.push_back(token);
  history.push_back(token);
  auto text = decoder->push(token);
  if (!text.ok()) return text.status();
  held += text.value();
  // A stop string ends the text where it starts; otherwise hold back only what
  // could still become one.
  size_t cut = std::string::npos;
  for (const std::string& stop : options.stop_strings) cut = std::min(cut, held.find(stop));
  if (cut != std::string::npos) {
    *piece += held.substr(0, cut);
    held.clear();
    finish("stop_string", false, piece);
    return true;
  }
  size_t hold = 0;
  for (const std::string& stop : options.stop_strings) {
    for (size_t len = std::min(stop.size() - 1, held.size()); len > hold; --len) {
      if (held.compare(held.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  *piece += held.substr(0, held.size() - hold);
  held.erase(0, held.size() - hold);

  if (static_cast<int32_t>(generated.size()) >= options.max_new_tokens) {
    finish("max_new_tokens", true, piece);
    return true;
  }
  if (position >= context_length) {
    finish("context_full", true, piece);
    return true;
  }
  stats.generated_tokens = static_cast<int32_t>(generated.size());
  return false;
}

void Sequence::count_decode_step(double ms) {
  stats.decode_ms += ms;
  ++decode_steps;
  stats.decode_tokens_per_s = stats.decode_ms > 0 ? decode_steps / (stats.decode_ms / 1000.0) : 0;
}

}  // namespace kiln::llm::internal
