// Tokenizer: byte-level BPE (GPT-2, SmolLM2, Llama 3, Qwen2) or SentencePiece
// (Llama 2, Mistral, Gemma) read from a Hugging Face tokenizer.json or from GGUF
// metadata; StreamDecoder: token-by-token text that never splits a UTF-8 character.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.h"
#include "kiln/llm/api.h"
#include "kiln/span.h"

namespace kiln::llm {

class GgufFile;

namespace internal {
struct TokenizerData;
}

// Encodes like Hugging Face `tokenizers` with add_special_tokens=False: added
// tokens (special or not) are matched verbatim in the text first (longest
// first), the rest is pre-tokenized (optional individual digits, then the
// GPT-2, Llama 3 or Qwen2 split) and merged by BPE rank. Decodes like
// `tokenizers` too: bytes of the byte-level alphabet, invalid UTF-8 replaced
// by U+FFFD. A SentencePiece GGUF encodes as llama.cpp does (merges by score).
// Supported tokenizer.json parts: normalizer null; pre_tokenizer ByteLevel,
// Digits, Split with Llama 3's or Qwen2's pattern (behavior Isolated), or a
// Sequence of them; model BPE (no dropout); decoder ByteLevel. BPE with
// byte_fallback in the form transformers writes for Llama 2 (normalizer
// Sequence[Prepend, Replace], no pre_tokenizer, decoder Sequence[Replace,
// ByteFallback, Fuse, Strip]). Anything else is NotSupported, naming it.
class KILN_LLM_API Tokenizer {
 public:
  static Result<Tokenizer> from_json(std::string_view json);
  // A regular file of at most 256 MiB (a FIFO or a device is InvalidArgument).
  static Result<Tokenizer> from_json_file(const std::string& path);
  // tokenizer.ggml.model "gpt2" with tokenizer.ggml.pre "smollm" (digits split
  // one by one), "gpt-2"/"default", "llama-bpe"/"llama3"/"llama-v3" (Llama 3's
  // split, whole words in the vocabulary taken before merges) or "qwen2";
  // control and user-defined tokens are added tokens (control ones special).
  // tokenizer.ggml.model "llama" (SentencePiece: Llama 2, Mistral, Gemma):
  // tokens, scores, token types (byte tokens <0xXX>), add_space_prefix
  // (default true), encoded as llama.cpp's SPM does; control and unknown tokens
  // are special. A token type outside 0..6, a score list of another length or
  // a byte token that is not <0xXX> is InvalidProgram.
  static Result<Tokenizer> from_gguf(const GgufFile& gguf);
  static Result<Tokenizer> from_gguf_file(const std::string& path);

  // A Hugging Face tokenizer.json equivalent to this tokenizer, always valid
  // UTF-8; from_json reads back the same vocabulary. A token that is not valid
  // UTF-8 (a GGUF vocabulary may hold one) has its stray bytes written as
  // \udcXX escapes, which only kiln reads back as bytes.
  std::string to_json() const;

  // Added tokens in the text become their ids when parse_special is true;
  // otherwise they are encoded as plain text.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // InvalidArgument for an id outside the vocabulary.
  Result<std::string> decode(Span<const int32_t> ids, bool skip_special = false) const;

  int32_t vocab_size() const;
  // The token's text as the vocabulary spells it ("Ġthe"); "" out of range.
  std::string id_to_token(int32_t id) const;
  // -1 when absent.
  int32_t token_to_id(std::string_view token) const;
  // The bytes a token decodes to (special tokens: their text).
  std::string token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  // Ids of the special added tokens, ascending.
  std::vector<int32_t> special_ids() const;
  // -1 when the tokenizer does not name them.
  int32_t bos_id() const;
  int32_t eos_id() const;
  // SentencePiece with the space prefix: decode() drops the leading space of
  // the first token that gives text (the one the encoder's prefix added).
  bool drops_leading_space() const;

  Tokenizer(const Tokenizer&) = default;
  Tokenizer& operator=(const Tokenizer&) = default;
  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  ~Tokenizer();

 private:
  explicit Tokenizer(std::shared_ptr<const internal::TokenizerData> data);
  std::shared_ptr<const internal::TokenizerData> d_;
};

// Turns generated tokens into text as they come: push() returns only complete
// UTF-8 characters and keeps an incomplete one until the bytes that finish it
// arrive; bytes that can never form a character become U+FFFD, as decode()
// does. The concatenation of every push() and flush() equals decode(ids).
class KILN_LLM_API StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  // InvalidArgument for an id outside the vocabulary.
  Result<std::string> push(int32_t id);
  // The rest: an unfinished character at the end becomes U+FFFD.
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::string pending_;   // bytes of an unfinished character
  bool at_start_ = true;  // no token has given bytes yet
};

}  // namespace kiln::llm
