// UTF-8 and Unicode helpers for the tokenizer (classes from unicode_tables.inc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm::internal {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

// \p{L}, \p{N}, \s (White_Space), or none of them: the classes of the GPT-2 split.
CharClass char_class(uint32_t cp);
// Rust's char::is_numeric (categories N*, at the Unicode version of the Rust
// standard library `tokenizers` is built with): what the Digits pre-tokenizer splits on.
bool is_numeric(uint32_t cp);

// Decodes valid UTF-8 into code points and their byte offsets (offsets has one
// more entry: the end). Invalid bytes become U+FFFD of length 1.
void decode_utf8(std::string_view s, std::vector<uint32_t>* cps, std::vector<size_t>* offsets);
void append_utf8(std::string& out, uint32_t cp);

// Valid UTF-8 with every invalid maximal subpart replaced by U+FFFD (as
// Rust's String::from_utf8_lossy and Python's errors="replace" do).
std::string utf8_lossy(std::string_view bytes);
// Length of the longest prefix of `bytes` after which only the start of a
// character that later bytes could still complete remains.
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace kiln::llm::internal
