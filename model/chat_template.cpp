#include "model/chat_template.h"

#include "kernels/check.h"
#include "model/tokenizer.h"

namespace troupe::model {

std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string system, turns;
  bool has_system = false;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      if (has_system) system += "\n\n";
      system += m.content;
      has_system = true;
    } else if (m.role == "user") {
      turns.append(kUserToken).append(m.content);
    } else if (m.role == "assistant") {
      turns.append(kAssistantToken).append(m.content).append(kEosToken);
    } else {
      TROUPE_FAIL("unsupported chat message role '" << m.role
                                                    << "' (expected system, user or assistant)");
    }
  }
  std::string prompt(kBosToken);
  prompt += system;
  prompt += turns;
  if (add_generation_prompt) prompt += kAssistantToken;
  return prompt;
}

}  // namespace troupe::model
