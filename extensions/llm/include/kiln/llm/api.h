// Export macro of libkiln_llm.so.0 and the names of the metadata an LLM program carries.
#pragma once

// Built with hidden visibility like the runtime: only what carries this macro
// is exported. In a static build (KILN_STATIC) the library is embedded.
#if defined(KILN_STATIC)
#define KILN_LLM_API
#else
#define KILN_LLM_API [[gnu::visibility("default")]]
#endif

namespace kiln::llm {

// Named metadata of an LLM program (docs/llm.md, docs/format.md).
// The model config: JSON (ModelConfig).
inline constexpr const char* kConfigKey = "kiln.llm.config";
// The tokenizer: a Hugging Face tokenizer.json (Tokenizer::from_json).
inline constexpr const char* kTokenizerKey = "kiln.llm.tokenizer";
// The chat template: the model's own Jinja text (ChatTemplate::from_jinja).
inline constexpr const char* kChatTemplateKey = "kiln.llm.chat_template";

// The most KV cache slots (sequences decoded together) a program may have (kiln llm export --slots).
inline constexpr int kMaxSlots = 64;

}  // namespace kiln::llm
