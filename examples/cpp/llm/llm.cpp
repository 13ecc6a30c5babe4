// Generates text from a .kiln LLM program (`kiln llm export model.gguf -o model.kiln`):
// the weights, tokenizer, chat template and config all come from that one file.
//
//   llm MODEL.kiln [--prompt TEXT] [--chat] [--max-new-tokens N] [--temperature T]
//       [--top-k K] [--top-p P] [--seed S] [--cancel-after N]
//
// Streams the text to stdout; prints the stats to stderr. --cancel-after N stops
// from the callback after N pieces of text.
#include <kiln/kiln.h>
#include <kiln/llm.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MODEL.kiln [--prompt TEXT] [--chat] [--max-new-tokens N] [--temperature T] "
                 "[--top-k K] [--top-p P] [--seed S] [--cancel-after N]\n",
                 argv[0]);
    return 2;
  }
  std::string prompt = "The capital of France is";
  bool chat = false;
  int cancel_after = -1;
  kiln::llm::GenerateOptions options;
  options.max_new_tokens = 32;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--chat") {
      chat = true;
      continue;
    }
    if (value == nullptr) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    ++i;
    if (a == "--prompt")
      prompt = value;
    else if (a == "--max-new-tokens")
      options.max_new_tokens = std::atoi(value);
    else if (a == "--temperature")
      options.sampling.temperature = std::strtof(value, nullptr);
    else if (a == "--top-k")
      options.sampling.top_k = std::atoi(value);
    else if (a == "--top-p")
      options.sampling.top_p = std::strtof(value, nullptr);
    else if (a == "--seed")
      options.sampling.seed = std::atoll(value);
    else if (a == "--cancel-after")
      cancel_after = std::atoi(value);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }

  auto runner = kiln::llm::Runner::load(argv[1]);
  if (!runner.ok()) {
    std::fprintf(stderr, "%s\n", runner.status().to_string().c_str());
    return 1;
  }
  const kiln::llm::ModelConfig& config = runner->config();
  std::fprintf(stderr, "model %s: %s, vocabulary %d, context %d, weights %s\n", argv[1], config.name.c_str(),
               config.vocab_size, config.context_length, config.weights.c_str());
  std::fprintf(stderr, "runtime %s\n", kiln::runtime_library_path().c_str());

  int pieces = 0;
  auto on_text = [&](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return cancel_after < 0 || ++pieces < cancel_after;  // false: stop generating
  };
  kiln::Result<std::string> text =
      chat ? runner->chat({{"user", prompt}}, options, on_text) : runner->generate(prompt, options, on_text);
  std::printf("\n");
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", text.status().to_string().c_str());
    return 1;
  }
  const kiln::llm::GenerationStats& s = runner->stats();
  std::fprintf(stderr, "prompt %d tokens, generated %d, finish %s\n", s.prompt_tokens, s.generated_tokens,
               s.finish_reason.c_str());
  std::fprintf(stderr, "prefill %.1f tok/s\ndecode %.1f tok/s\ntime to first token %.1f ms\n", s.prefill_tokens_per_s,
               s.decode_tokens_per_s, s.time_to_first_token_ms);
  return 0;
}
