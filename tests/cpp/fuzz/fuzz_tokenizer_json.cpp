// fuzz_tokenizer_json: libFuzzer target for the JSON reader and Tokenizer::from_json. The input
// is a tokenizer.json; every outcome but an error value or a usable tokenizer is a bug, and so
// is holding more than 64x the input (fuzz_memory_bound.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_memory_bound.h"
#include "kiln/llm/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_fuzz::MemoryBound bound(size);
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tokenizer = kiln::llm::Tokenizer::from_json(json);
  if (!tokenizer.ok()) return 0;
  std::vector<int32_t> ids = tokenizer->encode(json.substr(0, 256));
  std::vector<int32_t> more = tokenizer->encode("The 2 quick 日本 foxes' 😀\n\n  <|endoftext|>", false);
  ids.insert(ids.end(), more.begin(), more.end());
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  auto text = tokenizer->decode(kiln::Span<const int32_t>(ids.data(), ids.size()));
  if (!text.ok()) std::abort();
  kiln::llm::StreamDecoder stream(tokenizer.value());
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id).value();
  streamed += stream.flush();
  if (streamed != text.value()) std::abort();  // the pieces add up to decode()
  auto again = kiln::llm::Tokenizer::from_json(tokenizer->to_json());
  if (!again.ok() || again->vocab_size() != tokenizer->vocab_size()) std::abort();
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    if (again->token_bytes(id) != tokenizer->token_bytes(id)) std::abort();
  }
  return 0;
}
