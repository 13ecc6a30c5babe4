// ChatTemplate: renders a conversation into a prompt the way the model was trained.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.h"
#include "kiln/llm/api.h"

namespace kiln::llm {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// kiln does not run Jinja: it recognizes the templates of the models it
// supports and renders them itself. Known: ChatML (<|im_start|>role\n...
// <|im_end|>\n, SmolLM2-Instruct, Qwen), with the default system message the
// template inserts when the conversation has none.
class KILN_LLM_API ChatTemplate {
 public:
  // NotSupported (quoting the start of the template) for an unknown template.
  static Result<ChatTemplate> from_jinja(std::string_view jinja);
  static ChatTemplate chatml(std::string default_system = "");

  // "chatml"
  const std::string& format() const { return format_; }
  const std::string& default_system() const { return default_system_; }
  const std::string& jinja() const { return jinja_; }
  // The prompt for `messages`, ending with the assistant's header when
  // add_generation_prompt is true. InvalidArgument for an empty conversation or role.
  Result<std::string> apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // Strings that end an assistant's turn ("<|im_end|>").
  std::vector<std::string> stop_strings() const;

 private:
  std::string format_;
  std::string default_system_;
  std::string jinja_;
};

}  // namespace kiln::llm
