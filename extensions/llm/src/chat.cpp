// ChatTemplate: recognizing a model's Jinja chat template and rendering conversations with it.
#include "kiln/llm/chat.h"

namespace kiln::llm {

Result<ChatTemplate> ChatTemplate::from_jinja(std::string_view jinja) {
  if (jinja.find("<|im_start|>") != std::string_view::npos && jinja.find("<|im_end|>") != std::string_view::npos) {
    // The system message a ChatML template inserts when the conversation has
    // none (SmolLM2: '<|im_start|>system\nYou are ...<|im_end|>\n'), when it is literal text.
    std::string system;
    for (std::string_view header :
         {std::string_view("<|im_start|>system\n"), std::string_view("<|im_start|>system\\n")}) {
      size_t at = jinja.find(header);
      if (at == std::string_view::npos) continue;
      size_t begin = at + header.size();
      size_t end = jinja.find("<|im_end|>", begin);
      if (end == std::string_view::npos) break;
      std::string_view text = jinja.substr(begin, end - begin);
      if (text.find_first_of("{}'\"+") == std::string_view::npos) system = std::string(text);
      break;
    }
    ChatTemplate t = chatml(std::move(system));
    t.jinja_ = std::string(jinja);
    return t;
  }
  return Status(Error::NotSupported,
                kiln::format("the chat template is not one kiln knows (supported: ChatML); it starts with \"%.60s\"",
                             std::string(jinja.substr(0, 60)).c_str()));
}

ChatTemplate ChatTemplate::chatml(std::string default_system) {
  ChatTemplate t;
  t.format_ = "chatml";
  t.default_system_ = std::move(default_system);
  return t;
}

Result<std::string> ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  KILN_CHECK_OR_RETURN(!messages.empty(), InvalidArgument, "the conversation has no messages");
  std::string out;
  if (!default_system_.empty() && messages[0].role != "system") {
    out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) {
    KILN_CHECK_OR_RETURN(!m.role.empty() && m.role.find('\n') == std::string::npos, InvalidArgument,
                         "a chat message has an empty or multi-line role");
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::vector<std::string> ChatTemplate::stop_strings() const { return {"<|im_end|>"}; }

}  // namespace kiln::llm
