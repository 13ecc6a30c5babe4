// What Runner::load reads from an LLM program before it trusts it: the metadata and the method's signature.
#pragma once

#include <string>
#include <string_view>

#include "kiln/llm/runner.h"

namespace kiln::llm::internal {

struct LlmMetadata {
  ModelConfig config;
  Tokenizer tokenizer;
  int32_t slots = 1;  // KV cache regions: the bound of forward's row dimension
};

// Parses kiln.llm.config and kiln.llm.tokenizer and checks them against the
// spec of method 'forward' and the load options (docs/llm.md, "Metadata of an
// LLM program"): InvalidProgram (OutOfMemory beyond max_memory_bytes) naming
// the field, before anything is sized by them. Separate from Runner::load so
// that the fuzz target tests/cpp/fuzz/fuzz_llm_metadata.cpp reaches it without a program.
Result<LlmMetadata> read_llm_metadata(const std::string& path, std::string_view config_text,
                                      std::string_view tokenizer_text, const MethodSpec& spec,
                                      const LoadOptions& options);

}  // namespace kiln::llm::internal
