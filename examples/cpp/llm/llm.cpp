// Generates text from a .kiln LLM program (`kiln llm export model.gguf -o model.kiln`):
// the weights, tokenizer, chat template and config all come from that one file.
//
//   llm MODEL.kiln [--prompt TEXT] [--chat] [--max-new-tokens N] [--temperature T]
//       [--top-k K] [--top-p P] [--seed S] [--cancel-after N] [--batch N]
//
// Streams the text to stdout; prints the stats to stderr. --cancel-after N stops
// from the callback after N pieces of text. --batch N generates N answers to the
// prompt at once with kiln::llm::BatchRunner (seeds S, S + 1, ...; the program
// exported with --slots N or more) and prints each on a line of its own, "[i] text".
#include <kiln/kiln.h>
#include <kiln/llm.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

// N answers at once: one request per KV cache slot, one forward call per step.
int generate_batch(const char* path, const std::string& prompt, bool chat, kiln::llm::GenerateOptions options, int n) {
  auto batch = kiln::llm::BatchRunner::load(path);
  if (!batch.ok()) {
    std::fprintf(stderr, "%s\n", batch.status().to_string().c_str());
    return 1;
  }
  std::map<uint64_t, int> index;
  std::vector<std::string> texts(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    kiln::llm::RequestOptions request;
    request.generate = options;
    if (options.sampling.seed >= 0) request.generate.sampling.seed = options.sampling.seed + i;
    kiln::Result<std::vector<int32_t>> ids = std::vector<int32_t>();
    if (chat)
      ids = batch->chat_prompt({{"user", prompt}}, &request);
    else
      ids = batch->tokenizer().encode(prompt);
    if (!ids.ok()) {
      std::fprintf(stderr, "%s\n", ids.status().to_string().c_str());
      return 1;
    }
    auto id = batch->submit(std::move(ids).value(), request);
    if (!id.ok()) {
      std::fprintf(stderr, "%s\n", id.status().to_string().c_str());
      return 1;
    }
    index[id.value()] = i;
  }
  int finished = 0;
  std::vector<kiln::llm::TokenEvent> events;
  while (finished < n) {
    events.clear();
    kiln::Status st = batch->step(&events);
    if (!st.is_ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
    for (const kiln::llm::TokenEvent& e : events) {
      texts[static_cast<size_t>(index[e.request])] += e.text;
      if (e.finished) {
        ++finished;
        std::fprintf(stderr, "[%d] generated %d, finish %s\n", index[e.request], e.stats.generated_tokens,
                     e.stats.finish_reason.c_str());
      }
    }
  }
  for (int i = 0; i < n; ++i) std::printf("[%d] %s\n", i, texts[static_cast<size_t>(i)].c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MODEL.kiln [--prompt TEXT] [--chat] [--max-new-tokens N] [--temperature T] "
                 "[--top-k K] [--top-p P] [--seed S] [--cancel-after N] [--batch N]\n",
                 argv[0]);
    return 2;
  }
  std::string prompt = "The capital of France is";
  bool chat = false;
  int cancel_after = -1, batch = 0;
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
    else if (a == "--batch")
      batch = std::atoi(value);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }

  if (batch > 0) return generate_batch(argv[1], prompt, chat, options, batch);

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
