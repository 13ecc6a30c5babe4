// fuzz_gguf: libFuzzer target for the GGUF reader and the tokenizer read from GGUF metadata. The
// input is a GGUF file; every outcome but an error value or a usable file is a bug, and so is
// holding more than 64x the input (fuzz_memory_bound.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_memory_bound.h"
#include "kiln/llm/gguf.h"
#include "kiln/llm/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_fuzz::MemoryBound bound(size);
  auto gguf = kiln::llm::GgufFile::from_copy(data, size, "fuzz.gguf");
  if (!gguf.ok()) return 0;
  for (const std::string& key : gguf->keys()) {
    if (gguf->find(key) == nullptr) std::abort();  // every key listed can be found
    (void)gguf->get_string(key);
    (void)gguf->get_int(key);
    (void)gguf->get_float(key);
  }
  unsigned sum = 0;
  for (size_t i = 0; i < gguf->tensors().size(); ++i) {
    kiln::Span<const uint8_t> bytes = gguf->tensor_data(i);  // ASan: inside the copy
    if (bytes.size() > 0) sum += bytes[0] + bytes[bytes.size() - 1];
  }
  (void)sum;
  auto tokenizer = kiln::llm::Tokenizer::from_gguf(gguf.value());
  if (!tokenizer.ok()) return 0;
  std::string text(reinterpret_cast<const char*>(data), size < 256 ? size : 256);
  std::vector<int32_t> ids = tokenizer->encode(text + " Hello, 123 wörld <|im_end|>");
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  (void)tokenizer->decode(kiln::Span<const int32_t>(ids.data(), ids.size()));
  // to_json must give a document from_json reads back as the same vocabulary.
  auto again = kiln::llm::Tokenizer::from_json(tokenizer->to_json());
  if (!again.ok() || again->vocab_size() != tokenizer->vocab_size()) std::abort();
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    if (again->token_bytes(id) != tokenizer->token_bytes(id) || again->is_special(id) != tokenizer->is_special(id)) {
      std::abort();
    }
  }
  return 0;
}
